//! The pyramid's geometry, shared by the backends and the host-side selection: the scale
//! and the size of every level, as OpenCV's ORB or as ORB-SLAM3 computes them ([`Scales`]).
//!
//! May import: nothing of the crate.

/// The most pyramid levels (`pyramid.levels`); the GPU kernels' level tables hold this
/// many (`MAX_LEVELS` in kernels/common.cuh).
pub const MAX_LEVELS: usize = 32;

/// Whose level tables the pyramid follows (`pyramid.scales`). Both give the same scales up
/// to level 4 for a factor of 1.2; from level 5 on they differ in the last bit, which moves
/// level sizes, level-0 coordinates and keypoint sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scales {
    /// OpenCV ORB: `(float)pow((double)factor, level)`; keypoint size `patch * scale`.
    #[default]
    Orb,
    /// ORB-SLAM3's `ORBextractor`: the running `f32` product `s[l] = s[l-1] * factor`, level
    /// sizes from `1.0f / s[l]`; keypoint size `int(patch * s[l])` (truncated).
    OrbSlam3,
}

/// ORB's `layerScale[level]` = `(float)pow((double)scale_factor, level)`: level coordinates
/// times this are level-0 coordinates. `cv::ORB::create` takes the factor as a `float`, so
/// 1.2 is widened from `1.2f` (1.2000000477), not the double 1.2: from level 3 on the two
/// give different `f32` scales, and rarely different level sizes (a 324-px side is 187 px
/// at level 3 in ORB, 188 with the double).
/// With [`Scales::OrbSlam3`], ORB-SLAM3's `mvScaleFactor[level]` instead.
pub fn level_scale(scales: Scales, scale_factor: f32, level: usize) -> f32 {
    match scales {
        Scales::Orb => (scale_factor as f64).powf(level as f64) as f32,
        Scales::OrbSlam3 => (0..level).fold(1.0f32, |s, _| s * scale_factor),
    }
}

/// ORB's size of `level`: `(cvRound(w0 * s), cvRound(h0 * s))` with
/// `s = 1.f / layerScale[level]`, all in `f32`, rounding half to even.
/// ORB-SLAM3 (`ComputePyramid`) rounds the same way from its own scale.
pub fn level_size(
    scales: Scales,
    w0: usize,
    h0: usize,
    scale_factor: f32,
    level: usize,
) -> (usize, usize) {
    let s = 1.0f32 / level_scale(scales, scale_factor, level);
    let r = |n: usize| (n as f32 * s).round_ties_even() as usize;
    (r(w0), r(h0))
}
