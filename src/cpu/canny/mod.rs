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

mod bands;
mod hysteresis;
mod sobel;

pub use self::bands::canny_banded;
pub use self::hysteresis::hysteresis;
use self::hysteresis::{empty_stack, flood, push_seeds, write_edges};
pub use self::sobel::{sobel_magnitude, Gradients};
use self::sobel::{sobel_row, zero_ring};
use super::blur::{gaussian_blur, BlurScratch};
use crate::config::CannyConfig;
use crate::image::{AsGray, Gray, GrayImage};

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
    /// Two scratch rows of the seed search of the hysteresis.
    seeds: Vec<u8>,
    /// [`canny_banded`]: each band's ring of gradients, seed rows, stack and border pixels.
    bands: Vec<bands::Band>,
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

super::simd::versions! {
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
    pub fn nms_classify(g: &Gradients, low: i32, high: i32, class: &mut Vec<u8>) = nms_classify_impl;
}

#[inline(always)]
fn nms_classify_impl(g: &Gradients, low: i32, high: i32, class: &mut Vec<u8>) {
    let (w, h, dx, dy, mag) = (g.width, g.height, &g.dx, &g.dy, &g.mag);
    let pw = w + 2;
    reset_class(class, w, h);
    for y in 0..h {
        nms_row(
            [
                &mag[y * pw..(y + 1) * pw],
                &mag[(y + 1) * pw..(y + 2) * pw],
                &mag[(y + 2) * pw..(y + 3) * pw],
            ],
            &dx[y * w..(y + 1) * w],
            &dy[y * w..(y + 1) * w],
            low,
            high,
            &mut class[(y + 1) * pw + 1..(y + 1) * pw + 1 + w],
        );
    }
}

/// One row of [`nms_classify`], branch-free so that it vectorises: `mags` are the padded
/// magnitude rows above, at and below (`w + 2` each), `out` the `w` classes of the row.
/// The direction class picks the two neighbours `a` (compared with `>`) and `b` (compared
/// with `>=` in the horizontal and vertical cases, `>` in the diagonal ones, i.e.
/// `m + 1 > b` or `m > b`: magnitudes are integers far below `i32::MAX`).
#[inline(always)]
fn nms_row(mags: [&[i32]; 3], dx: &[i16], dy: &[i16], low: i32, high: i32, out: &mut [u8]) {
    let w = out.len();
    let [up, mid, down] = mags;
    let (ul, uc, ur) = (&up[..w], &up[1..w + 1], &up[2..w + 2]);
    let (ml, mc, mr) = (&mid[..w], &mid[1..w + 1], &mid[2..w + 2]);
    let (dl, dc, dr) = (&down[..w], &down[1..w + 1], &down[2..w + 2]);
    let (dx, dy) = (&dx[..w], &dy[..w]);
    // Runs of NMS_SKIP pixels none of which is above `low` are class 0 whatever their
    // neighbours: one vector compare instead of the direction work.
    let mut x0 = 0;
    while x0 < w {
        let x1 = (x0 + NMS_SKIP).min(w);
        if x1 - x0 == NMS_SKIP && !above(&mc[x0..x1], low) {
            out[x0..x1].fill(0);
        } else {
            nms_span(
                x0..x1,
                [ul, uc, ur, ml, mc, mr, dl, dc, dr],
                dx,
                dy,
                low,
                high,
                out,
            );
        }
        x0 = x1;
    }
}

/// Pixels per run that [`nms_row`] skips when none is above `low`.
const NMS_SKIP: usize = 32;

/// Whether any of the `NMS_SKIP` magnitudes is above `low` (branch-free, vectorized).
#[inline(always)]
fn above(m: &[i32], low: i32) -> bool {
    let m: &[i32; NMS_SKIP] = m.try_into().unwrap();
    m.iter().fold(0, |acc, &v| acc | (v > low) as u32) != 0
}

/// [`nms_row`]'s classification of the pixels `xs`; `n`: the nine neighbour rows' slices
/// (up, middle, down; left, centre, right).
#[inline(always)]
fn nms_span(
    xs: std::ops::Range<usize>,
    n: [&[i32]; 9],
    dx: &[i16],
    dy: &[i16],
    low: i32,
    high: i32,
    out: &mut [u8],
) {
    let [ul, uc, ur, ml, mc, mr, dl, dc, dr] = n;
    for x in xs {
        let m = mc[x];
        let (xs, ys) = (dx[x] as i32, dy[x] as i32);
        // |xs|, |ys| <= 1020 (Sobel of 8-bit data): all products below fit i32.
        let ax = xs.wrapping_abs();
        let ay = ys.wrapping_abs() << CANNY_SHIFT;
        let tg22x = ax.wrapping_mul(TG22);
        // Direction masks (all ones / zero); horizontal and vertical exclude each other.
        let hm = -((ay < tg22x) as i32);
        let vm = -((ay > tg22x.wrapping_add(ax << (CANNY_SHIFT + 1))) as i32);
        let dm = !(hm | vm);
        // Diagonal neighbours: up at x - s, down at x + s (s = -1 when the signs differ).
        // Everything is blended with masks rather than picked by a data-dependent index,
        // so that the loop stays vectorised.
        let neg = (xs ^ ys) >> 31;
        let da = (ur[x] & neg) | (ul[x] & !neg);
        let db = (dl[x] & neg) | (dr[x] & !neg);
        let a = (ml[x] & hm) | (uc[x] & vm) | (da & dm);
        let b = (mr[x] & hm) | (dc[x] & vm) | (db & dm);
        // `m >= b` is `m + 1 > b` (magnitudes are far below i32::MAX).
        let ge = !dm & 1;
        let keep = (m > low) & (m > a) & (m.wrapping_add(ge) > b);
        out[x] = keep as u8 * (1 + (m > high) as u8);
    }
}

/// Writes the 0/255 edge map of `img` into `out` (reshaped): `cv::Canny(img, low, high, 3,
/// l2_gradient)`, after `cv::GaussianBlur` when `cfg.blur_ksize > 0`.
///
/// Same stages as [`sobel_magnitude`] + [`nms_classify`] + [`hysteresis`] (the same row
/// functions, so the same bits), fused row by row: Sobel rows go to a ring of three
/// magnitude rows, each row is classified as soon as the one below it is known, and its
/// strong pixels are pushed right away, so only the class map is image-sized.
pub fn canny(img: impl AsGray, cfg: &CannyConfig, out: &mut GrayImage, scratch: &mut CannyScratch) {
    let img = img.gray();
    let (w, h) = (img.width, img.height);
    if w == 0 || h == 0 {
        out.reshape(w, h);
        return;
    }
    let CannyScratch {
        blurred,
        blur,
        grad,
        class,
        stack,
        seeds,
        ..
    } = scratch;
    let (src, f) = prepare(img, cfg, blurred, blur);
    classify_versions(src, &f, grad, class, stack, seeds);
    flood(w, h, class, stack);
    write_edges(w, h, class, out);
}

/// Parameters of the fused classification.
struct Fused {
    l2: bool,
    low: i32,
    high: i32,
}

/// The image Canny's gradients are taken of (`img`, or its Gaussian blur into `blurred`
/// when `cfg.blur_ksize > 0`) and the classification's parameters.
fn prepare<'a>(
    img: Gray<'a>,
    cfg: &CannyConfig,
    blurred: &'a mut GrayImage,
    blur: &mut BlurScratch,
) -> (Gray<'a>, Fused) {
    let src = if cfg.blur_ksize > 0 {
        gaussian_blur(img, cfg.blur_ksize as usize, cfg.blur_sigma, blurred, blur);
        blurred.view()
    } else {
        img
    };
    let (low, high) = thresholds(cfg);
    let f = Fused {
        l2: cfg.l2_gradient,
        low,
        high,
    };
    (src, f)
}

/// The padded class map sized for a `w x h` image, its ring of padding [`NONE`].
fn reset_class(class: &mut Vec<u8>, w: usize, h: usize) {
    let pw = w + 2;
    class.resize(pw * (h + 2), NONE);
    zero_ring(class, pw, h + 2);
}

super::simd::versions! {
    /// [`classify_fused`] at the process's SIMD level.
    fn classify_versions(img: Gray<'_>, f: &Fused, g: &mut Gradients, class: &mut Vec<u8>, stack: &mut Vec<u32>, seeds: &mut Vec<u8>) = classify_fused;
}

/// The Sobel ring's buffers: 4 padded magnitude rows (slot 3 stays zero: the rows outside
/// the image), 2 rows of dx / dy, the scratch rows.
#[inline(always)]
fn ring_buffers(g: &mut Gradients, w: usize) {
    let pw = w + 2;
    g.mag.clear();
    g.mag.resize(4 * pw, 0);
    g.dx.resize(2 * w, 0);
    g.dy.resize(2 * w, 0);
    g.smooth.resize(pw, 0);
    g.diff.resize(pw, 0);
    // The ring holds no full-image data: mark the gradients as not of this image.
    g.width = 0;
    g.height = 0;
}

/// NMS of image row `y` from the ring (rows `y - 1 ..= y + 1` in it) into the padded
/// class row `crow`.
#[inline(always)]
fn nms_ring_row(g: &Gradients, w: usize, h: usize, y: usize, f: &Fused, crow: &mut [u8]) {
    let pw = w + 2;
    let slot = |r: Option<usize>| r.map_or(3, |r| r % 3) * pw;
    let (su, sm, sd) = (
        slot(y.checked_sub(1)),
        slot(Some(y)),
        slot((y + 1 < h).then_some(y + 1)),
    );
    let half = y % 2;
    nms_row(
        [
            &g.mag[su..su + pw],
            &g.mag[sm..sm + pw],
            &g.mag[sd..sd + pw],
        ],
        &g.dx[half * w..(half + 1) * w],
        &g.dy[half * w..(half + 1) * w],
        f.low,
        f.high,
        &mut crow[1..w + 1],
    );
}

/// Row `y`'s Sobel into [`classify_fused`]'s ring (a function, not a closure: a closure
/// called twice was not inlined, so it ran without the SIMD level's instructions).
#[inline(always)]
fn sobel_into_ring(img: Gray<'_>, l2: bool, g: &mut Gradients, y: usize) {
    let (w, h) = (img.width, img.height);
    let pw = w + 2;
    let rows = [
        img.row(y.saturating_sub(1)),
        img.row(y),
        img.row((y + 1).min(h - 1)),
        img.rows_from(y + 3),
    ];
    let (slot, half) = (y % 3, y % 2);
    sobel_row(
        rows,
        l2,
        &mut g.smooth,
        &mut g.diff,
        &mut g.dx[half * w..(half + 1) * w],
        &mut g.dy[half * w..(half + 1) * w],
        &mut g.mag[slot * pw + 1..slot * pw + 1 + w],
    );
}

/// Sobel + NMS row by row into `s.class` (padded), pushing strong pixels onto `s.stack`.
#[inline(always)]
fn classify_fused(
    img: Gray<'_>,
    f: &Fused,
    g: &mut Gradients,
    class: &mut Vec<u8>,
    stack: &mut Vec<u32>,
    seeds: &mut Vec<u8>,
) {
    let (w, h) = (img.width, img.height);
    let pw = w + 2;
    reset_class(class, w, h);
    empty_stack(stack, w * h);
    ring_buffers(g, w);
    sobel_into_ring(img, f.l2, g, 0);
    for y in 0..h {
        if y + 1 < h {
            sobel_into_ring(img, f.l2, g, y + 1);
        }
        nms_ring_row(g, w, h, y, f, &mut class[(y + 1) * pw..(y + 2) * pw]);
        // Padded row y (image row y - 1) has both its neighbours rows now.
        if y >= 1 {
            push_seeds(class, pw, y, seeds, stack);
        }
    }
    push_seeds(class, pw, h, seeds, stack);
}

#[cfg(test)]
mod tests {
    use super::sobel::sobel_magnitude_impl;
    use super::*;

    /// Few levels: long edges and ties between neighbours.
    fn noise(w: usize, h: usize, seed: u64) -> GrayImage {
        crate::cpu::test_util::xorshift_image(w, h, &mut (seed | 1), |s| {
            ((s >> 24) % 3 * 100) as u8
        })
    }

    /// The fused `canny` equals the three public stages run one after the other, and the
    /// portable (non-AVX2) versions of every stage give the same bits as the dispatched ones.
    #[test]
    fn bands_give_the_same_edges() {
        for (w, h, seed) in [(64, 48, 3), (97, 131, 5), (33, 2, 7), (200, 150, 9)] {
            let img = noise(w, h, seed);
            for cfg in [
                CannyConfig::default(),
                CannyConfig {
                    l2_gradient: false,
                    low_threshold: 20.0,
                    high_threshold: 90.0,
                    blur_ksize: 5,
                    ..CannyConfig::default()
                },
            ] {
                let (mut want, mut s) = (GrayImage::default(), CannyScratch::default());
                canny(&img, &cfg, &mut want, &mut s);
                assert!(want.data.contains(&255), "{w}x{h}");
                for bands in [2, 3, 7, 64, 1000] {
                    let mut got = GrayImage::default();
                    canny_banded(&img, &cfg, &mut got, &mut s, bands);
                    assert!(got == want, "{w}x{h} {cfg:?} bands {bands}");
                }
            }
        }
    }

    #[test]
    fn fused_and_portable_paths_match_stages() {
        for (i, &(w, h)) in [(1, 1), (1, 6), (6, 1), (2, 2), (9, 13), (64, 40), (77, 51)]
            .iter()
            .enumerate()
        {
            let img = noise(w, h, 3 + i as u64);
            for l2 in [false, true] {
                for (lo, hi) in [(20.0, 60.0), (0.0, 0.0), (100.0, 300.0)] {
                    let cfg = CannyConfig {
                        enabled: true,
                        low_threshold: lo,
                        high_threshold: hi,
                        l2_gradient: l2,
                        blur_ksize: 0,
                        blur_sigma: 0.0,
                    };
                    let (low, high) = thresholds(&cfg);
                    let mut fused = GrayImage::default();
                    canny(&img, &cfg, &mut fused, &mut CannyScratch::default());

                    let mut g = Gradients::default();
                    sobel_magnitude(img.view(), l2, &mut g);
                    let mut g2 = Gradients::default();
                    sobel_magnitude_impl(img.view(), l2, &mut g2);
                    assert_eq!((&g.dx, &g.dy, &g.mag), (&g2.dx, &g2.dy, &g2.mag));
                    let (mut c, mut c2) = (Vec::new(), Vec::new());
                    nms_classify(&g, low, high, &mut c);
                    nms_classify_impl(&g, low, high, &mut c2);
                    assert_eq!(c, c2);
                    let mut staged = GrayImage::default();
                    hysteresis(w, h, &mut c, &mut Vec::new(), &mut staged);
                    assert_eq!(fused, staged, "{w}x{h} l2={l2} {lo}/{hi}");

                    let (mut g3, mut c3, mut st, mut sd) =
                        (Gradients::default(), Vec::new(), Vec::new(), Vec::new());
                    let f = Fused { l2, low, high };
                    classify_fused(img.view(), &f, &mut g3, &mut c3, &mut st, &mut sd);
                    flood(w, h, &mut c3, &mut st);
                    let mut portable = GrayImage::default();
                    write_edges(w, h, &c3, &mut portable);
                    assert_eq!(fused, portable, "{w}x{h} l2={l2} {lo}/{hi}");
                }
            }
        }
    }
}
