//! Image pyramid (CPU reference for `kernels/pyramid.cu`).

use crate::config::Interpolation;
use crate::image::GrayImage;

/// Fills `levels[1..n]` from `levels[0]` (grows/shrinks the vector, reusing buffers).
pub fn build(
    levels: &mut Vec<GrayImage>,
    n: usize,
    scale_factor: f32,
    interpolation: Interpolation,
) {
    let _ = (levels, n, scale_factor, interpolation);
    todo!("pyramid::build")
}
