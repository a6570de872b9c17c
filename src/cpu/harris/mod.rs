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

use crate::cpu::blur::reflect101;
use crate::cpu::fma::Fma;
use crate::image::{AsGray, Gray};
use crate::select::Corner;

/// ORB's Harris score at (x, y) (`HarrisResponses` in OpenCV's orb.cpp): a `block_size`
/// square centred on the point, 3x3 Sobel-like integer gradients, integer sums, then
/// `(a*b - c*c - k*(a+b)^2) * scale^4` in f32 with `scale = 1 / (4 * block_size * 255)`.
///
/// Pixels outside the image are read with `BORDER_REFLECT_101`, as ORB's padded pyramid
/// does; inside the usual ORB border (31) no such read happens.
pub fn orb_score(img: impl AsGray, x: u32, y: u32, block_size: u32, k: f32) -> f32 {
    let img = img.gray();
    let (w, h) = (img.width, img.height);
    let r = (block_size / 2) as isize;
    let (xi, yi) = (x as isize, y as isize);
    // The gradients reach one pixel beyond the block.
    let inside =
        xi - r > 0 && yi - r > 0 && ((xi + r + 1) as usize) < w && ((yi + r + 1) as usize) < h;
    let (a, b, c) = if inside {
        sums_versions(img, x as usize, y as usize, block_size as usize)
    } else {
        sums_reflected(img, xi, yi, block_size)
    };
    // Same operand order and precision as OpenCV (the int (4 * block) times 255.f).
    let scale = 1.0f32 / ((4 * block_size as i32) as f32 * 255.0f32);
    let scale_sq_sq = scale * scale * scale * scale;
    let (af, bf, cf) = (a as f32, b as f32, c as f32);
    (af * bf - cf * cf - k * (af + bf) * (af + bf)) * scale_sq_sq
}

super::simd::versions! {
    /// [`sums_inside`] at the process's SIMD level (integer sums: the same on every level).
    fn sums_versions(img: Gray<'_>, x: usize, y: usize, block_size: usize) -> (i32, i32, i32) = sums_inside;
}

/// The gradient products' sums `(sum ix^2, sum iy^2, sum ix*iy)` over the block around
/// `(x, y)`, the block and its one-pixel ring inside the image: each block row from three
/// row slices (one bounds check each; the products vectorise, where a lookup per pixel had
/// stayed scalar: measured 2026-12-07).
#[inline(always)]
fn sums_inside(img: Gray<'_>, x: usize, y: usize, block_size: usize) -> (i32, i32, i32) {
    let r = block_size / 2;
    let (x0, n) = (x - r - 1, block_size + 2);
    let (mut a, mut b, mut c) = (0i32, 0i32, 0i32);
    for yy in y - r..y - r + block_size {
        let (up, mid, down) = (
            &img.row(yy - 1)[x0..x0 + n],
            &img.row(yy)[x0..x0 + n],
            &img.row(yy + 1)[x0..x0 + n],
        );
        for i in 1..n - 1 {
            let p = |row: &[u8], j: usize| row[j] as i32;
            let ix = (p(mid, i + 1) - p(mid, i - 1)) * 2
                + (p(up, i + 1) - p(up, i - 1))
                + (p(down, i + 1) - p(down, i - 1));
            let iy = (p(down, i) - p(up, i)) * 2
                + (p(down, i - 1) - p(up, i - 1))
                + (p(down, i + 1) - p(up, i + 1));
            a += ix * ix;
            b += iy * iy;
            c += ix * iy;
        }
    }
    (a, b, c)
}

/// [`sums_inside`] for a block near the border: pixels outside read reflected (101).
fn sums_reflected(img: Gray<'_>, x: isize, y: isize, block_size: u32) -> (i32, i32, i32) {
    let (w, h) = (img.width, img.height);
    let r = (block_size / 2) as isize;
    let px = |xx: isize, yy: isize| -> i32 {
        img.data[reflect101(yy, h) * w + reflect101(xx, w)] as i32
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
    (a, b, c)
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

/// `src` as f32 with `r` reflected (`BORDER_REFLECT_101`) pixels on each side.
#[inline(always)]
fn pad_row<T: Copy>(src: &[T], r: usize, row: &mut [f32], f: impl Fn(T) -> f32) {
    let w = src.len();
    for (i, v) in row.iter_mut().enumerate() {
        if i < r || i >= r + w {
            *v = f(src[reflect101(i as isize - r as isize, w)]);
        }
    }
    for (d, &s) in row[r..r + w].iter_mut().zip(src) {
        *d = f(s);
    }
}

/// OpenCV's row filter (8-bit in, f32 out) of one padded row into `dst`: the vector body
/// accumulates with FMA from zero in tap order over blocks of 64 outputs; the remaining
/// columns are the scalar multiply-then-add loop. Tap-outer loops keep each output's
/// operation order and vectorise over x.
#[inline(always)]
fn row_filter<const K: usize>(row: &[f32], kern: &[f32; K], dst: &mut [f32], m: impl Fma) {
    let w = dst.len();
    let fused_end = w - w % 64;
    let (fused, tail) = dst.split_at_mut(fused_end);
    fused.fill(0.0);
    for (j, &k) in kern.iter().enumerate() {
        for (d, &p) in fused.iter_mut().zip(&row[j..j + fused_end]) {
            *d = m.fma(p, k, *d);
        }
    }
    let row = &row[fused_end..];
    for (d, &p) in tail.iter_mut().zip(row) {
        *d = p * kern[0];
    }
    for (j, &k) in kern.iter().enumerate().skip(1) {
        for (d, &p) in tail.iter_mut().zip(&row[j..]) {
            *d += p * k;
        }
    }
}

/// OpenCV's symmetric / antisymmetric column filter (f32) of the `K` rows `rows` into `dst`:
/// centre tap first, then each mirrored pair summed (or differenced) and multiplied in. The
/// 3-tap filter fuses everywhere; longer ones fuse in 16-wide vector blocks and not in the
/// scalar tail.
#[inline(always)]
fn col_filter<const K: usize>(
    rows: [&[f32]; K],
    kern: &[f32; K],
    antisym: bool,
    dst: &mut [f32],
    m: impl Fma,
) {
    let r = K / 2;
    let w = dst.len();
    let fused_end = if K == 3 { w } else { w - w % 16 };
    for (d, &c) in dst.iter_mut().zip(rows[r]) {
        *d = c * kern[r];
    }
    for j in 1..=r {
        let (lo, hi, k) = (rows[r - j], rows[r + j], kern[r + j]);
        let (fused, tail) = dst.split_at_mut(fused_end);
        if antisym {
            for ((d, &a), &b) in fused.iter_mut().zip(hi).zip(lo) {
                *d = m.fma(a - b, k, *d);
            }
            for ((d, &a), &b) in tail.iter_mut().zip(&hi[fused_end..]).zip(&lo[fused_end..]) {
                *d += (a - b) * k;
            }
        } else {
            for ((d, &a), &b) in fused.iter_mut().zip(hi).zip(lo) {
                *d = m.fma(a + b, k, *d);
            }
            for ((d, &a), &b) in tail.iter_mut().zip(&hi[fused_end..]).zip(&lo[fused_end..]) {
                *d += (a + b) * k;
            }
        }
    }
}

/// Sobel dx and dy (f32) of `img`, one row at a time in order: row filter then column
/// filter over a ring of `K` padded rows (`BORDER_REFLECT_101`), dx = deriv rows x smooth
/// columns, dy = smooth rows x deriv columns.
struct Sobel<'a, const K: usize> {
    img: Gray<'a>,
    sm: &'a [f32; K],
    de: &'a [f32; K],
    padded: &'a mut [f32],
    /// Slot `py % K` holds the row-filtered padded row py (image row py - K/2, reflected).
    ring_d: &'a mut [f32],
    ring_s: &'a mut [f32],
    filled: usize,
    /// The next output row.
    y: usize,
}

impl<'a, const K: usize> Sobel<'a, K> {
    #[inline(always)]
    fn new(
        img: Gray<'a>,
        sm: &'a [f32; K],
        de: &'a [f32; K],
        [padded, ring_d, ring_s]: &'a mut [Vec<f32>; 3],
    ) -> Self {
        let w = img.width;
        Sobel {
            img,
            sm,
            de,
            padded: zeroed(padded, w + K - 1),
            ring_d: zeroed(ring_d, K * w),
            ring_s: zeroed(ring_s, K * w),
            filled: 0,
            y: 0,
        }
    }

    /// Writes the next row of dx and dy.
    #[inline(always)]
    fn next_row(&mut self, dx: &mut [f32], dy: &mut [f32], m: impl Fma) {
        let (w, h, r, y) = (self.img.width, self.img.height, K / 2, self.y);
        while self.filled <= y + 2 * r {
            let py = self.filled;
            let src = self.img.row(reflect101(py as isize - r as isize, h));
            pad_row(src, r, self.padded, |v| v as f32);
            let slot = py % K;
            row_filter(
                self.padded,
                self.de,
                &mut self.ring_d[slot * w..(slot + 1) * w],
                m,
            );
            row_filter(
                self.padded,
                self.sm,
                &mut self.ring_s[slot * w..(slot + 1) * w],
                m,
            );
            self.filled += 1;
        }
        col_filter(rows_of(self.ring_d, y, w), self.sm, false, dx, m);
        col_filter(rows_of(self.ring_s, y, w), self.de, true, dy, m);
        self.y += 1;
    }
}

/// `v` cleared and refilled with `n` zeros (its capacity kept).
fn zeroed<T: Copy + Default>(v: &mut Vec<T>, n: usize) -> &mut [T] {
    v.clear();
    v.resize(n, T::default());
    v
}

/// The row buffers of the dense maps (`covariance_map`), kept between calls so that a
/// map of a size seen before allocates nothing.
#[derive(Debug, Default)]
pub struct DenseScratch {
    sobel: [Vec<f32>; 3],
    grad: [Vec<f32>; 2],
    pads: [Vec<f32>; 3],
    ring: [Vec<f64>; 3],
    sum: [Vec<f64>; 3],
    row: [Vec<f32>; 3],
    resp: Vec<f32>,
}

/// The `K` ring rows `y .. y + K` (slots taken modulo `K`).
#[inline(always)]
fn rows_of<const K: usize>(ring: &[f32], y: usize, w: usize) -> [&[f32]; K] {
    std::array::from_fn(|i| {
        let slot = (y + i) % K;
        &ring[slot * w..(slot + 1) * w]
    })
}

/// Row sums of a `block`-wide window (anchor `block / 2`, reflected) in f64, in tap order.
#[inline(always)]
fn box_row(padded: &[f32], block: usize, acc: &mut [f64]) {
    for (a, &p) in acc.iter_mut().zip(padded) {
        *a = p as f64;
    }
    for j in 1..block {
        for (a, &p) in acc.iter_mut().zip(&padded[j..]) {
            *a += p as f64;
        }
    }
}

/// The response of one row from its box sums `a = Σdx²`, `b = Σdx·dy`, `c = Σdy²`.
///
/// OpenCV sees the continuous map as one row: 8-wide vector body (up to `end8`, a flat
/// index), then a 4-wide body (other association, up to `end4`), then scalar code with `k`
/// as the caller's double `kd`. `i0` is the flat index of the row's first pixel.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn response_row(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    k: f32,
    kd: f64,
    i0: usize,
    ends: (usize, usize),
    out: &mut [f32],
) {
    let w = out.len();
    let (end8, end4) = ends;
    let e8 = end8.clamp(i0, i0 + w) - i0;
    let e4 = end4.clamp(i0, i0 + w) - i0;
    for x in 0..e8 {
        let (a, b, c) = (a[x], b[x], c[x]);
        let tr = a + c;
        out[x] = (a * c - b * b) - k * (tr * tr);
    }
    for x in e8..e4 {
        let (a, b, c) = (a[x], b[x], c[x]);
        let tr = a + c;
        out[x] = (a * c - b * b) - k * tr * tr;
    }
    for x in e4..w {
        let (a, b, c) = (a[x], b[x], c[x]);
        let (det, tr) = (a * c - b * b, a + c);
        out[x] = (det as f64 - kd * tr as f64 * tr as f64) as f32;
    }
}

/// The dense response for a `K`-tap Sobel, streaming: Sobel rows; products dx², dx·dy, dy²;
/// unnormalized `block`-square box sums with OpenCV's anchor (`block / 2`) and
/// `BORDER_REFLECT_101` (direct row sums in f64, then running column sums in f64 as
/// OpenCV's `ColumnSum<double, float>`, rounded to f32); then the response. `m`: the FMA
/// of the SIMD level (`cpu::fma`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn dense_core<const K: usize, F: FnMut(&[f32], &[f32], &[f32], usize, &mut [f32])>(
    img: Gray<'_>,
    sm: &[f32; K],
    de: &[f32; K],
    block: usize,
    finish: &mut F,
    scratch: &mut DenseScratch,
    out: &mut Vec<f32>,
    m: impl Fma,
) {
    let (w, h) = (img.width, img.height);
    let anchor = block / 2;
    let DenseScratch {
        sobel,
        grad: [gx_ring, gy_ring],
        pads,
        ring,
        sum,
        row,
        resp,
    } = scratch;
    let mut sobel = Sobel::new(img, sm, de, sobel);
    // Sobel rows, slot `sy % grad_n`: the box rows ask for them in order except for
    // reflections at most `block` rows back.
    let grad_n = block + 1;
    let gx_ring = zeroed(gx_ring, grad_n * w);
    let gy_ring = zeroed(gy_ring, grad_n * w);
    let mut grad_done = 0;
    let pw = w + block - 1;
    let mut pads = pads.each_mut().map(|v| zeroed(v, pw));
    // Slot `py % block` holds the row sums of padded row py, per product.
    let mut ring = ring.each_mut().map(|v| zeroed(v, block * w));
    let mut sum = sum.each_mut().map(|v| zeroed(v, w));
    let mut row = row.each_mut().map(|v| zeroed(v, w));
    let resp = zeroed(resp, w);
    for py in 0..h + block - 1 {
        // Row sums of padded row py (image row sy).
        let sy = reflect101(py as isize - anchor as isize, h);
        while grad_done <= sy {
            let slot = grad_done % grad_n;
            sobel.next_row(
                &mut gx_ring[slot * w..(slot + 1) * w],
                &mut gy_ring[slot * w..(slot + 1) * w],
                m,
            );
            grad_done += 1;
        }
        let slot = sy % grad_n;
        let (gx, gy) = (
            &gx_ring[slot * w..(slot + 1) * w],
            &gy_ring[slot * w..(slot + 1) * w],
        );
        let [pa, pb, pc] = &mut pads;
        // Products, then padded: reflecting a product is the product of the reflections.
        for (j, ((a, b), c)) in pa
            .iter_mut()
            .zip(pb.iter_mut())
            .zip(pc.iter_mut())
            .enumerate()
        {
            if j < anchor || j >= anchor + w {
                let s = reflect101(j as isize - anchor as isize, w);
                (*a, *b, *c) = (gx[s] * gx[s], gx[s] * gy[s], gy[s] * gy[s]);
            }
        }
        let mid = anchor..anchor + w;
        for ((a, (b, c)), (&x, &y)) in pa[mid.clone()]
            .iter_mut()
            .zip(pb[mid.clone()].iter_mut().zip(pc[mid].iter_mut()))
            .zip(gx.iter().zip(gy))
        {
            (*a, *b, *c) = (x * x, x * y, y * y);
        }
        let slot = py % block;
        for (r, p) in ring.iter_mut().zip(&pads) {
            box_row(p, block, &mut r[slot * w..(slot + 1) * w]);
        }

        if py < block - 1 {
            for (s, r) in sum.iter_mut().zip(&ring) {
                for (s, &v) in s.iter_mut().zip(&r[slot * w..(slot + 1) * w]) {
                    *s += v;
                }
            }
            continue;
        }
        // Output row y: add the newest row sums, emit, drop the oldest.
        let y = py + 1 - block;
        let (new, old) = (slot, y % block);
        for ((s, r), o) in sum.iter_mut().zip(&ring).zip(row.iter_mut()) {
            let (nr, or) = (&r[new * w..(new + 1) * w], &r[old * w..(old + 1) * w]);
            for (((s, o), &nv), &ov) in s.iter_mut().zip(o.iter_mut()).zip(nr).zip(or) {
                let s0 = *s + nv;
                *o = s0 as f32;
                *s = s0 - ov;
            }
        }
        let [a, b, c] = &row;
        finish(a, b, c, y * w, resp);
        out.extend_from_slice(resp);
    }
}

super::simd::versions! {
    /// [`dense_core`] at the process's SIMD level, with the FMA that level has (the same
    /// bits on every level: `cpu::fma`).
    fn dense_versions[const K: usize, F: FnMut(&[f32], &[f32], &[f32], usize, &mut [f32])](
        img: Gray<'_>,
        sm: &[f32; K],
        de: &[f32; K],
        block: usize,
        finish: &mut F,
        scratch: &mut DenseScratch,
        out: &mut Vec<f32>,
    ) = dense_core, fma;
}

/// [`dense_versions`] for a kernel of `K` taps.
fn dense_dispatch<const K: usize, F: FnMut(&[f32], &[f32], &[f32], usize, &mut [f32])>(
    img: Gray<'_>,
    sm: &[f32],
    de: &[f32],
    block: usize,
    finish: &mut F,
    scratch: &mut DenseScratch,
    out: &mut Vec<f32>,
) {
    let sm: &[f32; K] = sm.try_into().unwrap();
    let de: &[f32; K] = de.try_into().unwrap();
    dense_versions(img, sm, de, block, finish, scratch, out)
}

/// `cv::cornerHarris(img, block_size, ksize, k)` (default border, `BORDER_REFLECT_101`) into
/// `out` (row-major, `width * height`).
///
/// Steps as OpenCV: Sobel dx / dy to f32 with the smoothing kernel pre-scaled by
/// `1 / (2^(ksize-1) * block_size * 255)`; products dx², dx·dy, dy²; box sums; then
/// `a*c - b*b - k*(a+c)^2`. Bit-exact with the goldens (see the module doc for the host
/// caveat); the tests bound any difference by `1e-6 * max|R|` as well.
pub fn dense_response(img: impl AsGray, block_size: u32, ksize: u32, k: f32, out: &mut Vec<f32>) {
    let img = img.gray();
    let n = img.width * img.height;
    // Our k is f32; its shortest decimal form recovers the double the user wrote (0.04,
    // not 0.0399999991).
    let kd: f64 = k.to_string().parse().unwrap_or(k as f64);
    let ends = (n - n % 8, n - n % 4);
    let mut finish = |a: &[f32], b: &[f32], c: &[f32], i0: usize, resp: &mut [f32]| {
        response_row(a, b, c, k, kd, i0, ends, resp)
    };
    covariance_map(
        img,
        block_size,
        ksize,
        &mut finish,
        &mut DenseScratch::default(),
        out,
    );
}

/// The common part of `cv::cornerHarris` and `cv::cornerMinEigenVal`
/// (`cornerEigenValsVecs`): per output row, the box sums `a = Σdx²`, `b = Σdx·dy`,
/// `c = Σdy²` of the scaled Sobel gradients, handed to `finish(a, b, c, i0, row)` with `i0`
/// the flat index of the row's first pixel; `out` gets every row it writes.
pub(crate) fn covariance_map<F: FnMut(&[f32], &[f32], &[f32], usize, &mut [f32])>(
    img: Gray<'_>,
    block_size: u32,
    ksize: u32,
    finish: &mut F,
    scratch: &mut DenseScratch,
    out: &mut Vec<f32>,
) {
    let (w, h) = (img.width, img.height);
    let n = w * h;
    out.clear();
    if n == 0 {
        return;
    }
    // Every pixel is appended exactly once, row by row.
    out.reserve(n);
    assert!(
        block_size >= 1,
        "dense Harris block_size must be at least 1"
    );
    let (smooth, deriv) = sobel_kernels(ksize);
    let scale = 1.0 / ((1u32 << (ksize - 1)) as f64 * block_size as f64 * 255.0);
    // OpenCV scales the f32 kernel Mat by a float factor.
    let (mut sm, mut de) = ([0f32; 7], [0f32; 7]);
    for (i, (&s, &d)) in smooth.iter().zip(deriv.iter()).enumerate() {
        (sm[i], de[i]) = (s as f32 * scale as f32, d as f32);
    }
    let k = smooth.len();
    let (sm, de) = (&sm[..k], &de[..k]);
    let bs = block_size as usize;
    match ksize {
        3 => dense_dispatch::<3, F>(img, sm, de, bs, finish, scratch, out),
        5 => dense_dispatch::<5, F>(img, sm, de, bs, finish, scratch, out),
        _ => dense_dispatch::<7, F>(img, sm, de, bs, finish, scratch, out),
    }
}

/// Dense `cv::cornerHarris` corners: 3x3 local maxima above `quality * max response`.
///
/// A pixel is kept when its response is `> quality * max` and strictly greater than each of
/// its (in-image) 8 neighbours, so a plateau of equal maxima yields no corner. Raster order,
/// `fast_score` 0, `response` = the Harris response. No corners when the maximum is <= 0.
pub fn dense_corners(
    img: impl AsGray,
    block_size: u32,
    ksize: u32,
    k: f32,
    quality: f32,
) -> Vec<Corner> {
    let img = img.gray();
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
mod tests;
