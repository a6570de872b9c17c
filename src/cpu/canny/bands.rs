//! Canny in bands of rows on a rayon pool (`cpu.threads`), the same edge map as
//! [`super::canny`]: each band classifies its rows from its own Sobel ring, finds its seeds
//! and floods inside its own rows, in one pass; one flood over the whole map from the
//! bands' first and last rows joins them; the edges written by rows.

use std::ops::Range;

use super::hysteresis::{edge_rows, empty_stack, flood, push_seeds};
use super::{
    canny, nms_ring_row, prepare, reset_class, ring_buffers, sobel_into_ring, CannyScratch, Fused,
    Gradients, STRONG, WEAK,
};
use crate::config::CannyConfig;
use crate::image::{AsGray, Gray, GrayImage};

crate::cpu::simd::versions! {
    /// [`classify_rows`] at the process's SIMD level.
    fn classify_rows_versions(img: Gray<'_>, f: &Fused, g: &mut Gradients, class: &mut [u8], rows: Range<usize>) = classify_rows;
}

/// One band's scratch in [`canny_banded`].
#[derive(Default)]
pub(super) struct Band {
    grad: Gradients,
    /// The seed search's scratch rows.
    tmp: Vec<u8>,
    /// The band's flood-fill stack (band-local padded indices).
    stack: Vec<u32>,
    /// Strong pixels of the band's first and last rows (band-local): where the flood
    /// continues into the neighbouring bands.
    border: Vec<u32>,
}

crate::cpu::simd::versions! {
    /// [`push_band_seeds`] at the process's SIMD level.
    fn band_seeds_versions(c: &[u8], pw: usize, tmp: &mut Vec<u8>, stack: &mut Vec<u32>) = push_band_seeds;
}

/// The flood's seeds in one band's padded class rows `c` (band-local indices): every
/// [`STRONG`] pixel of its first and last rows, whose neighbours in the next band are not
/// known yet, and the [`push_seeds`] of the rows between (their neighbours are all in `c`).
/// Starting from more strong pixels fills the same set; each still goes on the stack once.
#[inline(always)]
fn push_band_seeds(c: &[u8], pw: usize, tmp: &mut Vec<u8>, stack: &mut Vec<u32>) {
    let n = c.len() / pw;
    let strong_of = |y: usize, stack: &mut Vec<u32>| {
        for (x, &v) in c[y * pw..(y + 1) * pw].iter().enumerate() {
            if v == STRONG {
                stack.push((y * pw + x) as u32);
            }
        }
    };
    strong_of(0, stack);
    for y in 1..n.saturating_sub(1) {
        push_seeds(c, pw, y, tmp, stack);
    }
    if n > 1 {
        strong_of(n - 1, stack);
    }
}

/// [`canny`] in `bands` bands of rows on the current rayon pool, the same edge map: each
/// band classifies its rows (its own Sobel ring, from the row above it), finds its seeds
/// (`push_band_seeds`) and floods inside its rows (`flood_band`), all in one pass with
/// no wait between the bands; one flood over the whole map from the strong pixels of the
/// bands' first and last rows joins them (the result does not depend on the order), and the
/// edge map is written by rows.
pub fn canny_banded(
    img: impl AsGray,
    cfg: &CannyConfig,
    out: &mut GrayImage,
    scratch: &mut CannyScratch,
    bands: usize,
) {
    let img = img.gray();
    use rayon::prelude::*;
    let (w, h) = (img.width, img.height);
    let bands = bands.clamp(1, h.max(1));
    if w == 0 || h == 0 || bands == 1 {
        return canny(img, cfg, out, scratch);
    }
    let CannyScratch {
        blurred,
        blur,
        class,
        stack,
        bands: per,
        ..
    } = scratch;
    let (src, f) = prepare(img, cfg, blurred, blur);
    let pw = w + 2;
    reset_class(class, w, h);
    let rows = h.div_ceil(bands);
    per.resize_with(h.div_ceil(rows), Default::default);
    // Image row y is padded row y + 1: band k's rows start at padded row k * rows + 1.
    class[pw..(h + 1) * pw]
        .par_chunks_mut(rows * pw)
        .zip(per.par_iter_mut())
        .enumerate()
        .for_each(|(k, (c, b))| {
            let y0 = k * rows;
            classify_rows_versions(src, &f, &mut b.grad, c, y0..(y0 + rows).min(h));
            // Each pixel is pushed once: the band's pixels bound its stack.
            empty_stack(&mut b.stack, c.len());
            band_seeds_versions(c, pw, &mut b.tmp, &mut b.stack);
            flood_band(c, pw, &mut b.stack, &mut b.border);
        });
    empty_stack(stack, w * h);
    for (k, b) in per.iter().enumerate() {
        let base = ((k * rows + 1) * pw) as u32;
        stack.extend(b.border.iter().map(|&i| i + base));
    }
    flood(w, h, class, stack);
    out.reshape(w, h);
    out.data
        .par_chunks_mut(rows * w)
        .enumerate()
        .for_each(|(k, o)| edge_rows(class, w, k * rows, o));
}

/// [`flood`] inside one band: `c` is the band's padded class rows (`pw` each, the padding
/// columns [`NONE`](super::NONE)), `stack` its seeds (band-local indices). Neighbours in
/// the rows above and below the band are not looked at: the band's pixels of its first and
/// last rows that end up strong go to `border`, from which the whole-map flood goes on.
fn flood_band(c: &mut [u8], pw: usize, stack: &mut Vec<u32>, border: &mut Vec<u32>) {
    border.clear();
    let last = c.len() - pw;
    let grow = |c: &mut [u8], n: usize, stack: &mut Vec<u32>| {
        if c[n] == WEAK {
            c[n] = STRONG;
            stack.push(n as u32);
        }
    };
    while let Some(i) = stack.pop() {
        let i = i as usize;
        let (top, bottom) = (i < pw, i >= last);
        if top || bottom {
            border.push(i as u32);
        }
        // The padding columns keep i - 1 and i + 1 (and the diagonals) inside the row.
        grow(c, i - 1, stack);
        grow(c, i + 1, stack);
        if !top {
            for n in i - pw - 1..=i - pw + 1 {
                grow(c, n, stack);
            }
        }
        if !bottom {
            for n in i + pw - 1..=i + pw + 1 {
                grow(c, n, stack);
            }
        }
    }
}

/// Sobel + NMS of image rows `rows` into `class`, the padded class rows of those rows
/// (row `y` at `(y - rows.start) * pw`): the Sobel ring starts from the row above the
/// first, so a band needs nothing of the others.
#[inline(always)]
fn classify_rows(
    img: Gray<'_>,
    f: &Fused,
    g: &mut Gradients,
    class: &mut [u8],
    rows: Range<usize>,
) {
    let (w, h) = (img.width, img.height);
    let pw = w + 2;
    ring_buffers(g, w);
    if rows.start > 0 {
        sobel_into_ring(img, f.l2, g, rows.start - 1);
    }
    sobel_into_ring(img, f.l2, g, rows.start);
    for y in rows.clone() {
        if y + 1 < h {
            sobel_into_ring(img, f.l2, g, y + 1);
        }
        let crow = &mut class[(y - rows.start) * pw..(y - rows.start + 1) * pw];
        nms_ring_row(g, w, h, y, f, crow);
    }
}
