//! Intensity-centroid orientation (CPU reference for `kernels/orient.cu`).

use crate::image::GrayImage;

/// Half-widths of the circular patch per row offset (ORB's `umax`).
pub fn circle_extents(half_patch: u32) -> Vec<i32> {
    let _ = half_patch;
    todo!("orient::circle_extents")
}

/// ORB's `IC_Angle`, degrees in [0, 360).
pub fn ic_angle(img: &GrayImage, x: u32, y: u32, umax: &[i32]) -> f32 {
    let _ = (img, x, y, umax);
    todo!("orient::ic_angle")
}
