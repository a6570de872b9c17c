//! FAST in bands of rows on the current rayon pool: the same corners in the same order as
//! one pass (`detect`), each band's buffers kept between calls.

use super::{detect_rows, tested_rows, FastScratch};
use crate::image::AsGray;
use crate::select::Corner;

/// The buffers of [`detect_banded_into`]: each band's suppression rows and corners.
#[derive(Default)]
pub struct BandScratch {
    bands: Vec<(FastScratch, Vec<Corner>)>,
}

/// [`super::detect`] on the current rayon pool in `bands` bands of rows, the same corners
/// in the same order.
pub fn detect_banded(
    img: impl AsGray,
    threshold: u8,
    nonmax_suppression: bool,
    bands: usize,
) -> Vec<Corner> {
    let mut out = Vec::new();
    let scratch = &mut BandScratch::default();
    detect_banded_into(img, threshold, nonmax_suppression, bands, scratch, &mut out);
    out
}

/// [`detect_banded`] into `out` (cleared first), in `scratch`'s buffers: each band scans
/// one row more on each side for its suppression and keeps its own rows' corners, and the
/// bands are joined in order. No allocation once the buffers have grown.
pub fn detect_banded_into(
    img: impl AsGray,
    threshold: u8,
    nonmax_suppression: bool,
    bands: usize,
    scratch: &mut BandScratch,
    out: &mut Vec<Corner>,
) {
    use rayon::prelude::*;
    let img = img.gray();
    out.clear();
    let Some(tested) = tested_rows(img) else {
        return;
    };
    let rows = tested.len();
    let per = rows.div_ceil(bands.clamp(1, rows));
    let n = rows.div_ceil(per);
    if scratch.bands.len() < n {
        scratch.bands.resize_with(n, Default::default);
    }
    scratch.bands[..n]
        .par_iter_mut()
        .enumerate()
        .for_each(|(b, (fast, corners))| {
            let y0 = tested.start + b * per;
            corners.clear();
            let ys = y0..(y0 + per).min(tested.end);
            detect_rows(img, threshold, nonmax_suppression, ys, fast, corners);
        });
    for (_, corners) in &scratch.bands[..n] {
        out.extend_from_slice(corners);
    }
}
