//! Pyramidal Lucas-Kanade optical flow (CPU reference for the tracker), bit-exact with
//! OpenCV's `cv::buildOpticalFlowPyramid` + `cv::calcOpticalFlowPyrLK` on x86-64 (the
//! opencv-python 5.0 wheel; note "LK semantics" in `../shared/OPENCV_NOTES.md` style below).
//!
//! What is reproduced, and how:
//! - The pyramid ([`FlowPyramid`]): level 0 is the image; level l is `cv::pyrDown` of level
//!   l-1 (5x5 binomial, `(sum + 128) >> 8`, `BORDER_REFLECT_101`), size `((w+1)/2, (h+1)/2)`;
//!   the levels stop before one whose side would be `<= window`. Every level carries a
//!   `window`-wide `BORDER_REFLECT_101` border, as OpenCV's pyramid does, so a window may
//!   hang up to `window` pixels off the image.
//! - Derivatives: the Scharr pair of `calcScharrDeriv` in 16-bit integers (vertical
//!   [3 10 3] then horizontal difference for x, vertical difference then [3 10 3] for y,
//!   reflected rows and columns), then a `window`-wide border of zeros.
//! - The tracker (`LKTrackerInvoker`): 14-bit fixed-point bilinear weights rounded from f32
//!   with ties to even, the patch and its gradients interpolated in integers, the 2x2 matrix
//!   and the mismatch vector summed in f32 in the exact order of OpenCV's 128-bit SIMD loop
//!   (blocks of 8 columns: lane j takes columns j and j+4 of each block; the columns past
//!   the last whole block are summed by the scalar tail first; the lanes reduced as
//!   `(l0 + l2) + (l1 + l3)`), the minimum-eigenvalue test, up to `max_iter` Newton steps
//!   with OpenCV's two stopping rules, and the final mismatch (`err`) pass, whose bounds
//!   check can still clear a status.
//!
//! The f32 sums are the only place where order matters: every product is an integer that
//! f32 holds exactly (|I_x|, |I_y| <= 4080; a pair of products as the SIMD dot product
//! forms it is converted to f32 once, as OpenCV's `v_cvt_f32` does).

mod pyramid;

pub use self::pyramid::{FlowPyramid, Padded};

/// `cv::TermCriteria(COUNT + EPS, max_iter, epsilon)` and the other `calcOpticalFlowPyrLK`
/// parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LkParams {
    /// Square window side (`winSize`), >= 3.
    pub window: usize,
    /// Highest pyramid level used (`maxLevel`); fewer when the image is small.
    pub max_level: usize,
    pub max_iter: u32,
    pub epsilon: f64,
    /// `minEigThreshold` (OpenCV's default 1e-4).
    pub min_eig_threshold: f32,
}

impl Default for LkParams {
    /// VINS-Fusion's call: 21x21, 3 levels, 30 iterations or 0.01 px.
    fn default() -> Self {
        LkParams {
            window: 21,
            max_level: 3,
            max_iter: 30,
            epsilon: 0.01,
            min_eig_threshold: 1e-4,
        }
    }
}

/// A point's result: where it went, whether it was tracked, and OpenCV's `err` (mean
/// absolute mismatch of the final window, in gray levels).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flow {
    pub x: f32,
    pub y: f32,
    pub status: bool,
    pub err: f32,
}

const W_BITS: i32 = 14;
const FLT_SCALE: f32 = 1.0 / (1 << 20) as f32;

/// OpenCV's `cvRound` of a float (ties to even, as the SSE conversion does).
#[inline(always)]
fn cv_round(v: f32) -> i32 {
    v.round_ties_even() as i32
}

/// The four 14-bit bilinear weights of fractional offsets (a, b).
#[inline(always)]
fn weights(a: f32, b: f32) -> [i32; 4] {
    let s = (1 << W_BITS) as f32;
    let w00 = cv_round((1.0 - a) * (1.0 - b) * s);
    let w01 = cv_round(a * (1.0 - b) * s);
    let w10 = cv_round((1.0 - a) * b * s);
    [w00, w01, w10, (1 << W_BITS) - w00 - w01 - w10]
}

#[inline(always)]
fn descale(v: i32, n: i32) -> i32 {
    (v + (1 << (n - 1))) >> n
}

/// One point's window buffers: the interpolated window of the previous image (x32) and
/// its gradients.
#[derive(Default)]
pub struct WinBuf {
    iwin: Vec<i32>,
    dwin: Vec<(i32, i32)>,
}

/// Reusable buffers of [`track`], and its threads.
#[derive(Default)]
pub struct LkScratch {
    win: WinBuf,
    /// The points' positions while the levels refine them.
    next_pts: Vec<(f32, f32)>,
    /// More than one thread ([`LkScratch::set_threads`]): the pool and one window buffer per
    /// chunk of points.
    pool: Option<rayon::ThreadPool>,
    wins: Vec<WinBuf>,
}

/// Points per chunk when the points are tracked on several threads.
const CHUNK: usize = 32;

impl LkScratch {
    /// Room for `n` points (no growth below that).
    pub fn reserve(&mut self, n: usize) {
        self.next_pts.reserve(n);
        if self.pool.is_some() {
            self.wins.resize_with(n.div_ceil(CHUNK), WinBuf::default);
        }
    }

    /// Tracks the points on `threads` threads (1: on the caller's), in chunks of 32 points,
    /// each through every level on its own: a point's flow depends on no other point, so the
    /// results are the same for any count.
    pub fn set_threads(&mut self, threads: usize) {
        let now = self.pool.as_ref().map_or(1, |p| p.current_num_threads());
        if threads == now {
            return;
        }
        self.pool = (threads > 1).then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("gf-lk-{i}"))
                .build()
                .expect("the LK thread pool")
        });
    }
}

/// `cv::calcOpticalFlowPyrLK(prev, next, prev_pts, next_pts, status, err, ...)` with both
/// pyramids already built (by [`FlowPyramid::build`] with the same window; `prev` must
/// have its derivatives). With `initial` the search starts there
/// (`OPTFLOW_USE_INITIAL_FLOW`), else at the previous position. Levels above either
/// pyramid's top are skipped, as OpenCV does.
pub fn track(
    prev: &FlowPyramid,
    next: &FlowPyramid,
    prev_pts: &[(f32, f32)],
    initial: Option<&[(f32, f32)]>,
    p: &LkParams,
    scratch: &mut LkScratch,
    out: &mut Vec<Flow>,
) {
    assert!(
        prev.derivs_ready,
        "the previous pyramid needs its derivatives"
    );
    assert_eq!(prev.window, p.window);
    assert_eq!(next.window, p.window);
    out.clear();
    out.extend(prev_pts.iter().map(|_| Flow {
        x: 0.0,
        y: 0.0,
        status: true,
        err: 0.0,
    }));
    if prev_pts.is_empty() {
        return;
    }
    let max_level = p.max_level.min(prev.max_level()).min(next.max_level());
    // The scratch's point buffer taken out while the points use the rest, put back below.
    let mut next_pts = std::mem::take(&mut scratch.next_pts);
    next_pts.clear();
    match initial {
        Some(i) => next_pts.extend_from_slice(i),
        None => next_pts.resize(prev_pts.len(), (0.0, 0.0)),
    }
    let eps = {
        let e = p.epsilon.clamp(0.0, 10.0);
        e * e
    };
    let max_iter = p.max_iter.min(100);
    let run = Run {
        prev,
        next,
        use_initial: initial.is_some(),
        p,
        eps,
        max_iter,
        max_level,
    };
    match &scratch.pool {
        // Waking the pool costs more than ~200 points' work (2026-12-06, 752x480: 150
        // points 2.9 ms on one thread, 3.4 on two); from 256 points it pays (1000: 17.4 -> 12.0).
        Some(pool) if prev_pts.len() >= 8 * CHUNK => {
            let chunks = prev_pts.len().div_ceil(CHUNK);
            if scratch.wins.len() < chunks {
                scratch.wins.resize_with(chunks, WinBuf::default);
            }
            let wins = &mut scratch.wins[..chunks];
            pool.scope(|sc| {
                for (((pts, nxt), o), w) in prev_pts
                    .chunks(CHUNK)
                    .zip(next_pts.chunks_mut(CHUNK))
                    .zip(out.chunks_mut(CHUNK))
                    .zip(wins.iter_mut())
                {
                    let run = &run;
                    sc.spawn(move |_| run_points(run, pts, nxt, o, w));
                }
            });
        }
        _ => run_points(&run, prev_pts, &mut next_pts, out, &mut scratch.win),
    }
    for (o, &(x, y)) in out.iter_mut().zip(&next_pts) {
        (o.x, o.y) = (x, y);
    }
    scratch.next_pts = next_pts;
}

/// What every point of one [`track`] call shares.
struct Run<'a> {
    prev: &'a FlowPyramid,
    next: &'a FlowPyramid,
    use_initial: bool,
    p: &'a LkParams,
    eps: f64,
    max_iter: u32,
    max_level: usize,
}

super::simd::versions! {
    /// [`run_points_impl`] at the process's SIMD level (SSE4.1 brings `pmulld` for the
    /// fixed-point interpolation and `roundss` for `cv_round`, a libm call at the SSE2
    /// baseline).
    fn run_points(r: &Run, pts: &[(f32, f32)], nxt: &mut [(f32, f32)], out: &mut [Flow], w: &mut WinBuf) = run_points_impl;
}

/// Every level of a range of points, coarsest first: the same flows as level-major order
/// over all points (no point's flow depends on another's).
#[inline(always)]
fn run_points_impl(
    r: &Run,
    pts: &[(f32, f32)],
    nxt: &mut [(f32, f32)],
    out: &mut [Flow],
    w: &mut WinBuf,
) {
    for level in (0..=r.max_level).rev() {
        let c = Level {
            i: &r.prev.levels[level],
            d: &r.prev.derivs[level],
            j: &r.next.levels[level],
            level,
            max_level: r.max_level,
            use_initial: r.use_initial,
            p: r.p,
            eps: r.eps,
            max_iter: r.max_iter,
        };
        for (k, &pt) in pts.iter().enumerate() {
            c.track_point(pt, &mut nxt[k], &mut out[k], w);
        }
    }
}

struct Level<'a> {
    i: &'a Padded<u8>,
    d: &'a Padded<i16>,
    j: &'a Padded<u8>,
    level: usize,
    max_level: usize,
    use_initial: bool,
    p: &'a LkParams,
    eps: f64,
    max_iter: u32,
}

impl Level<'_> {
    /// One point at one level (`LKTrackerInvoker::operator()` for one `ptidx`).
    #[inline(always)]
    fn track_point(
        &self,
        prev_pt: (f32, f32),
        next_pt: &mut (f32, f32),
        out: &mut Flow,
        s: &mut WinBuf,
    ) {
        let win = self.p.window;
        let half = ((win - 1) as f32) * 0.5;
        let scale = (1.0f64 / (1u64 << self.level) as f64) as f32;
        let mut prev = (prev_pt.0 * scale, prev_pt.1 * scale);
        let mut nxt = if self.level == self.max_level {
            if self.use_initial {
                (next_pt.0 * scale, next_pt.1 * scale)
            } else {
                prev
            }
        } else {
            (next_pt.0 * 2.0, next_pt.1 * 2.0)
        };
        *next_pt = nxt;

        prev = (prev.0 - half, prev.1 - half);
        let ipx = prev.0.floor() as i32 as isize;
        let ipy = prev.1.floor() as i32 as isize;
        let (w, h) = (self.i.width as isize, self.i.height as isize);
        let winl = win as isize;
        if ipx < -winl || ipx >= w || ipy < -winl || ipy >= h {
            if self.level == 0 {
                out.status = false;
                out.err = 0.0;
            }
            return;
        }
        let (a11, a12, a22) = self.gradient_matrix(prev, (ipx, ipy), s);

        let det = a11 * a22 - a12 * a12;
        let min_eig = (a22 + a11 - ((a11 - a22) * (a11 - a22) + 4.0 * a12 * a12).sqrt())
            / (2 * win * win) as f32;
        if min_eig < self.p.min_eig_threshold || det < f32::EPSILON {
            if self.level == 0 {
                out.status = false;
            }
            return;
        }
        let det_inv = 1.0 / det;

        nxt = (nxt.0 - half, nxt.1 - half);
        let mut prev_delta = (0f32, 0f32);
        let (jw, jh) = (self.j.width as isize, self.j.height as isize);
        for iter in 0..self.max_iter {
            let inx = nxt.0.floor() as i32 as isize;
            let iny = nxt.1.floor() as i32 as isize;
            if inx < -winl || inx >= jw || iny < -winl || iny >= jh {
                if self.level == 0 {
                    out.status = false;
                }
                break;
            }
            let (b1, b2) = self.mismatch(nxt, (inx, iny), s);
            let delta = (
                (a12 * b2 - a22 * b1) * det_inv,
                (a12 * b1 - a11 * b2) * det_inv,
            );
            nxt = (nxt.0 + delta.0, nxt.1 + delta.1);
            *next_pt = (nxt.0 + half, nxt.1 + half);
            let dd = delta.0 as f64 * delta.0 as f64 + delta.1 as f64 * delta.1 as f64;
            if dd <= self.eps {
                break;
            }
            if iter > 0
                && ((delta.0 + prev_delta.0).abs() as f64) < 0.01
                && ((delta.1 + prev_delta.1).abs() as f64) < 0.01
            {
                *next_pt = (next_pt.0 - delta.0 * 0.5, next_pt.1 - delta.1 * 0.5);
                break;
            }
            prev_delta = delta;
        }

        if out.status && self.level == 0 {
            self.final_error(*next_pt, half, out, s);
        }
    }

    /// The window of the previous image around `prev` (its top-left corner, window
    /// coordinates; `(ipx, ipy)` its integer part) and its gradients into `s`, bilinear as
    /// OpenCV's fixed point, and the gradient matrix (A11, A12, A22) in OpenCV's summation
    /// order (its SIMD lanes, then the scalar tail).
    #[inline(always)]
    fn gradient_matrix(
        &self,
        prev: (f32, f32),
        (ipx, ipy): (isize, isize),
        s: &mut WinBuf,
    ) -> (f32, f32, f32) {
        let win = self.p.window;
        let winl = win as isize;
        let a = prev.0 - ipx as f32;
        let b = prev.1 - ipy as f32;
        let [w00, w01, w10, w11] = weights(a, b);

        // The window of the previous image and its gradients, and the 2x2 matrix.
        // Sized once per window (no per-point growth); every entry is written below.
        s.iwin.resize(win * win, 0);
        s.dwin.resize(win * win, (0, 0));
        let mut acc = [0f32; 3]; // scalar tails: A11, A12, A22
        let mut q = [[0f32; 4]; 3]; // SIMD lanes
        let blocks = if win >= 8 { (win - 8) / 8 + 1 } else { 0 };
        let simd_end = blocks * 8;
        let (istride, dstride) = (self.i.stride, self.d.stride);
        for y in 0..winl {
            let io = self.i.at(ipx, ipy + y, 1);
            let dof = self.d.at(ipx, ipy + y, 2);
            let yu = y as usize;
            // The rows read, sliced once, so that the per-pixel loop has no bounds checks.
            let (i0, i1) = (
                &self.i.data[io..io + win + 1],
                &self.i.data[io + istride..io + istride + win + 1],
            );
            let (d0, d1) = (
                &self.d.data[dof..dof + 2 * win + 2],
                &self.d.data[dof + dstride..dof + dstride + 2 * win + 2],
            );
            let irow = &mut s.iwin[yu * win..(yu + 1) * win];
            for (x, iv) in irow.iter_mut().enumerate() {
                *iv = descale(
                    i0[x] as i32 * w00
                        + i0[x + 1] as i32 * w01
                        + i1[x] as i32 * w10
                        + i1[x + 1] as i32 * w11,
                    W_BITS - 5,
                );
            }
            let drow = &mut s.dwin[yu * win..(yu + 1) * win];
            for (x, dv) in drow.iter_mut().enumerate() {
                let o = 2 * x;
                let ix = descale(
                    d0[o] as i32 * w00
                        + d0[o + 2] as i32 * w01
                        + d1[o] as i32 * w10
                        + d1[o + 2] as i32 * w11,
                    W_BITS,
                );
                let iy = descale(
                    d0[o + 1] as i32 * w00
                        + d0[o + 3] as i32 * w01
                        + d1[o + 1] as i32 * w10
                        + d1[o + 3] as i32 * w11,
                    W_BITS,
                );
                *dv = (ix, iy);
            }
            let row = &s.dwin[yu * win..(yu + 1) * win];
            for blk in 0..blocks {
                for half4 in 0..2 {
                    for lane in 0..4 {
                        let (ix, iy) = row[blk * 8 + half4 * 4 + lane];
                        let (fx, fy) = (ix as f32, iy as f32);
                        q[2][lane] += fy * fy;
                        q[1][lane] += fx * fy;
                        q[0][lane] += fx * fx;
                    }
                }
            }
            for &(ix, iy) in &row[simd_end..] {
                acc[0] += (ix * ix) as f32;
                acc[1] += (ix * iy) as f32;
                acc[2] += (iy * iy) as f32;
            }
        }
        let reduce = |l: [f32; 4]| (l[0] + l[2]) + (l[1] + l[3]);
        let a11 = (acc[0] + reduce(q[0])) * FLT_SCALE;
        let a12 = (acc[1] + reduce(q[1])) * FLT_SCALE;
        let a22 = (acc[2] + reduce(q[2])) * FLT_SCALE;
        (a11, a12, a22)
    }

    /// The mismatch vector (b1, b2) of the window at `nxt` (`(inx, iny)` its integer part)
    /// against the previous window in `s`, in OpenCV's order of sums.
    #[inline(always)]
    fn mismatch(&self, nxt: (f32, f32), (inx, iny): (isize, isize), s: &WinBuf) -> (f32, f32) {
        let win = self.p.window;
        let blocks = if win >= 8 { (win - 8) / 8 + 1 } else { 0 };
        let simd_end = blocks * 8;
        let jstride = self.j.stride;
        let a = nxt.0 - inx as f32;
        let b = nxt.1 - iny as f32;
        let [w00, w01, w10, w11] = weights(a, b);
        let mut tail = [0f32; 2];
        let mut qb0 = [0f32; 4];
        let mut qb1 = [0f32; 4];
        let jd = &self.j.data;
        let mut it = [0i32; 64];
        for y in 0..win {
            let jo = self.j.at(inx, iny + y as isize, 1);
            let r0 = &jd[jo..jo + win + 1];
            let r1 = &jd[jo + jstride..jo + jstride + win + 1];
            let ir = &s.iwin[y * win..(y + 1) * win];
            // The mismatch It = J(window) - I(window), in integers (any order).
            for (x, t) in it[..win].iter_mut().enumerate() {
                let v = r0[x] as i32 * w00
                    + r0[x + 1] as i32 * w01
                    + r1[x] as i32 * w10
                    + r1[x + 1] as i32 * w11;
                *t = descale(v, W_BITS - 5) - ir[x];
            }
            let drow = &s.dwin[y * win..(y + 1) * win];
            for blk in 0..blocks {
                let x0 = blk * 8;
                let t = &it[x0..x0 + 8];
                let g = &drow[x0..x0 + 8];
                // pmaddwd pairs (k, k + 4): lanes x0, y0, x1, y1 and x2, y2, x3, y3.
                let px = |k: usize| t[k] * g[k].0 + t[k + 4] * g[k + 4].0;
                let py = |k: usize| t[k] * g[k].1 + t[k + 4] * g[k + 4].1;
                let l0 = [px(0), py(0), px(1), py(1)];
                let l1 = [px(2), py(2), px(3), py(3)];
                for lane in 0..4 {
                    qb0[lane] += l0[lane] as f32;
                    qb1[lane] += l1[lane] as f32;
                }
            }
            for (d, g) in it[simd_end..win].iter().zip(&drow[simd_end..]) {
                tail[0] += (d * g.0) as f32;
                tail[1] += (d * g.1) as f32;
            }
        }
        let sum: [f32; 4] = std::array::from_fn(|k| qb0[k] + qb1[k]);
        let ib1 = tail[0] + ((sum[0] + 0.0) + (sum[2] + 0.0));
        let ib2 = tail[1] + ((sum[1] + 0.0) + (sum[3] + 0.0));
        let b1 = ib1 * FLT_SCALE;
        let b2 = ib2 * FLT_SCALE;
        (b1, b2)
    }

    /// OpenCV's last pass at level 0: the mean absolute mismatch at the final position;
    /// a final window off the padded image clears the status.
    #[inline(always)]
    fn final_error(&self, next_pt: (f32, f32), half: f32, out: &mut Flow, s: &WinBuf) {
        let win = self.p.window;
        let winl = win as isize;
        let np = (next_pt.0 - half, next_pt.1 - half);
        let inx = np.0.floor() as i32 as isize;
        let iny = np.1.floor() as i32 as isize;
        if inx < -winl
            || inx >= self.j.width as isize
            || iny < -winl
            || iny >= self.j.height as isize
        {
            out.status = false;
            return;
        }
        let [w00, w01, w10, w11] = weights(np.0 - inx as f32, np.1 - iny as f32);
        let jstride = self.j.stride;
        let mut errval = 0f32;
        for y in 0..win {
            let jo = self.j.at(inx, iny + y as isize, 1);
            let jd = &self.j.data;
            for x in 0..win {
                let v = descale(
                    jd[jo + x] as i32 * w00
                        + jd[jo + x + 1] as i32 * w01
                        + jd[jo + x + jstride] as i32 * w10
                        + jd[jo + x + jstride + 1] as i32 * w11,
                    W_BITS - 5,
                ) - s.iwin[y * win + x];
                errval += (v as f32).abs();
            }
        }
        out.err = errval * 1.0 / (32 * win * win) as f32;
    }
}

#[cfg(test)]
mod tests;
