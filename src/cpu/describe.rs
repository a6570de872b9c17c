//! ORB's rBRIEF descriptor, bit for bit as OpenCV's `ORB::detectAndCompute` computes it
//! (CPU reference for `kernels/describe.cu`).
//!
//! # Note: descriptor semantics
//!
//! Shared by this module, `kernels/describe.cu` and `src/cuda/describe.rs`; pinned against
//! OpenCV 5.0's `computeOrbDescriptors` (goldens from `ORB::create(2000).detectAndCompute`,
//! `tests/exact_describe.rs`).
//!
//! 1. **Blur.** Each level is smoothed with `GaussianBlur(7x7, sigma 2, BORDER_REFLECT_101)`
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
//!    `f32` without FMA, then `round_half_even`; the sample is the blurred level at
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

use super::blur::reflect101;
use super::orb_pattern::ORB_PATTERN;
use super::pyramid::level_scale;
use crate::features::{Descriptor, Keypoint};
use crate::image::GrayImage;

/// `getGaussianKernel(7, 2, CV_32F)`, built as OpenCV builds it: `exp` in `f64`, each tap
/// rounded to `f32`, the `f32` taps summed in `f64`, then each tap times `1 / sum` rounded
/// to `f32`. Equals 0x3d8fafb1, 0x3e06387e, 0x3e434a39, 0x3e5d4ae0 and mirrored (pinned in a
/// test).
pub fn blur_kernel() -> [f32; 7] {
    let sigma = 2.0f64;
    let scale2x = -0.5 / (sigma * sigma);
    let mut k = [0f32; 7];
    let mut sum = 0f64;
    for (i, t) in k.iter_mut().enumerate() {
        let x = i as f64 - 3.0;
        *t = (scale2x * x * x).exp() as f32;
        sum += *t as f64;
    }
    let inv = 1.0 / sum;
    for t in &mut k {
        *t = (*t as f64 * inv) as f32;
    }
    k
}

/// `deg * (float)(CV_PI / 180)`, then `cos`/`sin` in `f64` rounded to `f32` (step 3).
pub fn rotation(angle_deg: f32) -> (f32, f32) {
    let t = (angle_deg * (std::f64::consts::PI / 180.0) as f32) as f64;
    (t.cos() as f32, t.sin() as f32)
}

/// The keypoint's pixel on its level (step 2).
pub fn center(kp: &Keypoint, scale_factor: f32) -> (i32, i32) {
    let inv = 1.0f32 / level_scale(scale_factor, kp.octave.max(0) as usize);
    (
        (kp.x * inv).round_ties_even() as i32,
        (kp.y * inv).round_ties_even() as i32,
    )
}

/// One rotated pattern offset (step 4): `(round(px*a - py*b), round(px*b + py*a))`.
#[inline]
pub fn rotate(px: i8, py: i8, a: f32, b: f32) -> (i32, i32) {
    let (px, py) = (px as f32, py as f32);
    // Two products rounded separately, then the sum: Rust never contracts to FMA.
    let x = px * a - py * b;
    let y = px * b + py * a;
    (x.round_ties_even() as i32, y.round_ties_even() as i32)
}

/// Buffers of the descriptor stage, reused from frame to frame.
#[derive(Default)]
pub struct DescribeScratch {
    /// Blurred copy of each level that has keypoints (step 1).
    blurred: Vec<GrayImage>,
    /// Row pass of the blur, `f32` per pixel.
    rows: Vec<f32>,
}

impl DescribeScratch {
    /// The blurred levels of the last [`describe_into`] call (levels without keypoints are
    /// left stale).
    pub fn blurred(&self) -> &[GrayImage] {
        &self.blurred
    }
}

/// ORB's descriptor blur of one level into `out` (step 1).
pub fn blur_level(img: &GrayImage, out: &mut GrayImage, rows: &mut Vec<f32>) {
    out.reshape(img.width, img.height);
    if img.width == 0 || img.height == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports FMA (checked just above). Without the feature each
        // `mul_add` is a libm call: ~6x slower on a 1080p pyramid (here, 2 cores).
        return unsafe { blur_level_fma(img, out, rows) };
    }
    blur_level_impl(img, out, rows)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn blur_level_fma(img: &GrayImage, out: &mut GrayImage, rows: &mut Vec<f32>) {
    blur_level_impl(img, out, rows)
}

#[inline(always)]
fn blur_level_impl(img: &GrayImage, out: &mut GrayImage, rows: &mut Vec<f32>) {
    let k = blur_kernel();
    let (w, h) = (img.width, img.height);
    rows.clear();
    rows.resize(w * h, 0.0);
    // Column indices of the 7 taps at the two borders; the interior reads x-3..=x+3.
    let tap = |x: usize, i: usize| reflect101(x as isize + i as isize - 3, w);
    for y in 0..h {
        let src = img.row(y);
        let dst = &mut rows[y * w..(y + 1) * w];
        for (x, d) in dst.iter_mut().enumerate() {
            let mut s = 0f32;
            if x >= 3 && x + 3 < w {
                for (i, &ki) in k.iter().enumerate() {
                    s = (src[x - 3 + i] as f32).mul_add(ki, s);
                }
            } else {
                for (i, &ki) in k.iter().enumerate() {
                    s = (src[tap(x, i)] as f32).mul_add(ki, s);
                }
            }
            *d = s;
        }
    }
    for y in 0..h {
        let r = |j: isize| &rows[reflect101(y as isize + j, h) * w..][..w];
        let (r0, taps) = (r(0), [(r(1), r(-1)), (r(2), r(-2)), (r(3), r(-3))]);
        let dst = out.row_mut(y);
        for x in 0..w {
            let mut s = r0[x] * k[3];
            for (j, (down, up)) in taps.iter().enumerate() {
                s = (down[x] + up[x]).mul_add(k[4 + j], s);
            }
            dst[x] = s.round_ties_even().clamp(0.0, 255.0) as u8;
        }
    }
}

/// The descriptor of one keypoint (steps 3-5) from its level's blurred and raw images.
pub fn describe_one(
    blurred: &GrayImage,
    raw: &GrayImage,
    cx: i32,
    cy: i32,
    angle: f32,
) -> Descriptor {
    let (a, b) = rotation(angle);
    let (w, h) = (blurred.width as i32, blurred.height as i32);
    let sample = |px: i8, py: i8| {
        let (dx, dy) = rotate(px, py, a, b);
        let (x, y) = (cx + dx, cy + dy);
        if x >= 0 && y >= 0 && x < w && y < h {
            blurred.get(x as usize, y as usize)
        } else {
            raw.get(
                reflect101(x as isize, raw.width),
                reflect101(y as isize, raw.height),
            )
        }
    };
    let mut d = [0u8; 32];
    for (i, byte) in d.iter_mut().enumerate() {
        for j in 0..8 {
            let [x1, y1, x2, y2] = ORB_PATTERN[8 * i + j];
            *byte |= ((sample(x1, y1) < sample(x2, y2)) as u8) << j;
        }
    }
    d
}

/// Descriptors of `keypoints` (found on `levels`, whose ORB scale factor is
/// `scale_factor`) into `out`, one per keypoint, in the same order. Only levels that have
/// keypoints are blurred.
pub fn describe_into(
    levels: &[GrayImage],
    scale_factor: f32,
    keypoints: &[Keypoint],
    scratch: &mut DescribeScratch,
    out: &mut Vec<Descriptor>,
) {
    out.clear();
    scratch
        .blurred
        .resize_with(levels.len(), GrayImage::default);
    let mut used = vec![false; levels.len()];
    for kp in keypoints {
        if let Some(u) = used.get_mut(kp.octave.max(0) as usize) {
            *u = true;
        }
    }
    for (l, img) in levels.iter().enumerate() {
        if used[l] {
            blur_level(img, &mut scratch.blurred[l], &mut scratch.rows);
        }
    }
    out.extend(keypoints.iter().map(|kp| {
        let l = (kp.octave.max(0) as usize).min(levels.len() - 1);
        let (cx, cy) = center(kp, scale_factor);
        describe_one(&scratch.blurred[l], &levels[l], cx, cy, kp.angle)
    }));
}

/// Hamming distance of two descriptors.
pub fn hamming(a: &Descriptor, b: &Descriptor) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blur_kernel_is_opencvs() {
        let bits: Vec<u32> = blur_kernel().iter().map(|k| k.to_bits()).collect();
        assert_eq!(
            bits,
            [0x3d8fafb1, 0x3e06387e, 0x3e434a39, 0x3e5d4ae0, 0x3e434a39, 0x3e06387e, 0x3d8fafb1]
        );
    }

    #[test]
    fn pattern_is_opencvs_at_both_ends() {
        assert_eq!(ORB_PATTERN[0], [8, -3, 9, 5]);
        assert_eq!(ORB_PATTERN[3], [7, -12, 12, -13]);
        assert_eq!(ORB_PATTERN[254], [7, 0, 12, -2]);
        assert_eq!(ORB_PATTERN[255], [-1, -6, 0, -11]);
        let r = ORB_PATTERN.iter().flatten().map(|v| v.unsigned_abs()).max();
        assert_eq!(r, Some(13));
    }

    #[test]
    fn rotation_constant_is_opencvs() {
        // (float)(CV_PI/180) as OpenCV rounds it.
        assert_eq!(
            ((std::f64::consts::PI / 180.0) as f32).to_bits(),
            0x3c8efa35
        );
        let (a, b) = rotation(0.0);
        assert_eq!((a, b), (1.0, 0.0));
        assert_eq!(rotate(7, -12, a, b), (7, -12));
        // 90 degrees: (x, y) -> (-y, x), up to rounding of cos(90) ~ -4e-8.
        let (a, b) = rotation(90.0);
        assert_eq!(rotate(7, -12, a, b), (12, 7));
    }

    #[test]
    fn flat_image_gives_zero_descriptor_and_uniform_blur() {
        let img = GrayImage::from_vec(40, 30, vec![77; 1200]).unwrap();
        let mut blurred = GrayImage::default();
        blur_level(&img, &mut blurred, &mut Vec::new());
        assert!(blurred.data.iter().all(|&v| v == 77));
        // Equal samples: `<` is false for every pair, wherever the centre is.
        assert_eq!(describe_one(&blurred, &img, 20, 15, 33.0), [0; 32]);
        assert_eq!(describe_one(&blurred, &img, 0, 0, 200.0), [0; 32]);
    }

    #[test]
    fn gradient_sets_the_bits_of_pairs_that_point_uphill() {
        // Brightness grows with x: bit = x1 < x2 after rotation 0 (for |dx| large enough
        // that the blur keeps the order, which a linear ramp always does).
        let (w, h) = (64, 64);
        let data = (0..w * h).map(|i| ((i % w) * 3) as u8).collect();
        let img = GrayImage::from_vec(w, h, data).unwrap();
        let mut blurred = GrayImage::default();
        blur_level(&img, &mut blurred, &mut Vec::new());
        let d = describe_one(&blurred, &img, 32, 32, 0.0);
        for (row, p) in ORB_PATTERN.iter().enumerate() {
            let bit = d[row / 8] >> (row % 8) & 1;
            assert_eq!(bit == 1, p[0] < p[2], "pair {row}: {p:?}");
        }
    }

    #[test]
    fn hamming_counts_differing_bits() {
        let a = [0u8; 32];
        let mut b = [0u8; 32];
        b[0] = 0b1011;
        b[31] = 0x80;
        assert_eq!(hamming(&a, &b), 4);
        assert_eq!(hamming(&b, &b), 0);
    }
}
