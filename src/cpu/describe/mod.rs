//! ORB's rBRIEF descriptor, bit for bit as OpenCV's `ORB::detectAndCompute` computes it
//! (CPU reference for `kernels/describe.cu`).
//!
//! # Note: descriptor semantics
//!
//! Shared by this module, `kernels/describe.cu` and `src/cuda/describe.rs`; pinned against
//! OpenCV 5.0's `computeOrbDescriptors` (goldens from `ORB::create(2000).detectAndCompute`,
//! `tests/exact_describe.rs`).
//!
//! 1. **Blur.** (`describe.blur: orb`; with `orb_slam3` the level is blurred as ORB-SLAM3
//!    does, on a continuous clone: OpenCV's fixed-point path, [`gaussian_blur`].) Each level is smoothed with `GaussianBlur(7x7, sigma 2, BORDER_REFLECT_101)`
//!    the way ORB calls it: on a non-isolated ROI of its padded pyramid, which sends OpenCV
//!    down its *float* separable path, not the fixed-point one that `cv2.GaussianBlur` takes
//!    on a standalone image (they differ at 2-3% of pixels). Kernel `k` =
//!    `getGaussianKernel(7, 2, CV_32F)`. Row pass: `s = 0; s = fma(p[x-3+i], k[i], s)` for
//!    i = 0..7; column pass: `s = r[y] * k[3]; s = fma(r[y+j] + r[y-j], k[3+j], s)` for
//!    j = 1..=3; output `saturate_u8(round_half_even(s))`. Borders reflect (101).
//! 2. **Centre.** `cx = round_half_even(kp.x * (1 / s_l))`, likewise `cy`, in `f32`, with
//!    `s_l` the level's ORB scale (`pyramid::level_scale`).
//! 3. **Rotation.** `t = angle * 0.0174532924f` (`f32`), `a = (float)cos((double)t)`,
//!    `b = (float)sin((double)t)`. The angle is used as it is, -1 included (orientation off),
//!    as OpenCV's `compute` does with keypoints that carry -1.
//! 4. **Samples.** For a pattern point `(px, py)`: `X = px*a - py*b`, `Y = px*b + py*a` in
//!    `f32` without FMA (with `describe.fma`, as GCC contracts them: [`rotate`]), then
//!    `round_half_even`; the sample is the blurred level at
//!    `(cx + X, cy + Y)`.
//! 5. **Bits.** Byte `i`, bit `j` (LSB first) = `sample(p1) < sample(p2)` for pattern row
//!    `8i + j` ([`ORB_PATTERN`]).
//!
//! **Border.** A rotated pattern point lies within 19 pixels of the centre. OpenCV reads
//! outside the level from its padded pyramid buffer: 32 pixels of `BORDER_REFLECT_101` of
//! the *unblurred* level (the in-place blur only writes the ROI). We read the same thing for
//! every position outside the level, however far, so every keypoint gets a descriptor: for
//! `detector.border >= 19` (ORB's 31 included) no sample leaves the level; for smaller
//! borders the result equals what OpenCV computes where its padding reaches.

use super::blur::{gaussian_blur, reflect101, BlurScratch};
use super::fma::{Fma, Fused};
pub use super::orb_blur::{blur_kernel, blur_level, blur_level_around, BlurBuffers};
use super::orb_pattern::ORB_PATTERN;
use super::pyramid::level_scale;
use crate::config::{Config, DescriptorBlur, Scales};
use crate::features::{Descriptor, Keypoint};
use crate::image::{AsGray, Gray, GrayImage};

/// `deg * (float)(CV_PI / 180)`, then `cos`/`sin` in `f64` rounded to `f32` (step 3).
pub fn rotation(angle_deg: f32) -> (f32, f32) {
    let t = (angle_deg * (std::f64::consts::PI / 180.0) as f32) as f64;
    (t.cos() as f32, t.sin() as f32)
}

/// What the descriptor stage takes from the config: the level geometry and the blur.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DescribeSettings {
    pub scales: Scales,
    pub scale_factor: f32,
    pub blur: DescriptorBlur,
    /// The rotated offsets with FMA ([`rotate`]).
    pub fma: bool,
}

impl DescribeSettings {
    pub fn from_config(cfg: &Config) -> Self {
        DescribeSettings {
            scales: cfg.pyramid.scales,
            scale_factor: cfg.pyramid.scale_factor,
            blur: cfg.describe.blur,
            fma: cfg.describe.fma,
        }
    }

    /// OpenCV ORB's settings for `scale_factor`.
    pub fn orb(scale_factor: f32) -> Self {
        DescribeSettings {
            scales: Scales::Orb,
            scale_factor,
            blur: DescriptorBlur::Orb,
            fma: false,
        }
    }
}

/// The keypoint's pixel on its level (step 2). With ORB-SLAM3's scales this gives back the
/// level pixel it was found at (ORB-SLAM3 describes before scaling to level 0).
pub fn center(kp: &Keypoint, scales: Scales, scale_factor: f32) -> (i32, i32) {
    let inv = 1.0f32 / level_scale(scales, scale_factor, kp.octave.max(0) as usize);
    (
        (kp.x * inv).round_ties_even() as i32,
        (kp.y * inv).round_ties_even() as i32,
    )
}

/// `round_half_even(v)` for |v| < 2^22: adding and removing 1.5 * 2^23 leaves the nearest
/// integer under the default rounding mode (ties to even), as `f32::round_ties_even` does,
/// but inline: without SSE4.1 in the baseline target that one is a libm call, which made the
/// blur and the sampling ~3x slower.
#[inline(always)]
fn round_even_small(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (v + MAGIC) - MAGIC
}

/// One rotated pattern offset (step 4): `(round(px*a - py*b), round(px*b + py*a))`.
///
/// `fma` (`describe.fma`): the sums as GCC contracts them where FMA is in the target
/// (ORB-SLAM3 built with its `-march=native` on a CPU with FMA, or any aarch64 build): the
/// first product fused, `fma(px, a, -(py*b))` and `fma(px, b, py*a)` (read off g++ 12's
/// code for ORB-SLAM3's `GET_VALUE` expression).
#[inline]
pub fn rotate(px: i8, py: i8, a: f32, b: f32, fma: bool) -> (i32, i32) {
    let (px, py) = (px as f32, py as f32);
    let (x, y) = if fma {
        (px.mul_add(a, -(py * b)), px.mul_add(b, py * a))
    } else {
        // Two products rounded separately, then the sum: Rust never contracts to FMA.
        (px * a - py * b, px * b + py * a)
    };
    (round_even_small(x) as i32, round_even_small(y) as i32)
}

/// Buffers of the descriptor stage, reused from frame to frame.
#[derive(Default)]
pub struct DescribeScratch {
    /// Blurred copy of each level that has keypoints (step 1).
    blurred: Vec<GrayImage>,
    blur: BlurBuffers,
    /// The fixed-point blur's buffers (`describe.blur: orb_slam3`).
    fixed: BlurScratch,
    /// Per level, both blurs' buffers, for [`describe_into_threaded`].
    per_level: Vec<(BlurBuffers, BlurScratch)>,
}

impl DescribeScratch {
    /// The blurred levels of the last [`describe_into`] call: levels without keypoints are
    /// left stale, and ORB's float blur ([`DescriptorBlur::Orb`]) is computed only where the
    /// descriptors read ([`blur_level_around`]).
    pub fn blurred(&self) -> &[GrayImage] {
        &self.blurred
    }
}

/// The 512 pattern points as floats: point `2r` is `(x1, y1)` of [`ORB_PATTERN`] row `r`,
/// point `2r + 1` its `(x2, y2)`.
struct PatternPoints {
    x: [f32; 512],
    y: [f32; 512],
}

const PATTERN_POINTS: PatternPoints = {
    let (mut x, mut y) = ([0f32; 512], [0f32; 512]);
    let mut r = 0;
    while r < 256 {
        let [x1, y1, x2, y2] = ORB_PATTERN[r];
        x[2 * r] = x1 as f32;
        y[2 * r] = y1 as f32;
        x[2 * r + 1] = x2 as f32;
        y[2 * r + 1] = y2 as f32;
        r += 1;
    }
    PatternPoints { x, y }
};

/// `v` rounded half to even, as `i32`, for |v| < 2^22: the low mantissa bits of
/// `v + 1.5 * 2^23` are the rounded value plus 2^22 (integer work that vectorizes).
#[inline(always)]
fn round_even_i32(v: f32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    ((v + MAGIC).to_bits() & 0x7f_ffff) as i32 - (1 << 22)
}

/// The sample at `(x, y)`: the blurred level inside it, the unblurred level reflected (101)
/// outside it (the note's "Border").
#[inline]
fn sample_at(blurred: &GrayImage, raw: Gray<'_>, x: i32, y: i32) -> u8 {
    let (w, h) = (blurred.width as i32, blurred.height as i32);
    if x >= 0 && y >= 0 && x < w && y < h {
        blurred.data[y as usize * blurred.width + x as usize]
    } else {
        raw.get(
            reflect101(x as isize, raw.width),
            reflect101(y as isize, raw.height),
        )
    }
}

/// The descriptor of one keypoint (steps 3-5) from its level's blurred and raw images.
///
/// The 512 rotated offsets are computed first, as arrays (the same `f32` operations per
/// point as [`rotate`], vectorized across points), then read as one linear offset each;
/// per-sample rotation was half the stage's time.
pub fn describe_one(
    blurred: &GrayImage,
    raw: impl AsGray,
    cx: i32,
    cy: i32,
    angle: f32,
    fma: bool,
) -> Descriptor {
    describe_one_impl(blurred, raw.gray(), cx, cy, angle, fma, Fused)
}

#[inline(always)]
fn describe_one_impl(
    blurred: &GrayImage,
    raw: Gray<'_>,
    cx: i32,
    cy: i32,
    angle: f32,
    fma: bool,
    m: impl Fma,
) -> Descriptor {
    let (a, b) = rotation(angle);
    let (w, h) = (blurred.width as i32, blurred.height as i32);
    let (px, py) = (&PATTERN_POINTS.x, &PATTERN_POINTS.y);
    let (mut dx, mut dy) = ([0i32; 512], [0i32; 512]);
    if fma {
        for i in 0..512 {
            dx[i] = round_even_i32(m.fma(px[i], a, -(py[i] * b)));
            dy[i] = round_even_i32(m.fma(px[i], b, py[i] * a));
        }
    } else {
        // Two products rounded separately, then the sum: Rust never contracts to FMA.
        for i in 0..512 {
            dx[i] = round_even_i32(px[i] * a - py[i] * b);
            dy[i] = round_even_i32(px[i] * b + py[i] * a);
        }
    }
    let mut v = [0u8; 512];
    // A rotated pattern point is within REACH pixels of the centre (ORB_PATTERN's docs).
    if cx >= REACH && cy >= REACH && cx + REACH < w && cy + REACH < h {
        let centre = cy as isize * w as isize + cx as isize;
        let mut ofs = [0isize; 512];
        for i in 0..512 {
            ofs[i] = dy[i] as isize * w as isize + dx[i] as isize;
        }
        for (s, &o) in v.iter_mut().zip(&ofs) {
            *s = blurred.data[(centre + o) as usize];
        }
    } else {
        for (i, s) in v.iter_mut().enumerate() {
            *s = sample_at(blurred, raw, cx + dx[i], cy + dy[i]);
        }
    }
    let mut d = [0u8; 32];
    for (i, byte) in d.iter_mut().enumerate() {
        for j in 0..8 {
            let r = 8 * i + j;
            *byte |= ((v[2 * r] < v[2 * r + 1]) as u8) << j;
        }
    }
    d
}

/// Descriptors of `keypoints` (found on `levels`, whose geometry and blur `set` gives)
/// into `out`, one per keypoint, in the same order. Only levels that have keypoints are
/// blurred.
pub fn describe_into(
    levels: &[Gray<'_>],
    set: DescribeSettings,
    keypoints: &[Keypoint],
    scratch: &mut DescribeScratch,
    out: &mut Vec<Descriptor>,
) {
    out.clear();
    scratch
        .blurred
        .resize_with(levels.len(), GrayImage::default);
    let used = used_levels(keypoints, levels.len());
    for (l, img) in levels.iter().enumerate() {
        if is_used(used, l) {
            let b = &mut scratch.blurred[l];
            let on = centres_on(keypoints, l, levels.len(), set);
            blur_for(set.blur, *img, b, &mut scratch.blur, &mut scratch.fixed, on);
        }
    }
    out.resize(keypoints.len(), [0; 32]);
    describe_all(levels, &scratch.blurred, set, keypoints, out);
}

super::simd::versions! {
    /// Steps 2-5 of every keypoint at the process's SIMD level, with the FMA that level
    /// has (`describe.fma`; the same bits on every level: `cpu::fma`).
    fn describe_all(levels: &[Gray<'_>], blurred: &[GrayImage], set: DescribeSettings, keypoints: &[Keypoint], out: &mut [Descriptor]) = describe_all_impl, fma;
}

#[inline(always)]
fn describe_all_impl(
    levels: &[Gray<'_>],
    blurred: &[GrayImage],
    set: DescribeSettings,
    keypoints: &[Keypoint],
    out: &mut [Descriptor],
    m: impl Fma,
) {
    // A plain loop: an iterator adapter's fold was not inlined into the SIMD copies.
    for (kp, d) in keypoints.iter().zip(out.iter_mut()) {
        let l = level_of(kp, levels.len());
        let (cx, cy) = center(kp, set.scales, set.scale_factor);
        *d = describe_one_impl(&blurred[l], levels[l], cx, cy, kp.angle, set.fma, m);
    }
}

/// [`describe_into`] on the current rayon pool, the same descriptors: the used levels
/// blurred in parallel (each with its own buffers), then the keypoints in chunks.
pub fn describe_into_threaded(
    levels: &[Gray<'_>],
    set: DescribeSettings,
    keypoints: &[Keypoint],
    scratch: &mut DescribeScratch,
    out: &mut Vec<Descriptor>,
) {
    use rayon::prelude::*;
    let n = levels.len();
    scratch.blurred.resize_with(n, GrayImage::default);
    scratch.per_level.resize_with(n, Default::default);
    let used = used_levels(keypoints, n);
    scratch.blurred[..n]
        .par_iter_mut()
        .zip(scratch.per_level[..n].par_iter_mut())
        .enumerate()
        .filter(|(l, _)| is_used(used, *l))
        .for_each(|(l, (b, (buf, fixed)))| {
            let on = centres_on(keypoints, l, n, set);
            blur_for(set.blur, levels[l], b, buf, fixed, on)
        });
    out.clear();
    out.resize(keypoints.len(), [0; 32]);
    let blurred = &scratch.blurred;
    const CHUNK: usize = 64;
    out.par_chunks_mut(CHUNK)
        .zip(keypoints.par_chunks(CHUNK))
        .for_each(|(o, k)| describe_all(levels, blurred, set, k, o));
}

/// The levels (of `n`) that keypoints are described on ([`level_of`]: an octave past the
/// last level counts as the last), as bits (levels 0..64; the pyramid has at most 32).
fn used_levels(keypoints: &[Keypoint], n: usize) -> u64 {
    keypoints
        .iter()
        .map(|kp| level_of(kp, n))
        .filter(|&l| l < 64)
        .fold(0, |m, l| m | 1 << l)
}

/// Whether level `l` has keypoints in a [`used_levels`] mask.
fn is_used(mask: u64, l: usize) -> bool {
    l < 64 && mask >> l & 1 == 1
}

/// Step 1 for one level: `img` blurred into `out` as `blur` says; ORB's float blur only
/// where the descriptors of `centres` read ([`blur_level_around`]).
fn blur_for(
    blur: DescriptorBlur,
    img: Gray<'_>,
    out: &mut GrayImage,
    buf: &mut BlurBuffers,
    fixed: &mut BlurScratch,
    centres: impl Iterator<Item = (i32, i32)>,
) {
    match blur {
        DescriptorBlur::Orb => blur_level_around(img, out, buf, centres, REACH),
        DescriptorBlur::OrbSlam3 => gaussian_blur(img, 7, 2.0, out, fixed),
    }
}

/// How far from its centre a descriptor reads: a rotated pattern point lies within 19
/// pixels of it (`orb_pattern`'s docs; `rotated_points_stay_within_reach` checks it).
pub const REACH: i32 = 19;

/// The level of `n` that a keypoint is described on: its octave, the last level beyond.
#[inline(always)]
fn level_of(kp: &Keypoint, n: usize) -> usize {
    (kp.octave.max(0) as usize).min(n - 1)
}

/// The centres, in level `l`'s pixels, of the keypoints described on it (of `n` levels,
/// by [`level_of`]).
fn centres_on(
    keypoints: &[Keypoint],
    l: usize,
    n: usize,
    set: DescribeSettings,
) -> impl Iterator<Item = (i32, i32)> + '_ {
    keypoints
        .iter()
        .filter(move |kp| level_of(kp, n) == l)
        .map(move |kp| center(kp, set.scales, set.scale_factor))
}

/// Hamming distance of two descriptors.
pub fn hamming(a: &Descriptor, b: &Descriptor) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[cfg(test)]
mod tests;
