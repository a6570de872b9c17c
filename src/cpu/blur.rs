//! Gaussian blur of 8-bit images, identical to `cv::GaussianBlur(img, (k, k), sigma)`
//! (CPU reference for the blur step of `kernels/canny.cu`).
//!
//! OpenCV blurs 8-bit images with a bit-exact fixed-point path: the separable kernel is
//! turned into 8-fraction-bit integers (summing to exactly 256), the horizontal pass keeps
//! `sum(k * p)` as a 16-bit value (8 fraction bits), the vertical pass sums `k * h` with 16
//! fraction bits and the result is rounded half up: `(v + 2^15) >> 16`. Every step is exact
//! integer arithmetic, so the summation order does not matter and a GPU twin can reproduce
//! it bit for bit. The border is `BORDER_REFLECT_101` (`gfedcb|abcdefgh|gfedcba`).

use crate::image::{AsGray, Gray, GrayImage};

/// Fraction bits of OpenCV's `ufixedpoint16` kernel coefficients.
const KERNEL_SHIFT: u32 = 8;

/// Buffers of the blur, reused from frame to frame.
#[derive(Default)]
pub struct BlurScratch {
    /// `(ksize, sigma bits)` of `kernel`, to rebuild it only when the config changes.
    key: Option<(u32, u64)>,
    kernel: Vec<u32>,
    /// Horizontal pass, `width * height` values with 8 fraction bits.
    rows: Vec<u16>,
    /// One source row with `ksize / 2` reflected pixels on each side.
    padded: Vec<u8>,
    /// Source row index of each of the `height + 2r` vertical taps.
    row_map: Vec<usize>,
    /// One row of 32-bit accumulators.
    acc: Vec<u32>,
}

/// `cv::borderInterpolate(p, len, BORDER_REFLECT_101)`: folds an out-of-range index back in.
pub fn reflect101(mut p: isize, len: usize) -> usize {
    let len = len as isize;
    if len == 1 {
        return 0;
    }
    // Loops because a kernel wider than the image may need several folds.
    while p < 0 || p >= len {
        p = if p < 0 { -p } else { 2 * len - 2 - p };
    }
    p as usize
}

/// The kernel OpenCV's `getGaussianKernelBitExact` builds, in doubles (sums to 1).
///
/// `sigma <= 0` picks the binomial tables for `ksize` 1..=9, else `0.15 * ksize + 0.35`.
/// OpenCV evaluates `exp` with its soft-float library; `f64::exp` can differ from it in the
/// last ulp, which only matters if a scaled coefficient lands within ~1e-13 of a rounding
/// boundary below; no such case is known (the tests pin several sizes and sigmas).
pub fn gaussian_kernel_f64(ksize: usize, sigma: f64) -> Vec<f64> {
    assert!(ksize % 2 == 1, "Gaussian kernel size must be odd");
    if sigma <= 0.0 {
        let table: Option<&[f64]> = match ksize {
            1 => Some(&[1.0]),
            3 => Some(&[0.25, 0.5, 0.25]),
            5 => Some(&[1.0 / 16.0, 0.25, 0.375, 0.25, 1.0 / 16.0]),
            7 => Some(&[
                0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125,
            ]),
            9 => Some(&[
                4.0 / 256.0,
                13.0 / 256.0,
                30.0 / 256.0,
                51.0 / 256.0,
                60.0 / 256.0,
                51.0 / 256.0,
                30.0 / 256.0,
                13.0 / 256.0,
                4.0 / 256.0,
            ]),
            _ => None,
        };
        if let Some(t) = table {
            return t.to_vec();
        }
    }
    // 0.15 and 0.35 as OpenCV's exact doubles; mulAdd is fused there too.
    let sigma = if sigma > 0.0 {
        sigma
    } else {
        (ksize as f64).mul_add(0.15, 0.35)
    };
    // Taps are at doubled coordinates x = 1-n, 3-n, ..., hence -0.5 * 0.25.
    let scale = -0.125 / (sigma * sigma);
    let half = (ksize - 1) / 2;
    let mut values = Vec::with_capacity(half);
    let mut sum = 0.0f64;
    for i in 0..half {
        let x = 2 * i as i64 + 1 - ksize as i64;
        let t = ((x * x) as f64 * scale).exp();
        values.push(t);
        sum += t;
    }
    sum = sum * 2.0 + 1.0;
    let inv = 1.0 / sum;
    let mut k = vec![0.0; ksize];
    for (i, v) in values.iter().enumerate() {
        k[i] = v * inv;
        k[ksize - 1 - i] = v * inv;
    }
    k[half] = inv;
    k
}

/// The 8-fraction-bit integer kernel OpenCV blurs 8-bit images with: coefficients rounded
/// half-to-even with the error carried to the next one (outside in), the centre taking the
/// remainder so the kernel sums to exactly 256.
pub fn gaussian_kernel_fixed(ksize: usize, sigma: f64) -> Vec<u32> {
    let k = gaussian_kernel_f64(ksize, sigma);
    let one = (1i64 << KERNEL_SHIFT) as f64;
    let half = ksize / 2;
    let mut out = vec![0u32; ksize];
    let mut err = 0.0f64;
    let mut sum = 0i64;
    for i in 0..half {
        let adj = k[i] * one + err;
        let v = adj.round_ties_even();
        err = adj - v;
        out[i] = v as u32;
        out[ksize - 1 - i] = v as u32;
        sum += v as i64;
    }
    out[half] = ((1i64 << KERNEL_SHIFT) - 2 * sum) as u32;
    out
}

/// `cv::GaussianBlur(img, (ksize, ksize), sigma, sigma, BORDER_REFLECT_101)` for 8-bit
/// images, bit-exact. `ksize` must be odd; 1 copies the image.
pub fn gaussian_blur(
    img: impl AsGray,
    ksize: usize,
    sigma: f64,
    out: &mut GrayImage,
    s: &mut BlurScratch,
) {
    let img = img.gray();
    let (w, h) = (img.width, img.height);
    out.reshape(w, h);
    if w == 0 || h == 0 {
        return;
    }
    // OpenCV clamps a negative sigma to 0 before building the kernel.
    let sigma = sigma.max(0.0);
    let key = (ksize as u32, sigma.to_bits());
    if s.key != Some(key) {
        s.kernel = gaussian_kernel_fixed(ksize, sigma);
        s.key = Some(key);
    }
    blur_versions(img, ksize, ksize / 2, out, s)
}

super::simd::versions! {
    /// [`blur_passes`] at the process's SIMD level.
    fn blur_versions(img: Gray<'_>, ksize: usize, r: usize, out: &mut GrayImage, s: &mut BlurScratch) = blur_passes;
}

/// Both passes (`s.kernel` holds the fixed-point kernel of size `ksize = 2r + 1`).
///
/// All arithmetic is exact integer arithmetic: the horizontal sums are computed in wrapping
/// `u16`, which is exact because the true sum fits (<= 255 * 256) and wrapping addition and
/// multiplication are exact modulo 2^16, whatever the intermediate values (this also lets
/// the symmetric taps be added before multiplying). The vertical sums fit `u32`.
#[inline(always)]
fn blur_passes(img: Gray<'_>, ksize: usize, r: usize, out: &mut GrayImage, s: &mut BlurScratch) {
    let (w, h) = (img.width, img.height);
    let k = &s.kernel;
    // The kernel is symmetric (`gaussian_kernel_fixed` builds it so).
    debug_assert!((0..ksize).all(|i| k[i] == k[ksize - 1 - i]));

    // Horizontal pass into 16-bit sums (max 255 * 256, no overflow).
    s.rows.resize(w * h, 0);
    s.padded.resize(w + 2 * r, 0);
    for y in 0..h {
        let src = img.row(y);
        s.padded[r..r + w].copy_from_slice(src);
        // Only the 2r border pixels need folding.
        for i in (0..r).chain(r + w..w + 2 * r) {
            s.padded[i] = src[reflect101(i as isize - r as isize, w)];
        }
        let dst = &mut s.rows[y * w..(y + 1) * w];
        match ksize {
            3 => hrow::<1>(&s.padded, k, dst),
            5 => hrow::<2>(&s.padded, k, dst),
            7 => hrow::<3>(&s.padded, k, dst),
            9 => hrow::<4>(&s.padded, k, dst),
            _ => {
                // Tap-major loops so the compiler vectorizes over x.
                dst.fill(0);
                for (i, &c) in k.iter().enumerate() {
                    for (a, &p) in dst.iter_mut().zip(&s.padded[i..i + w]) {
                        *a = a.wrapping_add((p as u16).wrapping_mul(c as u16));
                    }
                }
            }
        }
    }

    // Vertical pass: 16 fraction bits, round half up to 8 bits.
    s.row_map.clear();
    s.row_map
        .extend((0..h + 2 * r).map(|i| reflect101(i as isize - r as isize, h)));
    for y in 0..h {
        let taps = &s.row_map[y..y + ksize];
        let dst = out.row_mut(y);
        match ksize {
            3 => vrow::<1>(&s.rows, w, taps, k, dst),
            5 => vrow::<2>(&s.rows, w, taps, k, dst),
            7 => vrow::<3>(&s.rows, w, taps, k, dst),
            9 => vrow::<4>(&s.rows, w, taps, k, dst),
            _ => {
                let round = 1u32 << (2 * KERNEL_SHIFT - 1);
                s.acc.clear();
                s.acc.resize(w, round);
                for (&row, &c) in taps.iter().zip(k) {
                    for (a, &v) in s.acc.iter_mut().zip(&s.rows[row * w..(row + 1) * w]) {
                        // Cannot overflow (<= 255 * 256 * 256 + 2^15).
                        *a = a.wrapping_add((v as u32).wrapping_mul(c));
                    }
                }
                for (d, &a) in dst.iter_mut().zip(&s.acc) {
                    *d = (a >> (2 * KERNEL_SHIFT)) as u8;
                }
            }
        }
    }
}

/// Horizontal pass of one padded row with a symmetric kernel of size `2R + 1`.
#[inline(always)]
fn hrow<const R: usize>(padded: &[u8], k: &[u32], out: &mut [u16]) {
    let w = out.len();
    let c: [u16; R] = std::array::from_fn(|i| k[i] as u16);
    let ctr = k[R] as u16;
    let lo: [&[u8]; R] = std::array::from_fn(|i| &padded[i..i + w]);
    let hi: [&[u8]; R] = std::array::from_fn(|i| &padded[2 * R - i..2 * R - i + w]);
    let mid = &padded[R..R + w];
    for x in 0..w {
        let mut a = (mid[x] as u16).wrapping_mul(ctr);
        for i in 0..R {
            let p = (lo[i][x] as u16).wrapping_add(hi[i][x] as u16);
            a = a.wrapping_add(p.wrapping_mul(c[i]));
        }
        out[x] = a;
    }
}

/// Vertical pass of one row with a symmetric kernel of size `2R + 1` over the rows `taps`.
#[inline(always)]
fn vrow<const R: usize>(rows: &[u16], w: usize, taps: &[usize], k: &[u32], out: &mut [u8]) {
    let out = &mut out[..w];
    let row = |i: usize| &rows[taps[i] * w..taps[i] * w + w];
    let lo: [&[u16]; R] = std::array::from_fn(row);
    let hi: [&[u16]; R] = std::array::from_fn(|i| row(2 * R - i));
    let mid = row(R);
    let c: [u32; R] = std::array::from_fn(|i| k[i]);
    let ctr = k[R];
    let round = 1u32 << (2 * KERNEL_SHIFT - 1);
    for x in 0..w {
        // <= 255 * 256 * 256 + 2^15: no overflow.
        let mut a = (mid[x] as u32).wrapping_mul(ctr).wrapping_add(round);
        for i in 0..R {
            let p = (lo[i][x] as u32).wrapping_add(hi[i][x] as u32);
            a = a.wrapping_add(p.wrapping_mul(c[i]));
        }
        out[x] = (a >> (2 * KERNEL_SHIFT)) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::xorshift_image;

    /// The portable path (also what non-AVX2 CPUs run) gives the same bits as the
    /// dispatched one, for the const-size kernels and the generic loop.
    #[test]
    fn portable_path_matches_dispatched() {
        let mut s = 12345u64;
        for &(w, h) in &[(1, 1), (3, 2), (5, 17), (40, 33), (129, 7)] {
            let img = xorshift_image(w, h, &mut s, |s| (s >> 24) as u8);
            for k in [1, 3, 5, 7, 9, 11, 15] {
                let mut a = GrayImage::default();
                gaussian_blur(&img, k, 0.0, &mut a, &mut BlurScratch::default());
                let mut b = GrayImage::new(w, h);
                let mut sc = BlurScratch {
                    kernel: gaussian_kernel_fixed(k, 0.0),
                    ..Default::default()
                };
                blur_passes(img.view(), k, k / 2, &mut b, &mut sc);
                assert_eq!(a, b, "{w}x{h} k{k}");
            }
        }
    }
}
