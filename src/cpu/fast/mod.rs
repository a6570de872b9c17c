//! FAST-9/16 (CPU reference for `kernels/fast_harris.cu`), identical to
//! `cv::FAST(img, threshold, nonmaxSuppression)` with `TYPE_9_16`.
//!
//! Semantics pinned against OpenCV (and checked by `tests/exact_fast_harris.rs`):
//! - circle pixel `p` is *brighter* when `p > v + t` and *darker* when `p < v - t` (strict);
//!   a corner has 9 contiguous brighter or 9 contiguous darker pixels on the 16-pixel circle;
//! - only pixels at least 3 away from every border are tested;
//! - the score is the largest threshold at which the pixel is still a corner, i.e.
//!   `max over 9-arcs of min |p - v| (all same sign)` minus 1 (OpenCV's `cornerScore`);
//! - NMS keeps a corner whose score is strictly greater than the score of each of its 8
//!   neighbours (non-corners count as 0), so equal neighbours suppress each other;
//! - output is in raster order (y, then x).
//!
//! `cv::FAST` reports `response = 0` when NMS is off (it skips the score); here the score is
//! always computed, so `fast_score`/`response` carry it in both modes.
//!
//! The scalar segment test uses the binary encoding of Chang et al. ("Faster than FAST", seed
//! 001): one 16-bit mask per polarity, doubled to 32 bits so that arcs wrapping past pixel 15
//! are contiguous runs, and a run of 9 found with shifted ANDs instead of a loop over arcs.
//! The row scan tests 32 centres at once behind the compass-pixel filter, counting each
//! polarity's runs in byte lanes (`arc9_count`) as OpenCV's vector FAST does.

use std::ops::Range;

use crate::image::GrayImage;
use crate::select::Corner;

/// The Bresenham circle of radius 3 as `(dx, dy)` in OpenCV's order (`makeOffsets`): from
/// the pixel below the centre, towards +x. Indices 0, 4, 8, 12 are the compass pixels.
pub const CIRCLE: [(i32, i32); 16] = [
    (0, 3),
    (1, 3),
    (2, 2),
    (3, 1),
    (3, 0),
    (3, -1),
    (2, -2),
    (1, -3),
    (0, -3),
    (-1, -3),
    (-2, -2),
    (-3, -1),
    (-3, 0),
    (-3, 1),
    (-2, 2),
    (-1, 3),
];

/// Distance to the border below which no pixel is tested.
pub const BORDER: usize = 3;

/// `(brighter, darker)`: bit `k` is set when circle pixel `k` is `> v + t` (resp. `< v - t`).
/// The caller guarantees `(x, y)` is at least [`BORDER`] pixels inside the image.
#[inline]
pub fn ring_masks(img: &GrayImage, x: usize, y: usize, threshold: u8) -> (u16, u16) {
    let w = img.width as isize;
    let c = y as isize * w + x as isize;
    let v = img.data[c as usize] as i32;
    let (hi, lo) = (v + threshold as i32, v - threshold as i32);
    let (mut bright, mut dark) = (0u16, 0u16);
    for (k, &(dx, dy)) in CIRCLE.iter().enumerate() {
        let p = img.data[(c + dy as isize * w + dx as isize) as usize] as i32;
        bright |= ((p > hi) as u16) << k;
        dark |= ((p < lo) as u16) << k;
    }
    (bright, dark)
}

/// True when the circular 16-bit `mask` holds 9 contiguous set bits.
///
/// Doubling the mask to 32 bits turns every wrapped arc into a plain run; `r & (r >> s)`
/// then doubles the guaranteed run length (1 -> 2 -> 4 -> 8) and one more shift by 8 makes it
/// 9. Bit `i` of the result is set iff bits `i..=i+8` of the doubled mask are all set.
#[inline]
pub fn has_arc9(mask: u16) -> bool {
    let m = mask as u32 | (mask as u32) << 16;
    let r2 = m & (m >> 1);
    let r4 = r2 & (r2 >> 2);
    let r8 = r4 & (r4 >> 4);
    r8 & (m >> 8) != 0
}

/// OpenCV's FAST score at `(x, y)`: the largest threshold for which it is still a corner, i.e.
/// the best 9-arc's smallest same-signed difference to the centre, minus 1; 0 when there is
/// no arc with a positive difference. Same border precondition as [`ring_masks`].
pub fn score(img: &GrayImage, x: usize, y: usize) -> u8 {
    let w = img.width as isize;
    let c = y as isize * w + x as isize;
    let ring = CIRCLE.map(|(dx, dy)| img.data[(c + dy as isize * w + dx as isize) as usize]);
    ring_score(img.data[c as usize], &ring)
}

/// [`score`] from the centre value and the 16 circle pixels in [`CIRCLE`] order.
///
/// `d[k] = p_k - v` over the doubled circle; the min (max) of every 9-arc comes from runs of
/// 2, 4, 8 then 9 (the same doubling as [`has_arc9`]), in fixed-size arrays that vectorise.
#[inline(always)]
fn ring_score(v: u8, ring: &[u8; 16]) -> u8 {
    let mut d = [0i16; 25];
    for (k, e) in d.iter_mut().enumerate() {
        *e = ring[k & 15] as i16 - v as i16;
    }
    let (mut mn2, mut mx2) = ([0i16; 24], [0i16; 24]);
    for k in 0..24 {
        mn2[k] = d[k].min(d[k + 1]);
        mx2[k] = d[k].max(d[k + 1]);
    }
    let (mut mn4, mut mx4) = ([0i16; 22], [0i16; 22]);
    for k in 0..22 {
        mn4[k] = mn2[k].min(mn2[k + 2]);
        mx4[k] = mx2[k].max(mx2[k + 2]);
    }
    let mut best = 0i16;
    for k in 0..16 {
        let mn9 = mn4[k].min(mn4[k + 4]).min(d[k + 8]);
        let mx9 = mx4[k].max(mx4[k + 4]).max(d[k + 8]);
        best = best.max(mn9).max(-mx9);
    }
    (best - 1).max(0) as u8
}

/// The plain 16-arc segment test, for property tests: 9 contiguous circle pixels all
/// `> v + t` or all `< v - t`. Same border precondition as [`ring_masks`].
pub fn is_corner_naive(img: &GrayImage, x: usize, y: usize, threshold: u8) -> bool {
    let v = img.get(x, y) as i32;
    let t = threshold as i32;
    let px = |k: usize| {
        let (dx, dy) = CIRCLE[k % 16];
        img.get((x as i32 + dx) as usize, (y as i32 + dy) as usize) as i32
    };
    (0..16).any(|start| {
        (start..start + 9).all(|k| px(k) > v + t) || (start..start + 9).all(|k| px(k) < v - t)
    })
}

/// Pixels per step of the vectorised row scan.
const LANES: usize = 32;

/// The 7 image rows `y - 3 ..= y + 3` around a scanned row.
type Rows<'a> = [&'a [u8]; 7];

/// `LANES` circle pixel `k` values for the centres `x0 .. x0 + LANES`.
#[inline(always)]
fn ring_lanes(rows: &Rows, k: usize, x0: usize) -> [u8; LANES] {
    let (dx, dy) = CIRCLE[k];
    let x = x0.wrapping_add_signed(dx as isize);
    rows[(dy + 3) as usize][x..x + LANES].try_into().unwrap()
}

/// The longest run of consecutive circle pixels brighter than `thr` (`bright`) or darker,
/// of `LANES` centres at `x0`, capped past 9: the segment test as OpenCV's vector FAST
/// counts it. The walk goes round the circle once and on for 8 more pixels, so a run that
/// wraps past pixel 15 is counted whole. Byte counters in registers (no 16-row masks kept:
/// those spilled to the stack; measured 2026-12-07).
#[inline(always)]
fn arc9_count(ring: &[&[u8; LANES]; 16], thr: &[u8; LANES], bright: bool) -> [u8; LANES] {
    let (mut run, mut best) = ([0u8; LANES], [0u8; LANES]);
    for k in 0..24 {
        let p = ring[k & 15];
        for i in 0..LANES {
            let pass = if bright { p[i] > thr[i] } else { p[i] < thr[i] };
            // (run + 1) where the pixel passes, else 0; never above 24.
            run[i] = if pass { run[i] + 1 } else { 0 };
            best[i] = best[i].max(run[i]);
        }
    }
    best
}

/// Corner flags (0 / 1) of the centres `x0 .. x0 + LANES` of the middle row; `None` when
/// there is none. Needs `3 <= x0` and `x0 + LANES + 3 <= width`.
///
/// `p > v + t` and `p < v - t` are the same tests on bytes with saturating `v ± t`, since
/// no byte is above 255 or below 0.
#[inline(always)]
fn corner_lanes(rows: &Rows, x0: usize, t: u8) -> Option<[u8; LANES]> {
    let v: [u8; LANES] = rows[3][x0..x0 + LANES].try_into().unwrap();
    let (mut hi, mut lo) = ([0u8; LANES], [0u8; LANES]);
    for i in 0..LANES {
        hi[i] = v[i].saturating_add(t);
        lo[i] = v[i].saturating_sub(t);
    }
    // A 9-arc spans two neighbouring compass pixels (0, 4, 8, 12): reject unless one such
    // pair is brighter (or darker) together, i.e. (0 or 8) and (4 or 12). Each polarity is
    // walked only where some centre passes its own filter.
    let (p0, p4, p8, p12) = (
        ring_lanes(rows, 0, x0),
        ring_lanes(rows, 4, x0),
        ring_lanes(rows, 8, x0),
        ring_lanes(rows, 12, x0),
    );
    let (mut any_b, mut any_d) = (0u8, 0u8);
    for i in 0..LANES {
        let (h, l) = (hi[i], lo[i]);
        any_b |= (((p0[i] > h) | (p8[i] > h)) & ((p4[i] > h) | (p12[i] > h))) as u8;
        any_d |= (((p0[i] < l) | (p8[i] < l)) & ((p4[i] < l) | (p12[i] < l))) as u8;
    }
    if any_b | any_d == 0 {
        return None;
    }
    // The 16 circle pixels' vectors, bounds-checked once for both walks.
    let ring: [&[u8; LANES]; 16] = std::array::from_fn(|k| {
        let (dx, dy) = CIRCLE[k];
        let x = x0.wrapping_add_signed(dx as isize);
        rows[(dy + 3) as usize][x..x + LANES].try_into().unwrap()
    });
    let mut flags = [0u8; LANES];
    if any_b != 0 {
        let b = arc9_count(&ring, &hi, true);
        for i in 0..LANES {
            flags[i] |= (b[i] >= 9) as u8;
        }
    }
    if any_d != 0 {
        let d = arc9_count(&ring, &lo, false);
        for i in 0..LANES {
            flags[i] |= (d[i] >= 9) as u8;
        }
    }
    let mut any = 0u8;
    for &f in &flags {
        any |= f;
    }
    (any != 0).then_some(flags)
}

/// The FAST scores ([`lane_score`]) of the centres `x0 .. x0 + LANES` of the middle row at
/// once, for steps with many corners (a low threshold on texture). Same bounds as
/// [`corner_lanes`].
///
/// `ring_score`'s `max(0, max over arcs of min d, max over arcs of min -d) - 1` in bytes:
/// `min(max(d, 0))` over an arc is `max(min d, 0)`, so the saturating differences `p - v`
/// and `v - p` give the two polarities' arc minima (runs of 2, 4, 8 then 9) without i16.
#[inline(always)]
fn score_lanes(rows: &Rows, x0: usize) -> [u8; LANES] {
    let v: [u8; LANES] = rows[3][x0..x0 + LANES].try_into().unwrap();
    let mut best = [0u8; LANES];
    for bright in [true, false] {
        let mut d = [[0u8; LANES]; 16];
        for (k, dk) in d.iter_mut().enumerate() {
            let p = ring_lanes(rows, k, x0);
            for i in 0..LANES {
                dk[i] = if bright {
                    p[i].saturating_sub(v[i])
                } else {
                    v[i].saturating_sub(p[i])
                };
            }
        }
        let m8 = min_run_lanes(&min_run_lanes(&min_run_lanes(&d, 1), 2), 4);
        for k in 0..16 {
            for i in 0..LANES {
                best[i] = best[i].max(m8[k][i].min(d[(k + 8) & 15][i]));
            }
        }
    }
    let mut out = [0u8; LANES];
    for i in 0..LANES {
        out[i] = best[i].saturating_sub(1);
    }
    out
}

/// `min(m[k], m[k + s])` (circularly) for every `k`.
#[inline(always)]
fn min_run_lanes(m: &[[u8; LANES]; 16], s: usize) -> [[u8; LANES]; 16] {
    let mut r = [[0u8; LANES]; 16];
    for k in 0..16 {
        for i in 0..LANES {
            r[k][i] = m[k][i].min(m[(k + s) & 15][i]);
        }
    }
    r
}

/// From this many corners in a step, [`score_lanes`] scores the whole step (cheaper than
/// one [`lane_score`] each; the same scores).
const BATCH_SCORES: usize = 3;

/// Calls `found(x, y, score)` for every corner of row y among the centres `xs` (within
/// `BORDER..w - BORDER`), whose 7-row window is `rows`, in order of x.
#[inline(always)]
fn scan_row(
    rows: &Rows,
    y: usize,
    xs: Range<usize>,
    threshold: u8,
    found: &mut dyn FnMut(usize, usize, u8),
) {
    let end = xs.end;
    if end - xs.start < LANES {
        // Too narrow for one vector step: the scalar segment test.
        for x in xs {
            let v = rows[3][x] as i32;
            let (hi, lo) = (v + threshold as i32, v - threshold as i32);
            let (mut bright, mut dark) = (0u16, 0u16);
            for (k, &(dx, dy)) in CIRCLE.iter().enumerate() {
                let p = rows[(dy + 3) as usize][x.wrapping_add_signed(dx as isize)] as i32;
                bright |= ((p > hi) as u16) << k;
                dark |= ((p < lo) as u16) << k;
            }
            if has_arc9(bright) || has_arc9(dark) {
                found(x, y, lane_score(rows, x));
            }
        }
        return;
    }
    let mut x0 = xs.start;
    while x0 < end {
        // The last step is shifted left to end at `end`; lanes already scanned are skipped.
        let start = x0.min(end - LANES);
        if let Some(flags) = corner_lanes(rows, start, threshold) {
            // A plain loop: a closure here would stay baseline code (src/cpu/simd.rs).
            let mut n = 0usize;
            for &f in &flags[x0 - start..] {
                n += f as usize;
            }
            if n >= BATCH_SCORES {
                let scores = score_lanes(rows, start);
                for (i, &f) in flags.iter().enumerate().skip(x0 - start) {
                    if f != 0 {
                        found(start + i, y, scores[i]);
                    }
                }
            } else {
                for (i, &f) in flags.iter().enumerate().skip(x0 - start) {
                    if f != 0 {
                        found(start + i, y, lane_score(rows, start + i));
                    }
                }
            }
        }
        x0 += LANES;
    }
}

/// The FAST score of centre `x` of the middle row of `rows`.
#[inline(always)]
fn lane_score(rows: &Rows, x: usize) -> u8 {
    let mut ring = [0u8; 16];
    for (p, &(dx, dy)) in ring.iter_mut().zip(&CIRCLE) {
        *p = rows[(dy + 3) as usize][x.wrapping_add_signed(dx as isize)];
    }
    ring_score(rows[3][x], &ring)
}

/// Scans the centres `xs` of rows `ys` (each at least [`BORDER`] inside); `found(x, y,
/// score)` in raster order. Inlined into each SIMD level's copy (`simd::versions!`).
#[inline(always)]
fn scan_image(
    img: &GrayImage,
    threshold: u8,
    ys: Range<usize>,
    xs: Range<usize>,
    found: &mut dyn FnMut(usize, usize, u8),
) {
    for y in ys {
        let rows: Rows = [
            img.row(y - 3),
            img.row(y - 2),
            img.row(y - 1),
            img.row(y),
            img.row(y + 1),
            img.row(y + 2),
            img.row(y + 3),
        ];
        scan_row(&rows, y, xs.clone(), threshold, found);
    }
}

super::simd::versions! {
    /// [`scan_image`] at the SIMD level of this process (same results on every level).
    fn scan_versions(img: &GrayImage, threshold: u8, ys: Range<usize>, xs: Range<usize>, found: &mut dyn FnMut(usize, usize, u8)) = scan_image;
}

/// [`scan_image`] over whole rows.
fn scan(img: &GrayImage, threshold: u8, ys: Range<usize>, found: &mut dyn FnMut(usize, usize, u8)) {
    scan_versions(img, threshold, ys, BORDER..img.width - BORDER, found);
}

/// The corners of [`detect`] without NMS, restricted to rows `ys` (clipped to the tested
/// rows), as `found(x, y, score)` in raster order: the same vectorised scanner, no
/// allocation. For callers that run their own suppression (`select::fast_in_cells`).
pub(crate) fn scan_corners(
    img: &GrayImage,
    threshold: u8,
    ys: Range<usize>,
    found: &mut dyn FnMut(usize, usize, u8),
) {
    let (w, h) = (img.width, img.height);
    if w < 2 * BORDER + 1 || h < 2 * BORDER + 1 {
        return;
    }
    let ys = ys.start.max(BORDER)..ys.end.min(h - BORDER);
    if !ys.is_empty() {
        scan(img, threshold, ys, found);
    }
}

/// [`scan_corners`] of the centres `xs` only (clipped to the tested columns).
pub(crate) fn scan_corners_in(
    img: &GrayImage,
    threshold: u8,
    ys: Range<usize>,
    xs: Range<usize>,
    found: &mut dyn FnMut(usize, usize, u8),
) {
    let (w, h) = (img.width, img.height);
    if w < 2 * BORDER + 1 || h < 2 * BORDER + 1 {
        return;
    }
    let ys = ys.start.max(BORDER)..ys.end.min(h - BORDER);
    let xs = xs.start.max(BORDER)..xs.end.min(w - BORDER);
    if !ys.is_empty() && !xs.is_empty() {
        scan_versions(img, threshold, ys, xs, found);
    }
}

/// All FAST corners in raster order (y, then x), `response` = FAST score as f32.
pub fn detect(img: &GrayImage, threshold: u8, nonmax_suppression: bool) -> Vec<Corner> {
    let (w, h) = (img.width, img.height);
    if w < 2 * BORDER + 1 || h < 2 * BORDER + 1 {
        return Vec::new();
    }
    detect_rows(img, threshold, nonmax_suppression, BORDER..h - BORDER)
}

/// [`detect`] on the current rayon pool in `bands` bands of rows, the same corners in the
/// same order: each band scans one row more on each side for its suppression and keeps its
/// own rows' corners, and the bands are joined in order.
pub fn detect_banded(
    img: &GrayImage,
    threshold: u8,
    nonmax_suppression: bool,
    bands: usize,
) -> Vec<Corner> {
    use rayon::prelude::*;
    let (w, h) = (img.width, img.height);
    if w < 2 * BORDER + 1 || h < 2 * BORDER + 1 {
        return Vec::new();
    }
    let rows = h - 2 * BORDER;
    let per = rows.div_ceil(bands.clamp(1, rows));
    let parts: Vec<Vec<Corner>> = (0..rows.div_ceil(per))
        .into_par_iter()
        .map(|b| {
            let y0 = BORDER + b * per;
            detect_rows(
                img,
                threshold,
                nonmax_suppression,
                y0..(y0 + per).min(h - BORDER),
            )
        })
        .collect();
    parts.concat()
}

/// The corners of rows `ys` (within `BORDER..h - BORDER`; the image at least 7x7).
fn detect_rows(
    img: &GrayImage,
    threshold: u8,
    nonmax_suppression: bool,
    ys: Range<usize>,
) -> Vec<Corner> {
    let (w, h) = (img.width, img.height);
    let mut out = Vec::new();
    if !nonmax_suppression {
        scan(img, threshold, ys, &mut |x, y, s| out.push(corner(x, y, s)));
        return out;
    }
    // The rows beside the band are scanned too: their scores suppress the band's edges.
    let scan_rows = ys.start.saturating_sub(1).max(BORDER)..(ys.end + 1).min(h - BORDER);
    let mut nms = Nms {
        scores: [vec![0u8; w], vec![0u8; w], vec![0u8; w]],
        xs: [Vec::new(), Vec::new(), Vec::new()],
        first: scan_rows.start,
        open: scan_rows.start - 1,
        out,
    };
    let end = scan_rows.end;
    scan(img, threshold, scan_rows, &mut |x, y, s| {
        nms.open_to(y);
        nms.scores[y % 3][x] = s;
        nms.xs[y % 3].push(x);
    });
    // Two more (empty) rows let the last scanned row go through NMS.
    nms.open_to(end + 1);
    let mut out = nms.out;
    // The extra rows were suppressed without their outer neighbours: not this band's.
    out.retain(|c| ys.contains(&(c.y as usize)));
    out
}

/// Non-maximum suppression over a ring of 3 score rows: slot `y % 3` holds row y's scores
/// (0 = no corner) and the x of its corners.
struct Nms {
    scores: [Vec<u8>; 3],
    xs: [Vec<usize>; 3],
    /// The first row scanned (the one above it counts as empty).
    first: usize,
    /// The last row opened (rows up to `open - 1` are complete).
    open: usize,
    out: Vec<Corner>,
}

impl Nms {
    /// Opens rows `open + 1 ..= to`. Opening row r means r - 1 is complete, so row r - 2 is
    /// suppressed first, then r's slot (row r - 3's) is cleared.
    fn open_to(&mut self, to: usize) {
        while self.open < to {
            self.open += 1;
            let r = self.open;
            if r >= self.first + 2 {
                self.suppress(r - 2);
            }
            let slot = r % 3;
            for &x in &self.xs[slot] {
                self.scores[slot][x] = 0;
            }
            self.xs[slot].clear();
        }
    }

    /// Keeps the corners of row y strictly above all 8 neighbours.
    fn suppress(&mut self, y: usize) {
        let (above, mid, below) = (
            &self.scores[(y + 2) % 3],
            &self.scores[y % 3],
            &self.scores[(y + 1) % 3],
        );
        for &x in &self.xs[y % 3] {
            let s = mid[x];
            let beats = |r: &[u8]| s > r[x - 1] && s > r[x] && s > r[x + 1];
            if s > mid[x - 1] && s > mid[x + 1] && beats(above) && beats(below) {
                self.out.push(corner(x, y, s));
            }
        }
    }
}

#[inline]
fn corner(x: usize, y: usize, s: u8) -> Corner {
    Corner {
        x: x as u32,
        y: y as u32,
        fast_score: s,
        response: s as f32,
    }
}

#[cfg(test)]
mod tests;
