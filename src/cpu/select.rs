//! Keypoint selection: per-level budget and spatial spread (CPU reference for
//! `kernels/select.cu`).

use super::Corner;
use crate::config::SelectConfig;
use crate::image::GrayImage;

/// ORB's split of `total` keypoints over `levels` levels (geometric in the scale).
pub fn features_per_level(total: usize, levels: usize, scale_factor: f32) -> Vec<usize> {
    let _ = (total, levels, scale_factor);
    todo!("select::features_per_level")
}

/// Keeps the `n` best corners by response (deterministic tie-break).
pub fn retain_best(corners: &mut Vec<Corner>, n: usize) {
    let _ = (corners, n);
    todo!("select::retain_best")
}

/// Keeps at most `n` corners, spread as configured.
pub fn select(
    corners: &mut Vec<Corner>,
    n: usize,
    cfg: &SelectConfig,
    width: usize,
    height: usize,
) {
    let _ = (corners, n, cfg, width, height);
    todo!("select::select")
}

/// ORB-SLAM3's per-cell FAST with the low-threshold retry for empty cells.
pub fn fast_in_cells(
    img: &GrayImage,
    threshold: u8,
    min_threshold: u8,
    nonmax_suppression: bool,
    cell_size: u32,
    border: u32,
) -> Vec<Corner> {
    let _ = (
        img,
        threshold,
        min_threshold,
        nonmax_suppression,
        cell_size,
        border,
    );
    todo!("select::fast_in_cells")
}
