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
//! The segment test uses the binary encoding of Chang et al. ("Faster than FAST", seed 001):
//! one 16-bit mask per polarity, doubled to 32 bits so that arcs wrapping past pixel 15 are
//! contiguous runs, and a run of 9 found with shifted ANDs instead of a loop over arcs.

use super::Corner;
use crate::image::GrayImage;

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
    let v = img.data[c as usize] as i16;
    // d[k] = p_k - v over the circle, doubled so arcs never wrap.
    let mut d = [0i16; 32];
    for (k, &(dx, dy)) in CIRCLE.iter().enumerate() {
        let p = img.data[(c + dy as isize * w + dx as isize) as usize] as i16;
        d[k] = p - v;
        d[k + 16] = p - v;
    }
    // Only corners are scored, so a direct scan of the 16 arcs is cheap enough.
    let mut best = 0i16;
    for k in 0..16 {
        let win = &d[k..k + 9];
        let (mut mn, mut mx) = (i16::MAX, i16::MIN);
        for &e in win {
            mn = mn.min(e);
            mx = mx.max(e);
        }
        best = best.max(mn).max(-mx);
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

/// All FAST corners in raster order (y, then x), `response` = FAST score as f32.
pub fn detect(img: &GrayImage, threshold: u8, nonmax_suppression: bool) -> Vec<Corner> {
    let (w, h) = (img.width, img.height);
    let mut out = Vec::new();
    if w < 2 * BORDER + 1 || h < 2 * BORDER + 1 {
        return out;
    }
    let t = threshold as i32;
    // Row ring for NMS: scores of rows y-2, y-1, y (0 = no corner) and the corners' x.
    let mut scores = [vec![0u8; w], vec![0u8; w], vec![0u8; w]];
    let mut xs: [Vec<usize>; 3] = [Vec::new(), Vec::new(), Vec::new()];

    // One extra all-zero row (h - 3) lets the last real row go through NMS.
    for y in BORDER..=h - BORDER {
        let slot = y % 3;
        scores[slot].fill(0);
        xs[slot].clear();
        if y < h - BORDER {
            // Row slices for the compass pixels 0, 4, 8, 12 of CIRCLE (below, right, above,
            // left) keep the pre-test free of per-pixel bounds arithmetic.
            let (above, mid, below) = (img.row(y - 3), img.row(y), img.row(y + 3));
            for x in BORDER..w - BORDER {
                let v = mid[x] as i32;
                let (hi, lo) = (v + t, v - t);
                let (p0, p4, p8, p12) = (
                    below[x] as i32,
                    mid[x + 3] as i32,
                    above[x] as i32,
                    mid[x - 3] as i32,
                );
                // A 9-arc spans two neighbouring compass pixels: reject unless one such pair
                // is brighter (or darker) together.
                let b4 = (p0 > hi) as u8
                    | ((p4 > hi) as u8) << 1
                    | ((p8 > hi) as u8) << 2
                    | ((p12 > hi) as u8) << 3;
                let d4 = (p0 < lo) as u8
                    | ((p4 < lo) as u8) << 1
                    | ((p8 < lo) as u8) << 2
                    | ((p12 < lo) as u8) << 3;
                let rot = |m: u8| ((m >> 1) | (m << 3)) & 0xF;
                if b4 & rot(b4) == 0 && d4 & rot(d4) == 0 {
                    continue;
                }
                let (bright, dark) = ring_masks(img, x, y, threshold);
                if has_arc9(bright) || has_arc9(dark) {
                    let s = score(img, x, y);
                    if nonmax_suppression {
                        scores[slot][x] = s;
                        xs[slot].push(x);
                    } else {
                        out.push(corner(x, y, s));
                    }
                }
            }
        }
        if nonmax_suppression && y > BORDER {
            let (py, pslot) = (y - 1, (y + 2) % 3);
            let (above, mid, below) = (&scores[(y + 1) % 3], &scores[pslot], &scores[slot]);
            for &x in &xs[pslot] {
                let s = mid[x];
                let beats = |r: &[u8]| s > r[x - 1] && s > r[x] && s > r[x + 1];
                if s > mid[x - 1] && s > mid[x + 1] && beats(above) && beats(below) {
                    out.push(corner(x, py, s));
                }
            }
        }
    }
    out
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
mod tests {
    use super::*;

    #[test]
    fn arc9_matches_a_loop_over_all_masks() {
        for m in 0..=u16::MAX {
            let looped = (0..16).any(|s| (s..s + 9).all(|k| m >> (k % 16) & 1 == 1));
            assert_eq!(has_arc9(m), looped, "mask {m:#06x}");
        }
    }

    #[test]
    fn score_is_the_last_threshold_that_still_detects() {
        // A bright 9-arc of +40 with one +25 pixel in it, on a flat background.
        let mut img = GrayImage::new(9, 9);
        img.data.fill(100);
        for (k, &(dx, dy)) in CIRCLE.iter().enumerate().take(9) {
            let v = if k == 4 { 125 } else { 140 };
            img.data[((4 + dy) * 9 + 4 + dx) as usize] = v;
        }
        assert_eq!(score(&img, 4, 4), 24);
        assert!(is_corner_naive(&img, 4, 4, 24));
        assert!(!is_corner_naive(&img, 4, 4, 25));
        let c = detect(&img, 10, true);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].x, c[0].y, c[0].fast_score), (4, 4, 24));
    }
}
