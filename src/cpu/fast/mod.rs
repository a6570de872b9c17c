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
//! The row scan filters steps of 32 centres with the compass pixels, 64 steps at a time
//! without a branch, keeps the polarities whose 8 opposite circle pairs a centre passes
//! (`opposite_pairs`), then counts the survivors' runs in byte lanes (`arc9_mask`, both
//! polarities in one unrolled walk) as OpenCV's vector FAST does. The suppression is in
//! `nms`.

use std::ops::Range;

use super::simd::prefetch;
use crate::image::{AsGray, Gray};
use crate::select::Corner;

mod banded;
pub use banded::{detect_banded, detect_banded_into, BandScratch};
mod nms;
pub use nms::FastScratch;
use nms::Nms;
pub(crate) use nms::ScoreRing;
mod score;
use score::score_lanes;

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
pub fn ring_masks(img: impl AsGray, x: usize, y: usize, threshold: u8) -> (u16, u16) {
    let img = img.gray();
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
pub fn score(img: impl AsGray, x: usize, y: usize) -> u8 {
    let img = img.gray();
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
pub fn is_corner_naive(img: impl AsGray, x: usize, y: usize, threshold: u8) -> bool {
    let img = img.gray();
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

/// The columns `x0 - 3 .. x0 + LANES + 3` of the 7 rows around one step: every pixel its
/// centres read, bounds-checked once per step (7 checks; the loads inside index arrays at
/// fixed offsets, so none of them is checked).
type Window<'a> = [&'a [u8; LANES + 2 * BORDER]; 7];

/// The [`Window`] of the step at `x0`. Needs `3 <= x0` and `x0 + LANES + 3 <= width`.
#[inline(always)]
fn window<'a>(rows: &Rows<'a>, x0: usize) -> Window<'a> {
    std::array::from_fn(|r| {
        rows[r][x0 - BORDER..x0 + LANES + BORDER]
            .try_into()
            .unwrap()
    })
}

/// Circle pixel `k` (mod 16) of the step's `LANES` centres.
#[inline(always)]
fn ring_lanes(win: &Window, k: usize) -> [u8; LANES] {
    let (dx, dy) = CIRCLE[k & 15];
    let c = (dx + 3) as usize;
    win[(dy + 3) as usize][c..c + LANES].try_into().unwrap()
}

/// Runs `$body` with `$k` bound to 0, 1, .. 23 in turn, unrolled: each circle pixel's load
/// then has a constant offset in the [`Window`] (a rolled loop kept a table of 16 pointers
/// on the stack and loaded through it, measured 2026-12-07).
macro_rules! walk24 {
    ($k:ident => $body:block) => {
        walk24!(@ $k $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23)
    };
    (@ $k:ident $body:block; $($n:literal)*) => {
        $( { let $k: usize = $n; $body } )*
    };
}

/// The centres with 9 or more consecutive circle pixels brighter than `hi` (walked when
/// `B`) or darker than `lo` (when `D`), as a bit mask (bit i: centre i of the step): the
/// segment test as OpenCV's vector FAST counts it, runs in byte lanes. The walk goes round
/// the circle once and on for 8 more pixels, so a run that wraps past pixel 15 is counted
/// whole; the two polarities' counters are independent chains in one walk.
#[inline(always)]
fn arc9_mask<const B: bool, const D: bool>(
    win: &Window,
    hi: &[u8; LANES],
    lo: &[u8; LANES],
) -> u32 {
    let (mut run_b, mut best_b) = ([0u8; LANES], [0u8; LANES]);
    let (mut run_d, mut best_d) = ([0u8; LANES], [0u8; LANES]);
    walk24!(k => {
        let p = ring_lanes(win, k);
        for i in 0..LANES {
            // (run + 1) where the pixel passes, else 0; never above 24.
            if B {
                run_b[i] = if p[i] > hi[i] { run_b[i] + 1 } else { 0 };
                best_b[i] = best_b[i].max(run_b[i]);
            }
            if D {
                run_d[i] = if p[i] < lo[i] { run_d[i] + 1 } else { 0 };
                best_d[i] = best_d[i].max(run_d[i]);
            }
        }
    });
    // 1 where the longer run reaches 9, else 0, in byte arithmetic (compares to bools here
    // were unpacked lane by lane).
    let mut hit = [0u8; LANES];
    for i in 0..LANES {
        let best = match (B, D) {
            (true, false) => best_b[i],
            (false, true) => best_d[i],
            _ => best_b[i].max(best_d[i]),
        };
        hit[i] = best.saturating_sub(8).min(1);
    }
    bit_mask(&hit)
}

/// Bit i set where `flags[i]` (0 or 1) is 1. Eight flags at a time: the multiply moves byte
/// j's bit to bit 56 + j of the product, with no carries between them (a bit-by-bit loop
/// stayed 32 compares and shifts, measured 2026-12-07).
#[inline(always)]
fn bit_mask(flags: &[u8; LANES]) -> u32 {
    let mut mask = 0u32;
    for (j, chunk) in flags.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(chunk.try_into().unwrap());
        mask |= ((word.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32) << (8 * j);
    }
    mask
}

/// The compass filter of the step at `x0` (its centres `x0 .. x0 + LANES` of the middle
/// row): bit 0 set when some centre may have a brighter 9-arc, bit 1 a darker one. A 9-arc
/// spans two neighbouring compass pixels (0, 4, 8, 12), so a centre passes when one such
/// pair is brighter (or darker) together, i.e. (0 or 8) and (4 or 12).
///
/// # Safety
/// `x0 >= 3`, and each of the 7 rows holds at least `x0 + LANES + 3` pixels.
#[inline(always)]
unsafe fn compass(rows: &Rows, x0: usize, t: u8) -> u8 {
    // SAFETY: the caller's bounds cover every load: x0 - 3 ..= x0 + 3 + LANES - 1 of rows 0,
    // 3 and 6. Unchecked, the filter's loop (run on every step; 91-97 % of the steps stop
    // here) drops 2 x 5 compares and branches: `examples/fast_speed`, min of 3 x 300 runs,
    // 720p / 1080p / 4K 0.143 / 0.327 / 2.78 ms checked, 0.124 / 0.283 / 2.65 unchecked
    // (this 2-core AMD EPYC machine, 2026-12-07).
    let lanes = |r: usize, x: usize| -> [u8; LANES] {
        unsafe { *rows[r].as_ptr().add(x).cast::<[u8; LANES]>() }
    };
    let (hi, lo) = bounds(&lanes(3, x0), t);
    let (p0, p4, p8, p12) = (
        lanes(6, x0),
        lanes(3, x0 + 3),
        lanes(0, x0),
        lanes(3, x0 - 3),
    );
    let (mut any_b, mut any_d) = (0u8, 0u8);
    for i in 0..LANES {
        let (h, l) = (hi[i], lo[i]);
        any_b |= (((p0[i] > h) | (p8[i] > h)) & ((p4[i] > h) | (p12[i] > h))) as u8;
        any_d |= (((p0[i] < l) | (p8[i] < l)) & ((p4[i] < l) | (p12[i] < l))) as u8;
    }
    (any_b != 0) as u8 | ((any_d != 0) as u8) << 1
}

/// `v + t` and `v - t`, saturated: `p > v + t` and `p < v - t` are the same tests on bytes
/// with these, since no byte is above 255 or below 0.
#[inline(always)]
fn bounds(v: &[u8; LANES], t: u8) -> ([u8; LANES], [u8; LANES]) {
    let (mut hi, mut lo) = ([0u8; LANES], [0u8; LANES]);
    for i in 0..LANES {
        hi[i] = v[i].saturating_add(t);
        lo[i] = v[i].saturating_sub(t);
    }
    (hi, lo)
}

/// The corners among the step's centres as a bit mask (bit i: centre `x0 + i`), walking
/// the polarities that [`compass`] passed (`polarities`, not 0).
#[inline(always)]
fn corner_mask(rows: &Rows, x0: usize, t: u8, polarities: u8) -> u32 {
    let win = window(rows, x0);
    let (hi, lo) = bounds(win[3][BORDER..BORDER + LANES].try_into().unwrap(), t);
    let polarities = polarities & opposite_pairs(&win, &hi, &lo);
    match polarities {
        0 => 0,
        1 => arc9_mask::<true, false>(&win, &hi, &lo),
        2 => arc9_mask::<false, true>(&win, &hi, &lo),
        _ => arc9_mask::<true, true>(&win, &hi, &lo),
    }
}

/// The polarities (bit 0 brighter, bit 1 darker) for which some centre of the step passes
/// at least one pixel of each of the 8 opposite pairs `(k, k + 8)`: 9 consecutive circle
/// pixels hold one of every such pair, so a centre without is no corner of that polarity.
/// [`compass`] checked 2 of the pairs; this is a third of a walk, and most steps that pass
/// the compass and not this have no corner (OpenCV's scalar FAST tests the pairs too).
#[inline(always)]
fn opposite_pairs(win: &Window, hi: &[u8; LANES], lo: &[u8; LANES]) -> u8 {
    let (mut all_b, mut all_d) = ([1u8; LANES], [1u8; LANES]);
    for k in 0..8 {
        let (p, q) = (ring_lanes(win, k), ring_lanes(win, k + 8));
        for i in 0..LANES {
            all_b[i] &= ((p[i] > hi[i]) | (q[i] > hi[i])) as u8;
            all_d[i] &= ((p[i] < lo[i]) | (q[i] < lo[i])) as u8;
        }
    }
    let (mut any_b, mut any_d) = (0u8, 0u8);
    for i in 0..LANES {
        any_b |= all_b[i];
        any_d |= all_d[i];
    }
    any_b | any_d << 1
}

/// Steps filtered by [`compass`] in one pass of [`scan_row`] before their survivors are
/// tested (one bit each in a `u64`): the filter's loop stays small, its values in
/// registers, and records survivors without a branch.
const CHUNK: usize = 64;

/// From this many corners in a step, [`score_lanes`] scores the whole step (cheaper than
/// one [`lane_score`] each; the same scores).
const BATCH_SCORES: usize = 3;

/// Calls `found(x, y, score)` for every corner of row y among the centres `xs` (within
/// `BORDER..w - BORDER`), whose 7-row window is `rows`, in order of x. `ahead` is the row
/// that the scan of a later row reads first (empty at the bottom): its pixels are
/// prefetched as the compass passes their columns.
#[inline(always)]
fn scan_row(
    rows: &Rows,
    ahead: &[u8],
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
    // Every step's loads lie inside these bounds (`compass`'s safety condition).
    assert!(xs.start >= BORDER && rows.iter().all(|r| r.len() >= end + BORDER));
    let mut pols = [0u8; CHUNK];
    let mut x0 = xs.start;
    while x0 < end {
        // The filter over up to CHUNK steps, then the survivors. Each step's polarities go
        // to its own slot and its bit into `passed`: no step waits on the one before (a
        // survivor list whose length chose the next slot chained them, measured 2026-12-07).
        // The last step is shifted left to end at `end`; lanes already scanned are masked.
        let first = x0;
        let mut passed = 0u64;
        for (slot, pol) in pols.iter_mut().enumerate() {
            if x0 >= end {
                break;
            }
            prefetch(ahead, x0);
            // SAFETY: 3 <= xs.start <= the step's start, which is at most end - LANES, and
            // every row holds end + 3 pixels (asserted above).
            *pol = unsafe { compass(rows, x0.min(end - LANES), threshold) };
            passed |= ((*pol != 0) as u64) << slot;
            x0 += LANES;
        }
        while passed != 0 {
            let slot = passed.trailing_zeros() as usize;
            passed &= passed - 1;
            let (x, pol) = (first + slot * LANES, pols[slot]);
            let start = x.min(end - LANES);
            let mut mask = corner_mask(rows, start, threshold, pol) & (!0u32 << (x - start));
            // Plain loops: a closure here would stay baseline code (src/cpu/simd.rs).
            if mask.count_ones() as usize >= BATCH_SCORES {
                let scores = score_lanes(&window(rows, start));
                while mask != 0 {
                    let i = mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    found(start + i, y, scores[i]);
                }
            } else {
                while mask != 0 {
                    let i = mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    found(start + i, y, lane_score(rows, start + i));
                }
            }
        }
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
    img: Gray<'_>,
    threshold: u8,
    ys: Range<usize>,
    xs: Range<usize>,
    found: &mut dyn FnMut(usize, usize, u8),
) {
    for y in ys {
        // Row y + 4, the one the next row's window adds (empty past the last row).
        let ahead = img.rows_from(y + 4);
        let rows: Rows = [
            img.row(y - 3),
            img.row(y - 2),
            img.row(y - 1),
            img.row(y),
            img.row(y + 1),
            img.row(y + 2),
            img.row(y + 3),
        ];
        scan_row(&rows, ahead, y, xs.clone(), threshold, found);
    }
}

super::simd::versions! {
    /// [`scan_image`] at the SIMD level of this process (same results on every level).
    fn scan_versions(img: Gray<'_>, threshold: u8, ys: Range<usize>, xs: Range<usize>, found: &mut dyn FnMut(usize, usize, u8)) = scan_image;
}

/// [`scan_image`] over whole rows.
fn scan(img: Gray<'_>, threshold: u8, ys: Range<usize>, found: &mut dyn FnMut(usize, usize, u8)) {
    scan_versions(img, threshold, ys, BORDER..img.width - BORDER, found);
}

/// The rows FAST tests (at least [`BORDER`] inside), or `None` when the image is too small
/// to hold one tested pixel (7 pixels either way).
fn tested_rows(img: Gray<'_>) -> Option<Range<usize>> {
    let (w, h) = (img.width, img.height);
    (w > 2 * BORDER && h > 2 * BORDER).then(|| BORDER..h - BORDER)
}

/// The corners of [`detect`] without NMS, restricted to rows `ys` (clipped to the tested
/// rows), as `found(x, y, score)` in raster order: the same vectorised scanner, no
/// allocation. For callers that run their own suppression (`select::fast_in_cells`).
pub(crate) fn scan_corners(
    img: Gray<'_>,
    threshold: u8,
    ys: Range<usize>,
    found: &mut dyn FnMut(usize, usize, u8),
) {
    let Some(tested) = tested_rows(img) else {
        return;
    };
    let ys = ys.start.max(tested.start)..ys.end.min(tested.end);
    if !ys.is_empty() {
        scan(img, threshold, ys, found);
    }
}

/// [`scan_corners`] of the centres `xs` only (clipped to the tested columns).
pub(crate) fn scan_corners_in(
    img: Gray<'_>,
    threshold: u8,
    ys: Range<usize>,
    xs: Range<usize>,
    found: &mut dyn FnMut(usize, usize, u8),
) {
    let Some(tested) = tested_rows(img) else {
        return;
    };
    let ys = ys.start.max(tested.start)..ys.end.min(tested.end);
    let xs = xs.start.max(BORDER)..xs.end.min(img.width - BORDER);
    if !ys.is_empty() && !xs.is_empty() {
        scan_versions(img, threshold, ys, xs, found);
    }
}

/// All FAST corners in raster order (y, then x), `response` = FAST score as f32.
pub fn detect(img: impl AsGray, threshold: u8, nonmax_suppression: bool) -> Vec<Corner> {
    let mut out = Vec::new();
    detect_into(
        img,
        threshold,
        nonmax_suppression,
        &mut FastScratch::default(),
        &mut out,
    );
    out
}

/// [`detect`] into `out` (cleared first), the suppression's rows in `scratch`: no
/// allocation once both have grown to the frame's size.
pub fn detect_into(
    img: impl AsGray,
    threshold: u8,
    nonmax_suppression: bool,
    scratch: &mut FastScratch,
    out: &mut Vec<Corner>,
) {
    let img = img.gray();
    out.clear();
    if let Some(ys) = tested_rows(img) {
        detect_rows(img, threshold, nonmax_suppression, ys, scratch, out)
    }
}

/// The corners of rows `ys` (within `BORDER..h - BORDER`; the image at least 7x7),
/// appended to `out` (empty on entry).
fn detect_rows(
    img: Gray<'_>,
    threshold: u8,
    nonmax_suppression: bool,
    ys: Range<usize>,
    scratch: &mut FastScratch,
    out: &mut Vec<Corner>,
) {
    let (w, h) = (img.width, img.height);
    if !nonmax_suppression {
        scan(img, threshold, ys, &mut |x, y, s| out.push(corner(x, y, s)));
        return;
    }
    // The rows beside the band are scanned too: their scores suppress the band's edges.
    let scan_rows = ys.start.saturating_sub(1).max(BORDER)..(ys.end + 1).min(h - BORDER);
    let mut nms = Nms::new(w, scan_rows.start, scratch, out);
    let end = scan_rows.end;
    scan(img, threshold, scan_rows, &mut |x, y, s| nms.push(x, y, s));
    nms.finish(end);
    // The extra rows were suppressed without their outer neighbours: not this band's.
    out.retain(|c| ys.contains(&(c.y as usize)));
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
