//! Shi-Tomasi corners: `cv::cornerMinEigenVal` and `cv::goodFeaturesToTrack` (CPU
//! reference for the tracker's top-up detection), bit-exact with the opencv-python 5.0
//! wheel on x86-64.
//!
//! - [`min_eigen_map`]: the smaller eigenvalue of the gradient covariance over a
//!   `block_size` box (`cv::cornerMinEigenVal(img, block_size, ksize)`): the same scaled
//!   Sobel, products and box sums as `cv::cornerHarris` (shared with
//!   [`super::harris`]), then `(a + c) - sqrt((a - c)^2 + b^2)` with `a`, `c` halved, every
//!   step rounded to f32 and nothing fused: unlike the wheel's Harris response, its vector
//!   and scalar loops round alike (tests/exact_track.rs checks the whole map's bits, and a
//!   fused `b*b + t*t` fails it).
//! - [`good_features_to_track`]: threshold at `quality * max` over the mask (IPP's
//!   `v < thr + FLT_EPSILON` zeroing), 3x3 dilation, the local maxima inside a one-pixel
//!   border and the mask, sorted by value then by position (later pixel first on ties: the
//!   comparator of OpenCV's gftt.cpp compares addresses), then the greedy minimum-distance
//!   filter over a grid of `round(min_distance)` cells, up to `max_corners`.

use super::harris::{covariance_map, DenseScratch};
use crate::image::GrayImage;

/// `cv::goodFeaturesToTrack` parameters (`useHarrisDetector = false`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GfttParams {
    /// At most this many corners; 0 = no limit.
    pub max_corners: usize,
    pub quality: f64,
    pub min_distance: f64,
    pub block_size: u32,
    /// Sobel aperture (`gradientSize`): 3, 5 or 7.
    pub ksize: u32,
}

impl Default for GfttParams {
    /// VINS-Fusion's call: 150 corners, quality 0.01, 30 px apart, 3x3 blocks.
    fn default() -> Self {
        GfttParams {
            max_corners: 150,
            quality: 0.01,
            min_distance: 30.0,
            block_size: 3,
            ksize: 3,
        }
    }
}

/// `cv::cornerMinEigenVal(img, block_size, ksize)` into `out` (row-major).
pub fn min_eigen_map(img: &GrayImage, block_size: u32, ksize: u32, out: &mut Vec<f32>) {
    min_eigen_map_with(img, block_size, ksize, &mut DenseScratch::default(), out)
}

/// [`min_eigen_map`] with its row buffers kept in `scratch`.
fn min_eigen_map_with(
    img: &GrayImage,
    block_size: u32,
    ksize: u32,
    scratch: &mut DenseScratch,
    out: &mut Vec<f32>,
) {
    let mut finish = |a: &[f32], b: &[f32], c: &[f32], _i0: usize, row: &mut [f32]| {
        for (x, o) in row.iter_mut().enumerate() {
            let (a, b, c) = (a[x] * 0.5, b[x], c[x] * 0.5);
            let t = a - c;
            *o = (a + c) - (t * t + b * b).sqrt();
        }
    };
    covariance_map(img.view(), block_size, ksize, &mut finish, scratch, out);
}

/// Reusable buffers of [`good_features_to_track`].
#[derive(Default)]
pub struct GfttScratch {
    eig: Vec<f32>,
    dil: Vec<f32>,
    rowmax: Vec<f32>,
    dense: DenseScratch,
    cand: Vec<u32>,
    grid: SpacingGrid,
}

/// `cv::goodFeaturesToTrack(img, corners, max_corners, quality, min_distance, mask,
/// block_size, ksize)` into `out` (pixel centres, strongest first). `mask`, when given, has
/// the image's size; 0 excludes a pixel.
pub fn good_features_to_track(
    img: &GrayImage,
    p: &GfttParams,
    mask: Option<&GrayImage>,
    s: &mut GfttScratch,
    out: &mut Vec<(f32, f32)>,
) {
    gftt_versions(img, p, mask, s, out)
}

super::simd::versions! {
    /// [`gftt_impl`] at the process's SIMD level.
    fn gftt_versions(img: &GrayImage, p: &GfttParams, mask: Option<&GrayImage>, s: &mut GfttScratch, out: &mut Vec<(f32, f32)>) = gftt_impl;
}

#[inline(always)]
fn gftt_impl(
    img: &GrayImage,
    p: &GfttParams,
    mask: Option<&GrayImage>,
    s: &mut GfttScratch,
    out: &mut Vec<(f32, f32)>,
) {
    out.clear();
    let (w, h) = (img.width, img.height);
    if w == 0 || h == 0 {
        return;
    }
    if let Some(m) = mask {
        assert_eq!((m.width, m.height), (w, h), "mask size");
    }
    min_eigen_map_with(img, p.block_size, p.ksize, &mut s.dense, &mut s.eig);
    let masked = |i: usize| mask.map_or(true, |m| m.data[i] != 0);
    let max = masked_max(&s.eig, mask.map(|m| &m.data[..]));
    let max_val = if max == f32::NEG_INFINITY {
        0.0
    } else {
        max as f64
    };
    let thr = (max_val * p.quality) as f32 + f32::EPSILON;
    for v in s.eig.iter_mut() {
        if *v < thr {
            *v = 0.0;
        }
    }
    dilate3(&s.eig, w, h, &mut s.rowmax, &mut s.dil);
    s.cand.clear();
    // Room for every interior pixel: the candidates of any later frame of this size fit.
    s.cand.reserve(w.saturating_sub(2) * h.saturating_sub(2));
    for y in 1..h.saturating_sub(1) {
        for x in 1..w - 1 {
            let i = y * w + x;
            let v = s.eig[i];
            if v != 0.0 && v == s.dil[i] && masked(i) {
                s.cand.push(i as u32);
            }
        }
    }
    let eig = &s.eig;
    s.cand
        .sort_unstable_by(|&a, &b| eig[b as usize].total_cmp(&eig[a as usize]).then(b.cmp(&a)));
    take_best(s.cand.iter().copied(), w, h, p, &mut s.grid, out);
}

/// The end of `goodFeaturesToTrack` shared by the CPU and the GPU: from the candidates'
/// pixel indices (row-major, width `w`), strongest first, the first `max_corners` (0: all),
/// spaced by `min_distance` when it is at least 1 ([`keep_spaced`]), appended to `out`.
pub fn take_best(
    sorted: impl Iterator<Item = u32>,
    w: usize,
    h: usize,
    p: &GfttParams,
    grid: &mut SpacingGrid,
    out: &mut Vec<(f32, f32)>,
) {
    let limit = if p.max_corners > 0 {
        p.max_corners
    } else {
        usize::MAX
    };
    if p.min_distance < 1.0 {
        out.extend(
            sorted
                .take(limit)
                .map(|i| ((i as usize % w) as f32, (i as usize / w) as f32)),
        );
        return;
    }
    let pts = sorted.map(|i| ((i as usize % w) as u32, (i as usize / w) as u32));
    keep_spaced(pts, w, h, p.min_distance, limit, grid, out);
}

/// The points [`keep_spaced`] kept, by grid cell, in one flat buffer with a border of
/// empty cells around the image's (so that every candidate's 3x3 cells exist), reused from
/// frame to frame.
#[derive(Default)]
pub struct SpacingGrid {
    cells: Vec<Cell>,
}

/// Points of one cell are `min_distance` apart inside a square of side `cell - 1` with
/// `cell = round(min_distance)`, so `min_distance > cell - 1`, the square's side: at most two
/// fit (the square's diagonal ends).
const CELL_POINTS: usize = 2;

/// A cell's points; the free slots hold [`FAR`].
#[derive(Clone, Copy)]
struct Cell([(f32, f32); CELL_POINTS]);

/// A free slot: at an infinite distance from every pixel, so never near one (any
/// `min_distance`, an infinite one too: `inf < inf` is false).
const FAR: (f32, f32) = (f32::INFINITY, f32::INFINITY);

impl SpacingGrid {
    /// `gw * gh` empty cells inside a border of empty cells.
    fn reset(&mut self, gw: usize, gh: usize) {
        self.cells.clear();
        self.cells
            .resize((gw + 2) * (gh + 2), Cell([FAR; CELL_POINTS]));
    }
}

/// The least `f32` at or above `v >= 0` (NaN for NaN): for any `f32` s, `(s as f64) < v`
/// exactly when `s < f32_above(v)`, so that the spacing's distances compare in `f32`.
fn f32_above(v: f64) -> f32 {
    let f = v as f32; // round to nearest
    if (f as f64) < v {
        // The next f32 up (`f` is finite and not negative here: `f32::next_up` is newer
        // than the crate's minimum Rust).
        f32::from_bits(f.to_bits() + 1)
    } else {
        f
    }
}

/// The greedy spacing of `goodFeaturesToTrack`: walks `candidates` (strongest first) and
/// keeps each one farther than `min_distance` from every point kept before (checked in a
/// grid of `round(min_distance)` cells), appending to `out` until it holds `limit`.
///
/// Each candidate is checked against the 3x3 cells around its own, a row of cells at a time
/// (its own row first), every slot of the row's three cells without a branch: a new scene's
/// candidates are mostly near a kept point, and a search that branched on each cell's count
/// and stopped at the first near point (a `Vec` per cell before) cost three times as much on
/// the densest frames (camera.png tiled to 752x480: 4,780 candidates, 0.094 -> 0.033 ms on
/// the development machine; docs/performance.md, change 78).
pub fn keep_spaced(
    candidates: impl Iterator<Item = (u32, u32)>,
    w: usize,
    h: usize,
    min_distance: f64,
    limit: usize,
    grid: &mut SpacingGrid,
    out: &mut Vec<(f32, f32)>,
) {
    if out.len() >= limit {
        return;
    }
    let cell = (min_distance.round_ties_even() as usize).max(1);
    let (gw, gh) = (w.div_ceil(cell), h.div_ceil(cell));
    grid.reset(gw, gh);
    let stride = gw + 2;
    let cells = &mut grid.cells[..];
    let below = f32_above(min_distance * min_distance);
    for (x, y) in candidates {
        let (x, y) = (x as usize, y as usize);
        // The candidate's cell in the bordered grid (row and column + 1).
        let (cx, cy) = (x / cell + 1, y / cell + 1);
        let (fx, fy) = (x as f32, y as f32);
        let near_in = |row: usize| {
            let mut near = false;
            for c in &cells[row * stride + cx - 1..row * stride + cx + 2] {
                for &(mx, my) in &c.0 {
                    let (dx, dy) = (fx - mx, fy - my);
                    near |= dx * dx + dy * dy < below;
                }
            }
            near
        };
        if near_in(cy) || near_in(cy - 1) || near_in(cy + 1) {
            continue;
        }
        let c = &mut cells[cy * stride + cx];
        // A free slot always (CELL_POINTS); a point that found none would still be kept,
        // only left out of the later checks.
        if let Some(slot) = c.0.iter_mut().find(|p| p.0 == f32::INFINITY) {
            *slot = (fx, fy);
        }
        out.push((fx, fy));
        if out.len() == limit {
            break;
        }
    }
}

/// 3x3 maximum (`cv::dilate` with the default kernel; pixels outside the image ignored).
/// The map holds no NaN (thresholded minimum eigenvalues: +0.0 or above the threshold),
/// so `max` is [`max2`]'s plain comparison, and the interior loops have no branch: they
/// vectorize.
#[inline(always)]
fn dilate3(src: &[f32], w: usize, h: usize, rowmax: &mut Vec<f32>, dst: &mut Vec<f32>) {
    dst.resize(w * h, 0.0);
    rowmax.resize(w * h, 0.0);
    if w == 0 || h == 0 {
        return;
    }
    for y in 0..h {
        let r = &src[y * w..(y + 1) * w];
        let o = &mut rowmax[y * w..(y + 1) * w];
        if w == 1 {
            o[0] = r[0];
            continue;
        }
        o[0] = max2(r[0], r[1]);
        o[w - 1] = max2(r[w - 1], r[w - 2]);
        for x in 1..w - 1 {
            o[x] = max2(max2(r[x], r[x - 1]), r[x + 1]);
        }
    }
    for y in 0..h {
        let c = &rowmax[y * w..(y + 1) * w];
        let up = &rowmax[y.saturating_sub(1) * w..][..w];
        let down = &rowmax[(y + 1).min(h - 1) * w..][..w];
        let o = &mut dst[y * w..(y + 1) * w];
        for x in 0..w {
            o[x] = max2(max2(c[x], up[x]), down[x]);
        }
    }
}

/// `a.max(b)` for values that are not NaN: one `maxps` where `f32::max` needs a NaN fixup.
#[inline(always)]
fn max2(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// The largest value of `eig` where `mask` (same length) is non-zero, or of all of `eig`;
/// `-inf` when none. Eight running maxima, then their maximum: the same value as one
/// running maximum (the map holds no NaN), in a form that vectorizes.
#[inline(always)]
fn masked_max(eig: &[f32], mask: Option<&[u8]>) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let n = eig.len() / 8 * 8;
    match mask {
        Some(m) => {
            for (e, m) in eig[..n].chunks_exact(8).zip(m[..n].chunks_exact(8)) {
                for j in 0..8 {
                    let v = if m[j] != 0 { e[j] } else { f32::NEG_INFINITY };
                    lanes[j] = max2(lanes[j], v);
                }
            }
            for (i, &v) in eig.iter().enumerate().skip(n) {
                if m[i] != 0 {
                    lanes[0] = max2(lanes[0], v);
                }
            }
        }
        None => {
            for e in eig[..n].chunks_exact(8) {
                for j in 0..8 {
                    lanes[j] = max2(lanes[j], e[j]);
                }
            }
            for &v in &eig[n..] {
                lanes[0] = max2(lanes[0], v);
            }
        }
    }
    lanes.into_iter().fold(f32::NEG_INFINITY, max2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dark image with bright squares: each square's four corners are corners.
    fn squares() -> GrayImage {
        let mut img = GrayImage::new(120, 90);
        for (x0, y0) in [(20usize, 20usize), (70, 40)] {
            for y in y0..y0 + 25 {
                for x in x0..x0 + 25 {
                    img.data[y * 120 + x] = 200;
                }
            }
        }
        img
    }

    #[test]
    fn corners_of_squares_are_found_strongest_first_and_spaced() {
        let img = squares();
        let mut out = Vec::new();
        let p = GfttParams {
            min_distance: 10.0,
            ..Default::default()
        };
        good_features_to_track(&img, &p, None, &mut GfttScratch::default(), &mut out);
        assert_eq!(out.len(), 8, "{out:?}");
        for (i, a) in out.iter().enumerate() {
            for b in &out[i + 1..] {
                assert!((a.0 - b.0).hypot(a.1 - b.1) >= 10.0);
            }
        }
        let mut eig = Vec::new();
        min_eigen_map(&img, 3, 3, &mut eig);
        let v: Vec<f32> = out
            .iter()
            .map(|&(x, y)| eig[y as usize * 120 + x as usize])
            .collect();
        assert!(v.windows(2).all(|w| w[0] >= w[1]), "{v:?}");
    }

    #[test]
    fn the_mask_and_the_limit_hold() {
        let img = squares();
        let mut mask = GrayImage::new(120, 90);
        for y in 0..90 {
            for x in 0..60 {
                mask.data[y * 120 + x] = 255;
            }
        }
        let p = GfttParams {
            min_distance: 10.0,
            ..Default::default()
        };
        let mut out = Vec::new();
        let mut s = GfttScratch::default();
        good_features_to_track(&img, &p, Some(&mask), &mut s, &mut out);
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|&(x, _)| x < 60.0));
        let p2 = GfttParams {
            max_corners: 3,
            ..p
        };
        good_features_to_track(&img, &p2, None, &mut s, &mut out);
        assert_eq!(out.len(), 3);
    }

    /// The greedy spacing as its definition states it: each candidate against every point
    /// kept before.
    fn spaced_by_definition(c: &[(u32, u32)], md: f64, limit: usize) -> Vec<(f32, f32)> {
        let mut out: Vec<(f32, f32)> = Vec::new();
        for &(x, y) in c {
            let (fx, fy) = (x as f32, y as f32);
            let near = out.iter().any(|&(mx, my)| {
                let (dx, dy) = (fx - mx, fy - my);
                ((dx * dx + dy * dy) as f64) < md * md
            });
            if !near {
                out.push((fx, fy));
                if out.len() == limit {
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn keep_spaced_equals_the_greedy_against_every_kept_point() {
        let (w, h) = (203usize, 97usize);
        let mut s = 0x2545_f491u32;
        let mut grid = SpacingGrid::default();
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        for md in [
            1.0, 1.5, 2.5, 3.49, 7.0, 10.0, 29.6, 30.0, 30.4, 150.0, 1e9, 1e30, inf, nan,
        ] {
            for (n, limit) in [(5000usize, usize::MAX), (3000, 40), (400, 7)] {
                let c: Vec<(u32, u32)> = (0..n)
                    .map(|_| {
                        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        ((s >> 8) % w as u32, (s >> 20) % h as u32)
                    })
                    .collect();
                let mut out = Vec::new();
                keep_spaced(c.iter().copied(), w, h, md, limit, &mut grid, &mut out);
                assert_eq!(out, spaced_by_definition(&c, md, limit), "md {md} n {n}");
            }
        }
    }
}
