//! Canny in bands of rows on a rayon pool (`cpu.threads`), the same edge map as
//! [`super::canny`]: each band classifies its rows from its own Sobel ring, then finds its
//! rows' seeds in the finished class map and floods inside its own rows; one flood over
//! the whole map from the bands' first and last rows joins them; the edges written by rows.

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
    /// [`push_seeds`] of padded rows `rows` at the process's SIMD level.
    fn seeds_versions(class: &[u8], pw: usize, rows: Range<usize>, tmp: &mut Vec<u8>, stack: &mut Vec<u32>) = push_seed_rows;
}

#[inline(always)]
fn push_seed_rows(
    class: &[u8],
    pw: usize,
    rows: Range<usize>,
    tmp: &mut Vec<u8>,
    stack: &mut Vec<u32>,
) {
    for y in rows {
        push_seeds(class, pw, y, tmp, stack);
    }
}

/// [`canny`] in `bands` bands of rows on the current rayon pool, the same edge map: each
/// band classifies its rows (its own Sobel ring, from the row above it), then each band
/// finds its rows' seeds in the finished class map and floods inside its rows
/// ([`flood_band`]); one flood over the whole map from the bands' first and last rows joins
/// them (the result does not depend on the order), and the edge map is written by rows.
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
        });
    let class_ref = &class[..];
    per.par_iter_mut().enumerate().for_each(|(k, b)| {
        // Each pixel is pushed once: the band's pixels bound its stack.
        empty_stack(&mut b.stack, rows * w);
        let y0 = k * rows + 1;
        seeds_versions(
            class_ref,
            pw,
            y0..(y0 + rows).min(h + 1),
            &mut b.tmp,
            &mut b.stack,
        );
        let base = (y0 * pw) as u32;
        for i in b.stack.iter_mut() {
            *i -= base;
        }
    });
    class[pw..(h + 1) * pw]
        .par_chunks_mut(rows * pw)
        .zip(per.par_iter_mut())
        .for_each(|(c, b)| flood_band(c, pw, &mut b.stack, &mut b.border));
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
