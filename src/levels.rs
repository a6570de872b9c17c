//! ORB's pyramid geometry, shared by the backends and the host-side selection: the scale
//! and the size of every level.
//!
//! May import: nothing of the crate.

/// The most pyramid levels (`pyramid.levels`); the GPU kernels' level tables hold this
/// many (`MAX_LEVELS` in kernels/common.cuh).
pub const MAX_LEVELS: usize = 32;

/// ORB's `layerScale[level]` = `(float)pow((double)scale_factor, level)`: level coordinates
/// times this are level-0 coordinates. `cv::ORB::create` takes the factor as a `float`, so
/// 1.2 is widened from `1.2f` (1.2000000477), not the double 1.2: from level 3 on the two
/// give different `f32` scales, and rarely different level sizes (a 324-px side is 187 px
/// at level 3 in ORB, 188 with the double).
pub fn level_scale(scale_factor: f32, level: usize) -> f32 {
    (scale_factor as f64).powf(level as f64) as f32
}

/// ORB's size of `level`: `(cvRound(w0 * s), cvRound(h0 * s))` with
/// `s = 1.f / layerScale[level]`, all in `f32`, rounding half to even.
pub fn level_size(w0: usize, h0: usize, scale_factor: f32, level: usize) -> (usize, usize) {
    let s = 1.0f32 / level_scale(scale_factor, level);
    let r = |n: usize| (n as f32 * s).round_ties_even() as usize;
    (r(w0), r(h0))
}
