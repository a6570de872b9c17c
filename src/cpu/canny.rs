//! Canny edges (CPU reference for `kernels/canny.cu`), identical to
//! `cv::Canny(img, low, high, 3, L2gradient)`, optionally after
//! `cv::GaussianBlur(img, (k, k), sigma)` (see [`super::blur`]).
//!
//! Stages, each a pub fn the GPU twin mirrors:
//! 1. [`thresholds`]: OpenCV's integer thresholds from the float config.
//! 2. [`sobel_magnitude`]: 3x3 Sobel (replicated border) and the integer magnitude.
//! 3. [`nms_classify`]: non-maximum suppression + double threshold into
//!    [`NONE`] / [`WEAK`] / [`STRONG`].
//! 4. [`hysteresis`]: every weak pixel 8-connected (through weak pixels) to a strong one
//!    becomes strong; the strong set is the edge map.
//!
//! Magnitudes and classes live in "padded" buffers: `(width + 2) x (height + 2)`, with a
//! one-pixel ring of magnitude 0 / class [`NONE`] around the image. This is how OpenCV
//! treats pixels on the image border: their missing neighbours have magnitude 0 in the NMS,
//! and the flood fill can never leave the image.

use super::blur::{gaussian_blur, BlurScratch};
use crate::config::CannyConfig;
use crate::image::GrayImage;

/// Class of a pixel that cannot be an edge (also the padding ring).
pub const NONE: u8 = 0;
/// Passed NMS with `low < m <= high`: an edge only if connected to a strong pixel.
pub const WEAK: u8 = 1;
/// Passed NMS with `m > high` (or reached by hysteresis): an edge.
pub const STRONG: u8 = 2;

/// `round(tan(22.5 deg) * 2^15)`, OpenCV's fixed-point direction constant.
pub const TG22: i32 = 13573;
const CANNY_SHIFT: u32 = 15;

/// Reusable buffers (gradients, magnitudes, classes, stack); sized on the first frame of a
/// resolution and never reallocated afterwards.
#[derive(Default)]
pub struct CannyScratch {
    blurred: GrayImage,
    blur: BlurScratch,
    grad: Gradients,
    /// Classes, padded.
    class: Vec<u8>,
    /// Flood-fill stack of padded indices; capacity `width * height` (each pixel is pushed
    /// at most once), so it never grows mid-frame.
    stack: Vec<u32>,
}

/// Output of [`sobel_magnitude`], input of [`nms_classify`].
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
    smooth: Vec<i32>,
    diff: Vec<i32>,
}

/// `cvFloor`, saturated to the `i32` range. Only an L1 threshold can get there (L2 ones are
/// clamped to 32767 first), and any value above the largest magnitude (2040) gives no edge:
/// that is what OpenCV does with the golden generator's settings (IPP, one thread). Its
/// plain C++ path instead wraps such a threshold to `i32::MIN`, making every NMS survivor an
/// edge; we do not copy that overflow.
fn cv_floor(v: f64) -> i32 {
    // `as` saturates (and maps NaN to 0, which config validation rules out anyway).
    v.floor() as i32
}

/// OpenCV's integer `(low, high)`: swapped if `low > high`; for L2 each is clamped to 32767
/// and squared when positive; then floored. A pixel passes a threshold with `m > t`, so
/// `m > floor(t)` is exact for integer magnitudes.
pub fn thresholds(cfg: &CannyConfig) -> (i32, i32) {
    let (mut lo, mut hi) = (cfg.low_threshold, cfg.high_threshold);
    if lo > hi {
        std::mem::swap(&mut lo, &mut hi);
    }
    if cfg.l2_gradient {
        lo = lo.min(32767.0);
        hi = hi.min(32767.0);
        if lo > 0.0 {
            lo *= lo;
        }
        if hi > 0.0 {
            hi *= hi;
        }
    }
    (cv_floor(lo), cv_floor(hi))
}

/// 3x3 Sobel (`[-1 0 1] x [1 2 1]` and its transpose, `BORDER_REPLICATE`, exact in `i16`)
/// into `dx`, `dy` (`width * height`) and the magnitude into the padded `mag`:
/// `|dx| + |dy|` (L1) or `dx^2 + dy^2` (L2, not square-rooted; thresholds are squared).
/// `mag` is resized and its padding ring zeroed here. `img` must not be empty.
pub fn sobel_magnitude(img: &GrayImage, l2: bool, g: &mut Gradients) {
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
    mag.clear();
    mag.resize(pw * (h + 2), 0);
    smooth.resize(pw, 0);
    diff.resize(pw, 0);
    for y in 0..h {
        let up = img.row(y.saturating_sub(1));
        let mid = img.row(y);
        let down = img.row((y + 1).min(h - 1));
        // Vertical pass: [1 2 1] for dx, [-1 0 1] for dy, at padded column x + 1.
        for x in 0..w {
            let (a, b, c) = (up[x] as i32, mid[x] as i32, down[x] as i32);
            smooth[x + 1] = a + 2 * b + c;
            diff[x + 1] = c - a;
        }
        // Replicated border columns.
        smooth[0] = smooth[1];
        smooth[w + 1] = smooth[w];
        diff[0] = diff[1];
        diff[w + 1] = diff[w];
        let drow = &mut dx[y * w..(y + 1) * w];
        let erow = &mut dy[y * w..(y + 1) * w];
        let mrow = &mut mag[(y + 1) * pw + 1..(y + 1) * pw + 1 + w];
        let s3 = smooth.windows(3);
        let d3 = diff.windows(3);
        for ((((gx, gy), m), s), d) in drow.iter_mut().zip(erow).zip(mrow).zip(s3).zip(d3) {
            let vx = s[2] - s[0];
            let vy = d[0] + 2 * d[1] + d[2];
            *gx = vx as i16;
            *gy = vy as i16;
            *m = if l2 {
                vx * vx + vy * vy
            } else {
                vx.abs() + vy.abs()
            };
        }
    }
}

/// Non-maximum suppression and double threshold into the padded `class` map (resized, ring
/// set to [`NONE`]). A pixel with `m > low` is compared with its two neighbours across the
/// gradient direction, chosen in fixed point (`ax = |dx|`, `ay = |dy| << 15`):
/// - `ay < ax * TG22` (within 22.5 deg of horizontal): left / right,
///   kept if `m > left && m >= right`;
/// - `ay > ax * TG22 + (ax << 16)` (within 22.5 deg of vertical): up / down,
///   kept if `m > up && m >= down`;
/// - else diagonal: with `s = -1` if `dx` and `dy` have opposite signs, else `1`, the
///   neighbours are up at `x - s` and down at `x + s`, kept if `m > both` (strict both ways).
///
/// Neighbours outside the image have magnitude 0. A kept pixel is [`STRONG`] if
/// `m > high`, else [`WEAK`]; all others are [`NONE`].
///
/// (OpenCV marks a strong pixel weak when its left or upper neighbour is already strong;
/// hysteresis promotes it anyway, so the edge map is the same.)
pub fn nms_classify(g: &Gradients, low: i32, high: i32, class: &mut Vec<u8>) {
    let (w, h, dx, dy, mag) = (g.width, g.height, &g.dx, &g.dy, &g.mag);
    let pw = w + 2;
    class.clear();
    class.resize(pw * (h + 2), NONE);
    for y in 0..h {
        let up = &mag[y * pw..(y + 1) * pw];
        let mid = &mag[(y + 1) * pw..(y + 2) * pw];
        let down = &mag[(y + 2) * pw..(y + 3) * pw];
        let gx = &dx[y * w..(y + 1) * w];
        let gy = &dy[y * w..(y + 1) * w];
        let crow = &mut class[(y + 1) * pw + 1..(y + 1) * pw + 1 + w];
        for x in 0..w {
            // Padded column of pixel x.
            let j = x + 1;
            let m = mid[j];
            if m <= low {
                continue;
            }
            let (xs, ys) = (gx[x] as i32, gy[x] as i32);
            let ax = xs.abs();
            let ay = ys.abs() << CANNY_SHIFT;
            let tg22x = ax * TG22;
            let keep = if ay < tg22x {
                m > mid[j - 1] && m >= mid[j + 1]
            } else if ay > tg22x + (ax << (CANNY_SHIFT + 1)) {
                m > up[j] && m >= down[j]
            } else if (xs ^ ys) < 0 {
                m > up[j + 1] && m > down[j - 1]
            } else {
                m > up[j - 1] && m > down[j + 1]
            };
            if keep {
                crow[x] = if m > high { STRONG } else { WEAK };
            }
        }
    }
}

/// Hysteresis with exact connectivity: a depth-first flood fill from every [`STRONG`]
/// pixel through 8-connected [`WEAK`] ones (promoted to `STRONG` when pushed, so each pixel
/// is pushed once). Then writes `out` (`w x h`): 255 where `STRONG`, else 0.
pub fn hysteresis(w: usize, h: usize, class: &mut [u8], stack: &mut Vec<u32>, out: &mut GrayImage) {
    let pw = w + 2;
    stack.clear();
    if stack.capacity() < w * h {
        stack.reserve(w * h);
    }
    for y in 1..=h {
        let row = &class[y * pw + 1..y * pw + 1 + w];
        for (x, &c) in row.iter().enumerate() {
            if c == STRONG {
                stack.push((y * pw + 1 + x) as u32);
            }
        }
    }
    let offsets = [
        -(pw as isize) - 1,
        -(pw as isize),
        -(pw as isize) + 1,
        -1,
        1,
        pw as isize - 1,
        pw as isize,
        pw as isize + 1,
    ];
    while let Some(i) = stack.pop() {
        for &o in &offsets {
            // The NONE ring keeps every neighbour index inside `class`.
            let n = (i as isize + o) as usize;
            if class[n] == WEAK {
                class[n] = STRONG;
                stack.push(n as u32);
            }
        }
    }
    out.reshape(w, h);
    for y in 0..h {
        let src = &class[(y + 1) * pw + 1..(y + 1) * pw + 1 + w];
        for (o, &c) in out.row_mut(y).iter_mut().zip(src) {
            *o = if c == STRONG { 255 } else { 0 };
        }
    }
}

/// Writes the 0/255 edge map of `img` into `out` (reshaped): `cv::Canny(img, low, high, 3,
/// l2_gradient)`, after `cv::GaussianBlur` when `cfg.blur_ksize > 0`.
pub fn canny(img: &GrayImage, cfg: &CannyConfig, out: &mut GrayImage, scratch: &mut CannyScratch) {
    let (w, h) = (img.width, img.height);
    if w == 0 || h == 0 {
        out.reshape(w, h);
        return;
    }
    let s = scratch;
    let src = if cfg.blur_ksize > 0 {
        gaussian_blur(
            img,
            cfg.blur_ksize as usize,
            cfg.blur_sigma,
            &mut s.blurred,
            &mut s.blur,
        );
        &s.blurred
    } else {
        img
    };
    sobel_magnitude(src, cfg.l2_gradient, &mut s.grad);
    let (low, high) = thresholds(cfg);
    nms_classify(&s.grad, low, high, &mut s.class);
    hysteresis(w, h, &mut s.class, &mut s.stack, out);
}
