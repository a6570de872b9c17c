//! Harris scores (CPU reference for `kernels/fast_harris.cu` and `kernels/harris.cu`).
//!
//! Two different things share the name:
//! - [`orb_score`]: ORB's per-keypoint score (`HarrisResponses` in OpenCV's orb.cpp), all
//!   integer sums, one float formula at the end: bit-exact.
//! - [`dense_response`]: `cv::cornerHarris` over the whole image, bit-exact with the
//!   opencv-python 5.0 wheel as run on an AVX-512 host (the goldens in `tests/golden`).
//!   OpenCV's float rounding there depends on which SIMD loop produced a pixel, so the
//!   rounding schedule below mirrors it: fused multiply-adds in the vector bodies, plain
//!   multiply-then-add in the scalar tails. On a host where OpenCV dispatches to a different
//!   vector width only the tail columns change, by at most a few ulp; the tests also check
//!   the map against a 1e-6 * max|R| bound, which holds on any host.

use super::Corner;
use crate::image::GrayImage;

/// Index into `0..n` with OpenCV's `BORDER_REFLECT_101` (`gfedcb|abcdefgh|gfedcba`).
#[inline]
fn reflect101(mut i: isize, n: usize) -> usize {
    let n = n as isize;
    if n == 1 {
        return 0;
    }
    loop {
        if i < 0 {
            i = -i;
        } else if i >= n {
            i = 2 * n - 2 - i;
        } else {
            return i as usize;
        }
    }
}

/// ORB's Harris score at (x, y) (`HarrisResponses` in OpenCV's orb.cpp): a `block_size`
/// square centred on the point, 3x3 Sobel-like integer gradients, integer sums, then
/// `(a*b - c*c - k*(a+b)^2) * scale^4` in f32 with `scale = 1 / (4 * block_size * 255)`.
///
/// Pixels outside the image are read with `BORDER_REFLECT_101`, as ORB's padded pyramid
/// does; inside the usual ORB border (31) no such read happens.
pub fn orb_score(img: &GrayImage, x: u32, y: u32, block_size: u32, k: f32) -> f32 {
    let (w, h) = (img.width, img.height);
    let r = (block_size / 2) as isize;
    let (x, y) = (x as isize, y as isize);
    // The gradients reach one pixel beyond the block.
    let inside = x - r > 0 && y - r > 0 && ((x + r + 1) as usize) < w && ((y + r + 1) as usize) < h;
    let px = |xx: isize, yy: isize| -> i32 {
        if inside {
            img.data[yy as usize * w + xx as usize] as i32
        } else {
            img.data[reflect101(yy, h) * w + reflect101(xx, w)] as i32
        }
    };
    let (mut a, mut b, mut c) = (0i32, 0i32, 0i32);
    for yy in y - r..y - r + block_size as isize {
        for xx in x - r..x - r + block_size as isize {
            let ix = (px(xx + 1, yy) - px(xx - 1, yy)) * 2
                + (px(xx + 1, yy - 1) - px(xx - 1, yy - 1))
                + (px(xx + 1, yy + 1) - px(xx - 1, yy + 1));
            let iy = (px(xx, yy + 1) - px(xx, yy - 1)) * 2
                + (px(xx - 1, yy + 1) - px(xx - 1, yy - 1))
                + (px(xx + 1, yy + 1) - px(xx + 1, yy - 1));
            a += ix * ix;
            b += iy * iy;
            c += ix * iy;
        }
    }
    // Same operand order and precision as OpenCV (the int (4 * block) times 255.f).
    let scale = 1.0f32 / ((4 * block_size as i32) as f32 * 255.0f32);
    let scale_sq_sq = scale * scale * scale * scale;
    let (af, bf, cf) = (a as f32, b as f32, c as f32);
    (af * bf - cf * cf - k * (af + bf) * (af + bf)) * scale_sq_sq
}

/// Integer Sobel kernels of order 1: (smoothing, derivative), as `cv::getDerivKernels`.
fn sobel_kernels(ksize: u32) -> (&'static [i32], &'static [i32]) {
    match ksize {
        3 => (&[1, 2, 1], &[-1, 0, 1]),
        5 => (&[1, 4, 6, 4, 1], &[-1, -2, 0, 2, 1]),
        7 => (&[1, 6, 15, 20, 15, 6, 1], &[-1, -4, -5, 0, 5, 4, 1]),
        _ => panic!("dense Harris ksize must be 3, 5 or 7, got {ksize}"),
    }
}

/// OpenCV's row filter (8-bit in, f32 out): the vector body accumulates with FMA from
/// zero in tap order over blocks of 64 outputs; the remaining columns are the scalar
/// multiply-then-add loop.
fn row_pass(img: &GrayImage, r: usize, kern: &[f32], out: &mut Vec<f32>) {
    let (w, h) = (img.width, img.height);
    let ph = h + 2 * r;
    out.clear();
    out.resize(ph * w, 0.0);
    let fused_end = w - w % 64;
    let mut row = vec![0f32; w + 2 * r];
    for py in 0..ph {
        let src = img.row(reflect101(py as isize - r as isize, h));
        for (i, v) in row.iter_mut().enumerate() {
            *v = src[reflect101(i as isize - r as isize, w)] as f32;
        }
        let dst = &mut out[py * w..(py + 1) * w];
        for (x, d) in dst.iter_mut().enumerate() {
            let taps = &row[x..x + kern.len()];
            *d = if x < fused_end {
                taps.iter()
                    .zip(kern)
                    .fold(0.0, |s, (&p, &k)| p.mul_add(k, s))
            } else {
                let mut s = taps[0] * kern[0];
                for (&p, &k) in taps.iter().zip(kern).skip(1) {
                    s += p * k;
                }
                s
            };
        }
    }
}

/// OpenCV's symmetric / antisymmetric column filter (f32), centre tap first, then each
/// mirrored pair summed (or differenced) and multiplied in. The 3-tap filter fuses
/// everywhere; longer ones fuse in 16-wide vector blocks and not in the scalar tail.
fn col_pass(rows: &[f32], w: usize, h: usize, kern: &[f32], antisym: bool, out: &mut [f32]) {
    let r = kern.len() / 2;
    let fused_end = if kern.len() == 3 { w } else { w - w % 16 };
    for y in 0..h {
        let at = |dy: isize, x: usize| rows[(y + r).wrapping_add_signed(dy) * w + x];
        for x in 0..w {
            let mut s = at(0, x) * kern[r];
            for j in 1..=r as isize {
                let t = if antisym {
                    at(j, x) - at(-j, x)
                } else {
                    at(j, x) + at(-j, x)
                };
                let k = kern[r + j as usize];
                s = if x < fused_end {
                    t.mul_add(k, s)
                } else {
                    s + t * k
                };
            }
            out[y * w + x] = s;
        }
    }
}

/// Unnormalized `block`-square box sum with OpenCV's anchor (`block / 2`) and
/// `BORDER_REFLECT_101`: direct row sums in f64, then running column sums in f64 (OpenCV's
/// `ColumnSum<double, float>`), rounded to f32.
fn box_sum(src: &[f32], w: usize, h: usize, block: usize, out: &mut [f32]) {
    let a = (block / 2) as isize;
    let ph = h + block - 1;
    let mut rows = vec![0f64; ph * w];
    for py in 0..ph {
        let sy = reflect101(py as isize - a, h);
        let s = &src[sy * w..(sy + 1) * w];
        for x in 0..w {
            let mut acc = s[reflect101(x as isize - a, w)] as f64;
            for j in 1..block as isize {
                acc += s[reflect101(x as isize - a + j, w)] as f64;
            }
            rows[py * w + x] = acc;
        }
    }
    let mut sum = vec![0f64; w];
    for py in 0..block - 1 {
        for (s, &v) in sum.iter_mut().zip(&rows[py * w..(py + 1) * w]) {
            *s += v;
        }
    }
    for y in 0..h {
        let (new, old) = (&rows[(y + block - 1) * w..], &rows[y * w..]);
        for x in 0..w {
            let s0 = sum[x] + new[x];
            out[y * w + x] = s0 as f32;
            sum[x] = s0 - old[x];
        }
    }
}

/// `cv::cornerHarris(img, block_size, ksize, k)` (default border, `BORDER_REFLECT_101`) into
/// `out` (row-major, `width * height`).
///
/// Steps as OpenCV: Sobel dx / dy to f32 with the smoothing kernel pre-scaled by
/// `1 / (2^(ksize-1) * block_size * 255)`; products dx², dx·dy, dy²; box sums; then
/// `a*c - b*b - k*(a+c)^2`. Bit-exact with the goldens (see the module doc for the host
/// caveat); the tests bound any difference by `1e-6 * max|R|` as well.
pub fn dense_response(img: &GrayImage, block_size: u32, ksize: u32, k: f32, out: &mut Vec<f32>) {
    let (w, h) = (img.width, img.height);
    let n = w * h;
    out.clear();
    out.resize(n, 0.0);
    if n == 0 {
        return;
    }
    let (smooth, deriv) = sobel_kernels(ksize);
    let r = smooth.len() / 2;
    let scale = 1.0 / ((1u32 << (ksize - 1)) as f64 * block_size as f64 * 255.0);
    // OpenCV scales the f32 kernel Mat by a float factor.
    let sm: Vec<f32> = smooth.iter().map(|&v| v as f32 * scale as f32).collect();
    let de: Vec<f32> = deriv.iter().map(|&v| v as f32).collect();

    let mut tmp = Vec::new();
    let mut dx = vec![0f32; n];
    let mut dy = vec![0f32; n];
    row_pass(img, r, &de, &mut tmp);
    col_pass(&tmp, w, h, &sm, false, &mut dx);
    row_pass(img, r, &sm, &mut tmp);
    col_pass(&tmp, w, h, &de, true, &mut dy);

    let bs = block_size as usize;
    let mut a = vec![0f32; n];
    let mut b = vec![0f32; n];
    let mut c = vec![0f32; n];
    let prod = |f: &dyn Fn(f32, f32) -> f32| -> Vec<f32> {
        dx.iter().zip(&dy).map(|(&x, &y)| f(x, y)).collect()
    };
    box_sum(&prod(&|x, _| x * x), w, h, bs, &mut a);
    box_sum(&prod(&|x, y| x * y), w, h, bs, &mut b);
    box_sum(&prod(&|_, y| y * y), w, h, bs, &mut c);

    // OpenCV sees the continuous map as one row: 8-wide vector body, then a 4-wide body
    // (other association), then scalar code with `k` as the caller's double. Our k is f32;
    // its shortest decimal form recovers the double the user wrote (0.04, not 0.0399999991).
    let kd: f64 = k.to_string().parse().unwrap_or(k as f64);
    let (end8, end4) = (n - n % 8, n - n % 4);
    for i in 0..n {
        let (a, b, c) = (a[i], b[i], c[i]);
        let det = a * c - b * b;
        let tr = a + c;
        out[i] = if i < end8 {
            det - k * (tr * tr)
        } else if i < end4 {
            det - k * tr * tr
        } else {
            (det as f64 - kd * tr as f64 * tr as f64) as f32
        };
    }
}

/// Dense `cv::cornerHarris` corners: 3x3 local maxima above `quality * max response`.
///
/// A pixel is kept when its response is `> quality * max` and strictly greater than each of
/// its (in-image) 8 neighbours, so a plateau of equal maxima yields no corner. Raster order,
/// `fast_score` 0, `response` = the Harris response. No corners when the maximum is <= 0.
pub fn dense_corners(
    img: &GrayImage,
    block_size: u32,
    ksize: u32,
    k: f32,
    quality: f32,
) -> Vec<Corner> {
    let mut resp = Vec::new();
    dense_response(img, block_size, ksize, k, &mut resp);
    let (w, h) = (img.width, img.height);
    let max = resp.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut out = Vec::new();
    if max.is_nan() || max <= 0.0 {
        return out;
    }
    let thr = quality * max;
    for y in 0..h {
        for x in 0..w {
            let v = resp[y * w + x];
            if v <= thr {
                continue;
            }
            let mut is_max = true;
            'n: for ny in y.saturating_sub(1)..=(y + 1).min(h - 1) {
                for nx in x.saturating_sub(1)..=(x + 1).min(w - 1) {
                    if (nx, ny) != (x, y) && resp[ny * w + nx] >= v {
                        is_max = false;
                        break 'n;
                    }
                }
            }
            if is_max {
                out.push(Corner {
                    x: x as u32,
                    y: y as u32,
                    fast_score: 0,
                    response: v,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect101_mirrors_without_repeating_the_edge() {
        let got: Vec<usize> = (-3..8).map(|i| reflect101(i, 5)).collect();
        assert_eq!(got, [3, 2, 1, 0, 1, 2, 3, 4, 3, 2, 1]);
    }

    #[test]
    fn flat_image_has_zero_response_and_no_corners() {
        let mut img = GrayImage::new(20, 12);
        img.data.fill(77);
        let mut r = Vec::new();
        dense_response(&img, 2, 3, 0.04, &mut r);
        assert!(r.iter().all(|&v| v == 0.0));
        assert!(dense_corners(&img, 2, 3, 0.04, 0.01).is_empty());
        assert_eq!(orb_score(&img, 10, 6, 7, 0.04), 0.0);
    }
}
