//! Image pyramid (CPU reference for `kernels/pyramid.cu`).

use crate::image::GrayImage;

/// Fills `levels[1..n]` from `levels[0]` (grows/shrinks the vector, reusing buffers).
pub fn build(levels: &mut Vec<GrayImage>, n: usize, scale_factor: f32) {
    let _ = (levels, n, scale_factor);
    todo!("pyramid::build")
}
