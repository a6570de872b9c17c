//! OpenCV ORB's descriptor blur (step 1 of `describe`'s note: "Note: descriptor
//! semantics"): `GaussianBlur(7x7, sigma 2, BORDER_REFLECT_101)` down OpenCV's float
//! separable path, as ORB calls it on a non-isolated ROI of its padded pyramid.

use std::ops::Range;

use super::blur::reflect101;
use super::fma::Fma;
use crate::image::{AsGray, Gray, GrayImage};

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

/// Work buffers of [`blur_level`] and [`blur_level_around`].
#[derive(Default)]
pub struct BlurBuffers {
    /// Row pass, `f32` per pixel: a ring of [`RING`] rows.
    rows: Vec<f32>,
    /// One source row as `f32` with 3 reflected pixels on each side.
    padded: Vec<f32>,
    /// [`blur_level_around`]'s tiles to blur, strip-major.
    tiles: Vec<bool>,
}

/// ORB's descriptor blur of one level into `out` (step 1).
pub fn blur_level(img: impl AsGray, out: &mut GrayImage, buf: &mut BlurBuffers) {
    let img = img.gray();
    let (w, h) = (img.width, img.height);
    out.reshape(w, h);
    if w == 0 || h == 0 {
        return;
    }
    blur_rect_versions(img, out, buf, 0..w, 0..h)
}

/// Rows per strip and columns per tile of [`blur_level_around`].
const STRIP: usize = 32;
const TILE: usize = 16;

/// [`blur_level`] of only the pixels the descriptors read: every pixel within `reach`
/// (in x and in y) of one of `centres` (level coordinates), rounded out to tiles of
/// `STRIP` (32) rows by `TILE` (16) columns; the tiles of a strip that touch are blurred as one
/// rectangle. The rest of `out` keeps what it held. Each blurred pixel gets the value
/// [`blur_level`] gives it: a pixel's blur reads only its 7x7 neighbourhood (reflected at the
/// level's edges, not at the rectangle's), in the same order of operations.
///
/// ORB keeps the keypoints with the best responses, which cluster: on the bench photos at
/// 1080p the descriptor windows cover 4-6 % of the levels' pixels (8-9 % in tiles), and the
/// whole-level blur was the largest part of the descriptor stage.
pub fn blur_level_around(
    img: impl AsGray,
    out: &mut GrayImage,
    buf: &mut BlurBuffers,
    centres: impl IntoIterator<Item = (i32, i32)>,
    reach: i32,
) {
    let img = img.gray();
    let (w, h) = (img.width, img.height);
    out.reshape(w, h);
    if w == 0 || h == 0 {
        return;
    }
    let (nx, ny) = (w.div_ceil(TILE), h.div_ceil(STRIP));
    let mut tiles = std::mem::take(&mut buf.tiles);
    tiles.clear();
    tiles.resize(nx * ny, false);
    for (cx, cy) in centres {
        // The window clipped to the level (nothing where it lies outside).
        let (x0, x1) = (cx.saturating_sub(reach).max(0), cx.saturating_add(reach));
        let (y0, y1) = (cy.saturating_sub(reach).max(0), cy.saturating_add(reach));
        let (x1, y1) = (x1.min(w as i32 - 1), y1.min(h as i32 - 1));
        if x0 > x1 || y0 > y1 {
            continue;
        }
        for ty in y0 as usize / STRIP..=y1 as usize / STRIP {
            tiles[ty * nx + x0 as usize / TILE..=ty * nx + x1 as usize / TILE].fill(true);
        }
    }
    for ty in 0..ny {
        let ys = ty * STRIP..((ty + 1) * STRIP).min(h);
        let row = &tiles[ty * nx..(ty + 1) * nx];
        let mut tx = 0;
        while tx < nx {
            if !row[tx] {
                tx += 1;
                continue;
            }
            let start = tx;
            while tx < nx && row[tx] {
                tx += 1;
            }
            let xs = start * TILE..(tx * TILE).min(w);
            blur_rect_versions(img, out, buf, xs, ys.clone());
        }
    }
    buf.tiles = tiles;
}

super::simd::versions! {
    /// [`blur_rect_impl`] at the process's SIMD level, with the FMA that level has.
    fn blur_rect_versions(img: Gray<'_>, out: &mut GrayImage, buf: &mut BlurBuffers, xs: Range<usize>, ys: Range<usize>) = blur_rect_impl, fma;
}

/// Both passes over the rectangle `xs` x `ys` of the level, pixel-major: each output value is one chain of the note's operations in
/// registers (the 7 taps unrolled), and LLVM vectorizes the loops across pixels, so every
/// pixel still sees exactly the note's order of operations. The row pass starts at
/// `p * k[0]`, which is `fma(p, k[0], 0)` exactly (the products are never -0). Row-pass
/// rows live in a ring of 8 (output row `y` reads source rows `y - 3 ..= y + 3`, reflected
/// into that same window), so the column pass reads from L1/L2, not from a whole-level
/// buffer. The final conversion rounds through [`to_u8_clamped`], integer work that
/// vectorizes (a saturating `as u8` of a float did not: one scalar conversion and insert
/// per pixel). Both changes, 2026-12-06, 1080p default config on this repo's 2-core
/// x86-64: describe 16.7 -> 8.9 ms (conversion, no clearing) -> see docs/benchmarks.md.
///
/// `m` fuses the multiply-adds (`cpu::fma`). The row pass's sums are exact in `f64`, so
/// it takes [`Fma::fma_exact_in_f64`]: every tap is a multiple of 2^-27 (the smallest,
/// 0.0702, has exponent -4), so every product of a pixel and a tap is; a sum of such
/// values rounded to `f32` stays one (rounding keeps a multiple of its own ulp, and
/// below 2^-3, where that ulp is finer than 2^-27, the value is exact); and every sum is
/// below 255 times the taps' sum, under 2^9. So each sum is an integer times 2^-27 below
/// 2^36, which `f64` holds exactly (`row_pass_sums_fit_f64` checks the kernel's part).
/// The column pass multiplies two such values (a grid of 2^-54) and takes the full `fma`.
#[inline(always)]
fn blur_rect_impl(
    img: Gray<'_>,
    out: &mut GrayImage,
    buf: &mut BlurBuffers,
    xs: Range<usize>,
    ys: Range<usize>,
    m: impl Fma,
) {
    let k = blur_kernel();
    let (w, h) = (img.width, img.height);
    let (x0, sw) = (xs.start, xs.len());
    let BlurBuffers { rows, padded, .. } = buf;
    // Every element is written before it is read: resize only, no clearing.
    rows.resize(RING * sw, 0.0);
    padded.resize(sw + 6, 0.0);
    let padded = &mut padded[..sw + 6];
    // padded[i] is source column x0 + i - 3: inside the level for i in lo..hi.
    let lo = 3usize.saturating_sub(x0);
    let hi = (sw + 6).min(w + 3 - x0);
    // Row-pass rows computed so far: from 3 above the first row (reflected at the top).
    let mut done = ys.start.saturating_sub(3);
    for y in ys {
        while done <= (y + 3).min(h - 1) {
            let src = img.row(done);
            for (p, &v) in padded[lo..hi].iter_mut().zip(&src[x0 + lo - 3..]) {
                *p = v as f32;
            }
            for i in (0..lo).chain(hi..sw + 6) {
                padded[i] = src[reflect101((x0 + i) as isize - 3, w)] as f32;
            }
            let dst = &mut rows[(done % RING) * sw..][..sw];
            for (x, d) in dst.iter_mut().enumerate() {
                let p = &padded[x..x + 7];
                let mut s = p[0] * k[0];
                for i in 1..7 {
                    s = m.fma_exact_in_f64(p[i], k[i], s);
                }
                *d = s;
            }
            done += 1;
        }
        let r = |j: isize| &rows[(reflect101(y as isize + j, h) % RING) * sw..][..sw];
        let (c, d1, u1, d2, u2, d3, u3) = (r(0), r(1), r(-1), r(2), r(-2), r(3), r(-3));
        let o = &mut out.row_mut(y)[x0..x0 + sw];
        for x in 0..sw {
            let mut a = c[x] * k[3];
            a = m.fma(d1[x] + u1[x], k[4], a);
            a = m.fma(d2[x] + u2[x], k[5], a);
            a = m.fma(d3[x] + u3[x], k[6], a);
            o[x] = to_u8_clamped(a);
        }
    }
}

/// Row-pass rows kept by [`blur_rect_impl`] (7 are read per output row).
const RING: usize = 8;

/// `saturate_cast<uchar>(v)` of a finite `v`: round half to even, clamp to 0..=255. Clamping
/// first is the same (the bounds are integers); after adding 1.5 * 2^23 the low mantissa
/// byte is the rounded value.
#[inline(always)]
fn to_u8_clamped(v: f32) -> u8 {
    const MAGIC: f32 = 12_582_912.0;
    let c = v.clamp(0.0, 255.0);
    (c + MAGIC).to_bits() as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blur_around_equals_the_whole_blur_where_it_reaches() {
        let mut s = 11u64;
        for (w, h) in [(1, 1), (5, 3), (16, 32), (17, 33), (97, 61), (250, 140)] {
            let img = crate::cpu::test_util::xorshift_image(w, h, &mut s, |r| (r >> 56) as u8);
            let mut whole = GrayImage::default();
            blur_level(&img, &mut whole, &mut BlurBuffers::default());
            // Centres inside, on the edges and outside the level.
            let (wi, hi) = (w as i32, h as i32);
            let centres = [
                (0, 0),
                (wi / 2, hi / 3),
                (wi - 1, hi - 1),
                (-30, hi / 2),
                (wi + 5, -2),
                (wi / 3, hi + 19),
            ];
            for reach in [0, 3, 19] {
                let mut around = GrayImage::from_vec(w, h, vec![7; w * h]).unwrap();
                blur_level_around(
                    &img,
                    &mut around,
                    &mut BlurBuffers::default(),
                    centres,
                    reach,
                );
                for (cx, cy) in centres {
                    for y in (cy - reach).max(0)..=(cy + reach).min(hi - 1) {
                        for x in (cx - reach).max(0)..=(cx + reach).min(wi - 1) {
                            let (x, y) = (x as usize, y as usize);
                            assert_eq!(
                                around.get(x, y),
                                whole.get(x, y),
                                "{w}x{h} reach {reach} at ({x}, {y})"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn blur_around_takes_any_centre() {
        let img = GrayImage::from_vec(40, 30, vec![9; 1200]).unwrap();
        let mut out = GrayImage::default();
        let far = [(i32::MIN, i32::MAX), (i32::MAX, i32::MIN), (20, 15)];
        blur_level_around(&img, &mut out, &mut BlurBuffers::default(), far, 19);
        assert_eq!(out.get(20, 15), 9);
    }

    #[test]
    fn row_pass_sums_fit_f64() {
        // blur_rect_impl's argument: the taps on the 2^-27 grid, 255 times their sum
        // below 2^9, so every row-pass value is an integer below 2^36 times 2^-27.
        let k = blur_kernel();
        let grid = 2f64.powi(27);
        for t in k {
            let scaled = t as f64 * grid;
            assert_eq!(scaled, scaled.trunc(), "tap {t:e} off the 2^-27 grid");
        }
        let top: f64 = k.iter().map(|&t| t as f64).sum::<f64>() * 255.0;
        assert!(top < 512.0 && top * grid < 2f64.powi(53));
    }

    #[test]
    fn blur_kernel_is_opencvs() {
        let bits: Vec<u32> = blur_kernel().iter().map(|k| k.to_bits()).collect();
        assert_eq!(
            bits,
            [0x3d8fafb1, 0x3e06387e, 0x3e434a39, 0x3e5d4ae0, 0x3e434a39, 0x3e06387e, 0x3d8fafb1]
        );
    }

    #[test]
    fn u8_conversion_is_saturate_cast() {
        let mut x = -20.0f32;
        while x < 280.0 {
            assert_eq!(
                to_u8_clamped(x),
                x.round_ties_even().clamp(0.0, 255.0) as u8,
                "{x}"
            );
            x += 0.0625;
        }
        for x in [0.5f32, 1.5, 2.5, 254.5, 255.5, 0.49999997, 127.50001] {
            assert_eq!(
                to_u8_clamped(x),
                x.round_ties_even().clamp(0.0, 255.0) as u8,
                "{x}"
            );
        }
    }
}
