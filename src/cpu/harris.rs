//! Harris scores (CPU reference for `kernels/fast_harris.cu` and `kernels/harris.cu`).

use super::Corner;
use crate::image::GrayImage;

/// ORB's Harris score at (x, y) (`HarrisResponses` in OpenCV's orb.cpp).
pub fn orb_score(img: &GrayImage, x: u32, y: u32, block_size: u32, k: f32) -> f32 {
    let _ = (img, x, y, block_size, k);
    todo!("harris::orb_score")
}

/// Dense `cv::cornerHarris` corners: 3x3 local maxima above `quality * max response`.
pub fn dense_corners(
    img: &GrayImage,
    block_size: u32,
    ksize: u32,
    k: f32,
    quality: f32,
) -> Vec<Corner> {
    let _ = (img, block_size, ksize, k, quality);
    todo!("harris::dense_corners")
}
