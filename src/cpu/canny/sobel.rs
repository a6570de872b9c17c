//! Canny's first stage: the 3x3 Sobel derivatives and their integer magnitude, whole
//! images ([`sobel_magnitude`]) and row by row (`sobel_row`, also what the fused and banded
//! paths call).

use super::super::simd::prefetch;
use crate::image::Gray;

/// Output of [`sobel_magnitude`], input of [`super::nms_classify`].
#[derive(Default)]
pub struct Gradients {
    pub width: usize,
    pub height: usize,
    /// Sobel x / y derivatives, `width * height`.
    pub dx: Vec<i16>,
    pub dy: Vec<i16>,
    /// Magnitudes, padded (see the module doc).
    pub mag: Vec<i32>,
    /// Row sums of the vertical Sobel pass, with one replicated pixel on each side.
    pub(super) smooth: Vec<i16>,
    pub(super) diff: Vec<i16>,
}

super::super::simd::versions! {
    /// 3x3 Sobel (`[-1 0 1] x [1 2 1]` and its transpose, `BORDER_REPLICATE`, exact in `i16`)
    /// into `dx`, `dy` (`width * height`) and the magnitude into the padded `mag`:
    /// `|dx| + |dy|` (L1) or `dx^2 + dy^2` (L2, not square-rooted; thresholds are squared).
    /// `mag` is resized and its padding ring zeroed here. `img` must not be empty.
    pub fn sobel_magnitude(img: Gray<'_>, l2: bool, g: &mut Gradients) = sobel_magnitude_impl;
}

#[inline(always)]
pub(super) fn sobel_magnitude_impl(img: Gray<'_>, l2: bool, g: &mut Gradients) {
    let (w, h) = (img.width, img.height);
    let pw = w + 2;
    g.width = w;
    g.height = h;
    let Gradients {
        dx,
        dy,
        mag,
        smooth,
        diff,
        ..
    } = g;
    dx.resize(w * h, 0);
    dy.resize(w * h, 0);
    mag.resize(pw * (h + 2), 0);
    zero_ring(mag, pw, h + 2);
    smooth.resize(pw, 0);
    diff.resize(pw, 0);
    for y in 0..h {
        let up = img.row(y.saturating_sub(1));
        let mid = img.row(y);
        let down = img.row((y + 1).min(h - 1));
        let mrow = &mut mag[(y + 1) * pw + 1..(y + 1) * pw + 1 + w];
        let ahead = img.rows_from(y + 3);
        sobel_row(
            [up, mid, down, ahead],
            l2,
            smooth,
            diff,
            &mut dx[y * w..(y + 1) * w],
            &mut dy[y * w..(y + 1) * w],
            mrow,
        );
    }
}

/// Zeroes the one-pixel ring of a padded `pw x ph` map.
pub(super) fn zero_ring<T: Copy + Default>(m: &mut [T], pw: usize, ph: usize) {
    m[..pw].fill(T::default());
    m[(ph - 1) * pw..ph * pw].fill(T::default());
    for y in 1..ph - 1 {
        m[y * pw] = T::default();
        m[y * pw + pw - 1] = T::default();
    }
}

/// One row of [`sobel_magnitude`] from `rows`: the rows above, at and below it (replicated
/// at the image border by the caller), then a later row that is prefetched as the pass goes
/// along (empty at the bottom; the vertical pass waited on frames that come from DRAM):
/// `dx`, `dy` and the magnitude (unpadded, `w` each).
/// `smooth` and `diff` are scratch rows of `w + 2`.
#[inline(always)]
pub(super) fn sobel_row(
    rows: [&[u8]; 4],
    l2: bool,
    smooth: &mut [i16],
    diff: &mut [i16],
    dx: &mut [i16],
    dy: &mut [i16],
    mag: &mut [i32],
) {
    if l2 {
        sobel_row_k::<true>(rows, smooth, diff, dx, dy, mag)
    } else {
        sobel_row_k::<false>(rows, smooth, diff, dx, dy, mag)
    }
}

#[inline(always)]
fn sobel_row_k<const L2: bool>(
    [up, mid, down, ahead]: [&[u8]; 4],
    smooth: &mut [i16],
    diff: &mut [i16],
    dx: &mut [i16],
    dy: &mut [i16],
    mag: &mut [i32],
) {
    let w = mid.len();
    let (up, down) = (&up[..w], &down[..w]);
    // Vertical pass: [1 2 1] for dx, [-1 0 1] for dy, at padded column x + 1. In i16, as
    // OpenCV's Sobel: |smooth| <= 1020, |diff| <= 255, and every sum below stays within
    // 1020 (magnitudes aside): twice the lanes of i32 per vector.
    {
        let (s, d) = (&mut smooth[1..w + 1], &mut diff[1..w + 1]);
        // One cache line at a time (a prefetch each): `bench` opencv_canny one thread,
        // alternating, 1080p 1.43-1.55 -> 1.25-1.38 ms, 4K 7.8-7.9 -> 6.9-7.9 (2026-12-07).
        let mut x0 = 0;
        while x0 < w {
            let x1 = (x0 + 64).min(w);
            prefetch(ahead, x0);
            for x in x0..x1 {
                let (a, b, c) = (up[x] as i16, mid[x] as i16, down[x] as i16);
                s[x] = a + 2 * b + c;
                d[x] = c - a;
            }
            x0 = x1;
        }
    }
    // Replicated border columns.
    smooth[0] = smooth[1];
    smooth[w + 1] = smooth[w];
    diff[0] = diff[1];
    diff[w + 1] = diff[w];
    let (s0, s2) = (&smooth[..w], &smooth[2..w + 2]);
    let (d0, d1, d2) = (&diff[..w], &diff[1..w + 1], &diff[2..w + 2]);
    let (dx, dy, mag) = (&mut dx[..w], &mut dy[..w], &mut mag[..w]);
    for x in 0..w {
        let vx = s2[x] - s0[x];
        let vy = d0[x] + 2 * d1[x] + d2[x];
        dx[x] = vx;
        dy[x] = vy;
        let (vx, vy) = (vx as i32, vy as i32);
        mag[x] = if L2 {
            vx * vx + vy * vy
        } else {
            vx.abs() + vy.abs()
        };
    }
}
