//! Image pyramid (CPU reference for `kernels/pyramid.cu`).
//!
//! Level `i` is `cv::resize(level i-1, level_size(.., i))`, as OpenCV's ORB and ORB-SLAM3
//! build it: each level from the previous one, to the size derived from level 0
//! (`pyramid.scales` picks whose scale).
//!
//! Exactness (checked by `tests/exact_pyramid_orb.rs` against OpenCV 5.0 goldens, and against
//! `cv2.resize` on random images of 2..1920 columns, down- and up-scaling):
//! - [`Interpolation::LinearExact`]: bit-exact with `INTER_LINEAR_EXACT` (8-bit fractional
//!   weights computed in double, `(sum + 2^15) >> 16` rounding).
//! - [`Interpolation::Linear`]: bit-exact with `INTER_LINEAR` on 8-bit images. OpenCV's
//!   scalar formula, `(b0*beta0 + b1*beta1 + 2^21) >> 22`, is *not* what it runs: its SIMD
//!   vertical pass (`VResizeLinearVec_32s8u`) drops 4 bits of each horizontal sum, keeps the
//!   high half of each 16x16-bit product and rounds with `(. + 2) >> 2`, which differs from
//!   the scalar formula by 1 on ~10% of pixels. OpenCV 5 (x86-64 wheels) uses that path for
//!   every pixel, row tails included, so this module uses it everywhere too.

use std::ops::Range;

use crate::config::Interpolation;
use crate::image::{AsGray, Gray, GrayImage};

pub use crate::levels::{level_scale, level_size, Scales};

mod taps;
use taps::HTaps;

/// Fills `levels[1..n]` from `levels[0]` (grows/shrinks the vector, reusing buffers).
pub fn build(
    levels: &mut Vec<GrayImage>,
    n: usize,
    scales: Scales,
    scale_factor: f32,
    interpolation: Interpolation,
) {
    build_in(levels, n, scales, scale_factor, interpolation, 1)
}

/// [`build`] with each level resized in `bands` bands of rows on the current rayon pool
/// (the same bytes for any count).
pub fn build_in(
    levels: &mut Vec<GrayImage>,
    n: usize,
    scales: Scales,
    scale_factor: f32,
    interpolation: Interpolation,
    bands: usize,
) {
    levels.resize_with(n.max(1), GrayImage::default);
    let (base, above) = levels.split_at_mut(1);
    let mut tables = TableCache::default();
    let (s, f, i) = (scales, scale_factor, interpolation);
    build_above(base[0].view(), above, s, f, i, bands, &mut tables);
}

/// Each level's [`ResizeTables`] and the horizontal taps made from them, checked and kept
/// from frame to frame while the sizes stay (making the tables took 0.08 / 0.12 / 0.23 ms
/// per frame of 8 levels at 720p / 1080p / 4K, 2026-12-07), and each band's row buffers:
/// owned here, not by the threads, so that they have grown after one frame whichever
/// thread runs which band.
#[derive(Default)]
pub struct TableCache {
    levels: Vec<(TableKey, ResizeTables, HTaps)>,
    bands: Vec<Bufs>,
}

/// Source width and height, destination width and height, interpolation.
type TableKey = (usize, usize, usize, usize, Interpolation);

impl TableCache {
    /// Level `i`'s tables and taps (index `i` of the cache; levels are asked for in order)
    /// for `key`, made when they are missing or were made for other sizes.
    /// With the buffers of `bands` bands.
    fn get(
        &mut self,
        i: usize,
        key: TableKey,
        bands: usize,
    ) -> (&ResizeTables, &HTaps, &mut [Bufs]) {
        let make = || {
            let (sw, sh, dw, dh, interp) = key;
            let t = ResizeTables::new(sw, sh, dw, dh, interp);
            check_tables(&t, sw, sh, dw, dh);
            let h = HTaps::new(&t.x, sw);
            (key, t, h)
        };
        let levels = &mut self.levels;
        if levels.len() <= i {
            levels.push(make());
        } else if levels[i].0 != key {
            levels[i] = make();
        }
        if self.bands.len() < bands {
            self.bands.resize_with(bands, Bufs::default);
        }
        (&levels[i].1, &levels[i].2, &mut self.bands[..bands])
    }
}

/// The levels above `base` (level i into `above[i - 1]`, as many as `above` holds), each
/// resized from the one below in `bands` bands of rows: [`build_in`] with level 0 read where
/// it lies (the CPU pipeline's frame, without a copy).
pub fn build_above(
    base: Gray<'_>,
    above: &mut [GrayImage],
    scales: Scales,
    scale_factor: f32,
    interpolation: Interpolation,
    bands: usize,
    tables: &mut TableCache,
) {
    let (w0, h0) = (base.width, base.height);
    for i in 0..above.len() {
        let (w, h) = level_size(scales, w0, h0, scale_factor, i + 1);
        let (done, rest) = above.split_at_mut(i);
        let src = done.last().map_or(base, GrayImage::view);
        rest[0].reshape(w, h);
        // Bands of at least 32 rows.
        let bands = bands.min(h / 32).max(1);
        let (t, taps, bufs) = tables.get(i, (src.width, src.height, w, h, interpolation), bands);
        resize_checked(src, &mut rest[0], t, taps, Bands::Kept(bufs));
    }
}

/// One axis of a bilinear resize: destination index `d` reads source samples `offsets[d]`
/// and `min(offsets[d] + 1, n - 1)` with weights `weights[d]` (the second weight is 0 when
/// the first tap is the last sample). Weights sum to `ResizeTables::one()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AxisTable {
    pub offsets: Vec<u32>,
    pub weights: Vec<[u16; 2]>,
}

/// Per-column and per-row taps of one resize; the GPU host uploads these same tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResizeTables {
    pub interpolation: Interpolation,
    pub x: AxisTable,
    pub y: AxisTable,
}

impl ResizeTables {
    pub fn new(
        src_w: usize,
        src_h: usize,
        dst_w: usize,
        dst_h: usize,
        interpolation: Interpolation,
    ) -> Self {
        ResizeTables {
            interpolation,
            x: axis_table(src_w, dst_w, interpolation),
            y: axis_table(src_h, dst_h, interpolation),
        }
    }

    /// Fixed-point one: 2^11 (`Linear`) or 2^8 (`LinearExact`).
    pub fn one(interpolation: Interpolation) -> u16 {
        match interpolation {
            Interpolation::Linear => 1 << 11,
            Interpolation::LinearExact => 1 << 8,
        }
    }
}

fn axis_table(src: usize, dst: usize, interpolation: Interpolation) -> AxisTable {
    let mut t = AxisTable {
        offsets: Vec::with_capacity(dst),
        weights: Vec::with_capacity(dst),
    };
    if src == 0 || dst == 0 {
        return t;
    }
    // OpenCV: inv_scale = dst / src, then scale = 1 / inv_scale (not src / dst).
    let scale = 1.0 / (dst as f64 / src as f64);
    let last = src as i64 - 1;
    for d in 0..dst {
        let (i0, w) = match interpolation {
            Interpolation::Linear => {
                // The fraction is taken in float; each weight is cvRound(. * 2^11) on its own.
                let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
                let i = f.floor();
                let (i, f) = clamp_tap(i as i64, f - i, last);
                let w0 = ((1.0 - f) * 2048.0).round_ties_even() as u16;
                (i, [w0, (f * 2048.0).round_ties_even() as u16])
            }
            Interpolation::LinearExact => {
                // softdouble fraction, rounded to 8 fractional bits; w0 = 1 - w1 exactly.
                let f = (d as f64 + 0.5) * scale - 0.5;
                let i = f.floor();
                let (i, f) = clamp_tap(i as i64, f - i, last);
                let w1 = (f * 256.0).round_ties_even() as u16;
                (i, [256 - w1, w1])
            }
        };
        t.offsets.push(i0 as u32);
        t.weights.push(w);
    }
    t
}

/// Left of the first sample and at/after the last one, OpenCV replicates the edge sample.
fn clamp_tap<F: Default>(i: i64, f: F, last: i64) -> (i64, F) {
    if i < 0 {
        (0, F::default())
    } else if i >= last {
        (last, F::default())
    } else {
        (i, f)
    }
}

/// `cv::resize(src, dst, dst.size(), 0, 0, INTER_LINEAR | INTER_LINEAR_EXACT)` for 8-bit
/// gray; the destination size is `dst.width x dst.height` (see the module doc for exactness).
pub fn resize_linear(src: impl AsGray, dst: &mut GrayImage, interpolation: Interpolation) {
    let src = src.gray();
    let t = ResizeTables::new(src.width, src.height, dst.width, dst.height, interpolation);
    resize_with_tables(src, dst, &t);
}

/// [`resize_linear`] with precomputed tables (`tables` must match both sizes).
///
/// Two passes, as OpenCV: a fixed-point horizontal pass of each needed source row into a
/// 16-bit row buffer (two are kept, shared between consecutive destination rows), then a
/// vertical pass over the two buffered rows. Both are written so that LLVM vectorises the
/// vertical pass and keeps the horizontal one free of bounds checks; on x86-64 the same
/// code is compiled for each SIMD level and picked at run time (`cpu::simd`; identical
/// results on every level), with AVX2 gathers for the horizontal pass at that level.
pub fn resize_with_tables(src: impl AsGray, dst: &mut GrayImage, tables: &ResizeTables) {
    let src = src.gray();
    resize_with_tables_in(src, dst, tables, 1)
}

/// [`resize_with_tables`] in `bands` bands of destination rows on the current rayon pool
/// (each band reads the source rows it needs; the same bytes for any count).
pub fn resize_with_tables_in(
    src: impl AsGray,
    dst: &mut GrayImage,
    tables: &ResizeTables,
    bands: usize,
) {
    let src = src.gray();
    check_tables(tables, src.width, src.height, dst.width, dst.height);
    let h = HTaps::new(&tables.x, src.width);
    resize_checked(src, dst, tables, &h, Bands::PerThread(bands));
}

/// Panics unless `tables` resize `sw x sh` to `dw x dh` with every offset inside the source
/// and column weights that sum to at most one: what the resize's unchecked paths rely on.
fn check_tables(tables: &ResizeTables, sw: usize, sh: usize, dw: usize, dh: usize) {
    assert_eq!(tables.x.offsets.len(), dw, "resize tables: width mismatch");
    assert_eq!(tables.y.offsets.len(), dh, "resize tables: height mismatch");
    assert_eq!(tables.x.weights.len(), dw, "resize tables: width mismatch");
    assert_eq!(tables.y.weights.len(), dh, "resize tables: height mismatch");
    if dw == 0 || dh == 0 {
        return;
    }
    assert!(sw > 0 && sh > 0, "resize of an empty image");
    assert!(
        tables.x.offsets.iter().all(|&o| (o as usize) < sw),
        "resize tables: column offset out of range"
    );
    assert!(
        tables.y.offsets.iter().all(|&o| (o as usize) < sh),
        "resize tables: row offset out of range"
    );
    let one = ResizeTables::one(tables.interpolation) as u32;
    assert!(
        tables
            .x
            .weights
            .iter()
            .all(|&[a, b]| a as u32 + b as u32 <= one),
        "resize tables: column weights above one"
    );
}

/// How [`resize_checked`] cuts the destination and where each band's row buffers are.
enum Bands<'b> {
    /// One band per buffer, the buffers the caller keeps.
    Kept(&'b mut [Bufs]),
    /// This many bands, each in the buffers of the thread that runs it.
    PerThread(usize),
}

/// The resize with tables that passed [`check_tables`] for these sizes (not empty) and
/// their taps, in bands of destination rows on the current rayon pool.
fn resize_checked(src: Gray<'_>, dst: &mut GrayImage, t: &ResizeTables, h: &HTaps, bands: Bands) {
    let (dw, dh) = (dst.width, dst.height);
    if dw == 0 || dh == 0 {
        return;
    }
    let n = match &bands {
        Bands::Kept(b) => b.len(),
        Bands::PerThread(n) => *n,
    };
    let rows = dh.div_ceil(n.max(1));
    let band = |k: usize, out: &mut [u8], b: &mut Bufs| {
        let y0 = k * rows;
        resize_band(src, out, dw, y0..(y0 + rows).min(dh), t, h, b)
    };
    use rayon::prelude::*;
    match bands {
        Bands::Kept([b]) => band(0, &mut dst.data, b),
        Bands::Kept(bufs) => dst
            .data
            .par_chunks_mut(rows * dw)
            .zip(bufs)
            .enumerate()
            .for_each(|(k, (out, b))| band(k, out, b)),
        Bands::PerThread(n) if n <= 1 => BUFS.with_borrow_mut(|b| band(0, &mut dst.data, b)),
        Bands::PerThread(_) => dst
            .data
            .par_chunks_mut(rows * dw)
            .enumerate()
            .for_each(|(k, out)| BUFS.with_borrow_mut(|b| band(k, out, b))),
    }
}

/// Destination rows `rows` into `out` (those rows, `dw` wide), at the process's SIMD level,
/// in the row buffers `b`.
fn resize_band(
    src: Gray<'_>,
    out: &mut [u8],
    dw: usize,
    rows: Range<usize>,
    t: &ResizeTables,
    h: &HTaps,
    b: &mut Bufs,
) {
    #[cfg(target_arch = "x86_64")]
    if super::simd::level() >= super::simd::Level::Avx2 {
        // SAFETY: the CPU supports AVX2 (simd::level never exceeds what it has).
        return unsafe { resize_rows_avx2(src, out, dw, rows, t, h, b) };
    }
    resize_versions(src, out, dw, rows, t, h, b)
}

/// A band's work rows: the horizontal sums of two source rows and the AVX2 path's padded
/// last source row. Kept by [`TableCache`] per band, or (the resizes without a cache) one
/// set per thread, so that resizing allocates nothing once they have grown (a band's resize
/// calls nothing that could resize on the same thread).
#[derive(Default)]
struct Bufs {
    sums: [Vec<u16>; 2],
    #[cfg(target_arch = "x86_64")]
    tail: Vec<u8>,
}

thread_local! {
    static BUFS: std::cell::RefCell<Bufs> = std::cell::RefCell::default();
}

super::simd::versions! {
    /// [`resize_rows`] at the process's SIMD level (below AVX2, whose copy has gathers).
    fn resize_versions(src: Gray<'_>, out: &mut [u8], dw: usize, rows: Range<usize>, t: &ResizeTables, h: &HTaps, b: &mut Bufs) = resize_rows;
}

/// Horizontal pass of one source row: `p0 * w0 + p1 * w1`, shifted right by `SHIFT`
/// (4 for `Linear`, whose vertical pass drops those bits anyway; 0 for `LinearExact`).
/// Fits `u16`: at most `255 * one`, i.e. 32640 after the shift (`Linear`) or 65280.
#[inline(always)]
fn hpass<const SHIFT: u32>(row: &[u8], h: &HTaps, out: &mut [u16]) {
    let n = out.len();
    if h.single {
        let w0 = &h.w0[..n];
        let p = row[0] as u32;
        for (o, &a) in out.iter_mut().zip(w0) {
            *o = ((p * a) >> SHIFT) as u16;
        }
        return;
    }
    hpass_from::<SHIFT>(row, h, out, 0);
}

/// [`hpass`] of the columns `from..` (not for a single-column source).
#[inline(always)]
fn hpass_from<const SHIFT: u32>(row: &[u8], h: &HTaps, out: &mut [u16], from: usize) {
    let n = out.len();
    let (ofs, w0, w1) = (&h.ofs[..n], &h.w0[..n], &h.w1[..n]);
    debug_assert!(!h.single);
    // Checked once per tables by `check_tables` / `HTaps::new`: every
    // `ofs[x] + 1 < src width <= row.len()`.
    debug_assert!(ofs.iter().all(|&i| (i as usize) + 1 < row.len()));
    for x in from..n {
        // SAFETY: x < n = len of ofs/w0/w1/out; ofs[x] + 1 < row.len() (see HTaps).
        unsafe {
            let i = *ofs.get_unchecked(x) as usize;
            let p0 = *row.get_unchecked(i) as u32;
            let p1 = *row.get_unchecked(i + 1) as u32;
            let v = p0 * *w0.get_unchecked(x) + p1 * *w1.get_unchecked(x);
            *out.get_unchecked_mut(x) = (v >> SHIFT) as u16;
        }
    }
}

/// Two source rows through the same taps (one pass over the tables).
#[inline(always)]
fn hpass2<const SHIFT: u32>(ra: &[u8], rb: &[u8], h: &HTaps, oa: &mut [u16], ob: &mut [u16]) {
    let n = oa.len();
    if h.single || ob.len() != n {
        hpass::<SHIFT>(ra, h, oa);
        hpass::<SHIFT>(rb, h, ob);
        return;
    }
    let (ofs, w0, w1) = (&h.ofs[..n], &h.w0[..n], &h.w1[..n]);
    assert_eq!(ra.len(), rb.len());
    debug_assert!(ofs.iter().all(|&i| (i as usize) + 1 < ra.len()));
    for x in 0..n {
        // SAFETY: as in `hpass`, for both rows (same length).
        unsafe {
            let i = *ofs.get_unchecked(x) as usize;
            let (a0, a1) = (*w0.get_unchecked(x), *w1.get_unchecked(x));
            let va = *ra.get_unchecked(i) as u32 * a0 + *ra.get_unchecked(i + 1) as u32 * a1;
            let vb = *rb.get_unchecked(i) as u32 * a0 + *rb.get_unchecked(i + 1) as u32 * a1;
            *oa.get_unchecked_mut(x) = (va >> SHIFT) as u16;
            *ob.get_unchecked_mut(x) = (vb >> SHIFT) as u16;
        }
    }
}

/// `Linear`'s vertical pass, as OpenCV's SIMD `VResizeLinearVec_32s8u`: rows hold the
/// horizontal sums `>> 4`, each product keeps its high 16 bits, then `(. + 2) >> 2`.
#[inline(always)]
fn vpass_linear(r0: &[u16], r1: &[u16], b0: u16, b1: u16, out: &mut [u8]) {
    let n = out.len();
    let (r0, r1) = (&r0[..n], &r1[..n]);
    for ((o, &a), &b) in out.iter_mut().zip(r0).zip(r1) {
        let t0 = ((a as u32 * b0 as u32) >> 16) as u16;
        let t1 = ((b as u32 * b1 as u32) >> 16) as u16;
        // t0, t1 <= 0xFFFF * 0xFFFF >> 16 < 2^16 each; their sum + 2 fits u32.
        let v = (t0 as u32 + t1 as u32 + 2) >> 2;
        *o = v.min(255) as u8;
    }
}

/// `LinearExact`'s vertical pass: `(r0 * b0 + r1 * b1 + 2^15) >> 16`.
#[inline(always)]
fn vpass_exact(r0: &[u16], r1: &[u16], b0: u16, b1: u16, out: &mut [u8]) {
    let n = out.len();
    let (r0, r1) = (&r0[..n], &r1[..n]);
    let (b0, b1) = (b0 as u32, b1 as u32);
    for ((o, &a), &b) in out.iter_mut().zip(r0).zip(r1) {
        let v = (a as u32 * b0)
            .wrapping_add(b as u32 * b1)
            .wrapping_add(1 << 15)
            >> 16;
        *o = v.min(255) as u8;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn resize_rows_avx2(
    src: Gray<'_>,
    out: &mut [u8],
    dw: usize,
    rows: Range<usize>,
    t: &ResizeTables,
    h: &HTaps,
    b: &mut Bufs,
) {
    if h.single {
        return resize_rows(src, out, dw, rows, t, h, b);
    }
    // The last source row with 2 readable bytes after it (gathers read 4 bytes per pair).
    let sw = src.width;
    let Bufs { sums, tail } = b;
    tail.clear();
    tail.extend_from_slice(src.row(src.height - 1));
    tail.extend_from_slice(&[0, 0]);
    let tail = &tail[..];
    let rowx = |y: usize| -> &[u8] {
        if y + 1 < src.height {
            &src.data[y * sw..(y + 1) * sw + 2]
        } else {
            tail
        }
    };
    let band = (out, dw, rows, src.height - 1, sums);
    // The source row two below a pass's second row, prefetched as the pass goes along
    // (empty past the last row): `bench` opencv_orb one thread, alternating, pyramid 1080p
    // 1.24-1.25 -> 1.18-1.20 ms, 4K 7.1 -> 5.8-6.1 (2026-12-07; 720p the same).
    let ahead = |y: usize| src.rows_from(y + 2);
    // SAFETY (both arms): AVX2 is enabled here; `rowx` rows have 2 readable bytes past `sw`.
    match t.interpolation {
        Interpolation::Linear => resize_rows_k(band, t, vpass_linear, |y0, y1, a, b| unsafe {
            x86::hrows_gather::<4>(&rowx, ahead(y1), h, y0, y1, a, b)
        }),
        Interpolation::LinearExact => resize_rows_k(band, t, vpass_exact, |y0, y1, a, b| unsafe {
            x86::hrows_gather::<0>(&rowx, ahead(y1), h, y0, y1, a, b)
        }),
    }
}

#[cfg(target_arch = "x86_64")]
mod x86;

#[inline(always)]
fn resize_rows(
    src: Gray<'_>,
    out: &mut [u8],
    dw: usize,
    rows: Range<usize>,
    t: &ResizeTables,
    h: &HTaps,
    b: &mut Bufs,
) {
    let band = (out, dw, rows, src.height - 1, &mut b.sums);
    match t.interpolation {
        Interpolation::Linear => resize_rows_k(band, t, vpass_linear, |y0, y1, a, b| {
            hrows::<4>(src, h, y0, y1, a, b)
        }),
        Interpolation::LinearExact => resize_rows_k(band, t, vpass_exact, |y0, y1, a, b| {
            hrows::<0>(src, h, y0, y1, a, b)
        }),
    }
}

#[inline(always)]
fn hrows<const SHIFT: u32>(
    src: Gray<'_>,
    h: &HTaps,
    y0: usize,
    y1: usize,
    a: &mut [u16],
    b: Option<&mut [u16]>,
) {
    match b {
        Some(b) => hpass2::<SHIFT>(src.row(y0), src.row(y1), h, a, b),
        None => hpass::<SHIFT>(src.row(y0), h, a),
    }
}

/// [`resize_rows_k`]'s destination rows, their width, the rows to make, the last source row,
/// and the two rows of horizontal sums.
type Band<'a> = (
    &'a mut [u8],
    usize,
    Range<usize>,
    usize,
    &'a mut [Vec<u16>; 2],
);

/// The row loop: `hrow(y0, y1, a, b)` fills `a` with the horizontal pass of source row
/// `y0`, and `b` (when given) with that of row `y1`.
#[inline(always)]
fn resize_rows_k(
    (out, dw, rows, last_row, buf): Band,
    t: &ResizeTables,
    vpass: impl Fn(&[u16], &[u16], u16, u16, &mut [u8]),
    mut hrow: impl FnMut(usize, usize, &mut [u16], Option<&mut [u16]>),
) {
    // Horizontal sums of the two source rows the current destination row needs; rows are
    // shared between consecutive destination rows, so keep the last two.
    for row in buf.iter_mut() {
        row.resize(dw, 0);
    }
    let mut have = [usize::MAX; 2];
    for dy in rows.clone() {
        let y0 = t.y.offsets[dy] as usize;
        let y1 = (y0 + 1).min(last_row);
        // Downscaling, this row's y0 is often the previous row's y1.
        if have[0] != y0 && have[1] == y0 {
            buf.swap(0, 1);
            have.swap(0, 1);
        }
        let [ra, rb] = &mut *buf;
        match (have[0] != y0, have[1] != y1) {
            (true, true) => hrow(y0, y1, ra, Some(rb)),
            (true, false) => hrow(y0, y0, ra, None),
            (false, true) => hrow(y1, y1, rb, None),
            (false, false) => {}
        }
        have = [y0, y1];
        let [b0, b1] = t.y.weights[dy];
        let o = (dy - rows.start) * dw;
        vpass(ra, rb, b0, b1, &mut out[o..o + dw]);
    }
}

#[cfg(test)]
mod tests;
