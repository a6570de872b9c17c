//! Canny in bands of rows on a rayon pool (`cpu.threads`), the same edge map as
//! [`super::canny`]: each band classifies its rows from its own Sobel ring, then finds its
//! rows' seeds in the finished class map; one flood fill, the edges written by rows.

use std::ops::Range;

use super::hysteresis::{edge_rows, empty_stack, flood, push_seeds};
use super::{
    canny, nms_ring_row, prepare, reset_class, ring_buffers, sobel_into_ring, CannyScratch, Fused,
    Gradients,
};
use crate::config::CannyConfig;
use crate::image::GrayImage;

crate::cpu::simd::versions! {
    /// [`classify_rows`] at the process's SIMD level.
    fn classify_rows_versions(img: &GrayImage, f: &Fused, g: &mut Gradients, class: &mut [u8], rows: Range<usize>) = classify_rows;
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
/// finds its rows' seeds in the finished class map; the flood fill runs once over all
/// seeds (its result does not depend on their order), and the edge map is written by rows.
pub fn canny_banded(
    img: &GrayImage,
    cfg: &CannyConfig,
    out: &mut GrayImage,
    scratch: &mut CannyScratch,
    bands: usize,
) {
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
        .for_each(|(k, (c, (g, _, _)))| {
            let y0 = k * rows;
            classify_rows_versions(src, &f, g, c, y0..(y0 + rows).min(h));
        });
    let class_ref = &class[..];
    per.par_iter_mut()
        .enumerate()
        .for_each(|(k, (_, tmp, seeds))| {
            seeds.clear();
            let y0 = k * rows + 1;
            seeds_versions(class_ref, pw, y0..(y0 + rows).min(h + 1), tmp, seeds);
        });
    empty_stack(stack, w * h);
    for (_, _, seeds) in per.iter() {
        stack.extend_from_slice(seeds);
    }
    flood(w, h, class, stack);
    out.reshape(w, h);
    out.data
        .par_chunks_mut(rows * w)
        .enumerate()
        .for_each(|(k, o)| edge_rows(class, w, k * rows, o));
}

/// Sobel + NMS of image rows `rows` into `class`, the padded class rows of those rows
/// (row `y` at `(y - rows.start) * pw`): the Sobel ring starts from the row above the
/// first, so a band needs nothing of the others.
#[inline(always)]
fn classify_rows(
    img: &GrayImage,
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
