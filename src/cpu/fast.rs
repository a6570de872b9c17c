//! FAST-9/16 (CPU reference for `kernels/fast_harris.cu`), identical to
//! `cv::FAST(img, threshold, nonmaxSuppression)` with `TYPE_9_16`.

use super::Corner;
use crate::image::GrayImage;

/// All FAST corners in raster order (y, then x), `response` = FAST score as f32.
pub fn detect(img: &GrayImage, threshold: u8, nonmax_suppression: bool) -> Vec<Corner> {
    let _ = (img, threshold, nonmax_suppression);
    todo!("fast::detect")
}
