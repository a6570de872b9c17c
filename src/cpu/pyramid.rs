//! Image pyramid (CPU reference for `kernels/pyramid.cu`).
//!
//! Level `i` is `cv::resize(level i-1, level_size(.., i))`, as OpenCV's ORB builds it: each
//! level from the previous one, to the size ORB derives from level 0.
//!
//! Exactness (checked by `tests/exact_pyramid_orb.rs` against OpenCV 5.0 goldens, and against
//! `cv2.resize` on random images of 2..1920 columns, down- and up-scaling):
//! - [`Interpolation::LinearExact`]: bit-exact with `INTER_LINEAR_EXACT` (8-bit fractional
//!   weights computed in double, `(sum + 2^15) >> 16` rounding).
//! - [`Interpolation::Linear`]: bit-exact with `INTER_LINEAR` on 8-bit images. OpenCV's
//!   scalar formula, `(b0*beta0 + b1*beta1 + 2^21) >> 22`, is *not* what it runs: its SIMD
//!   vertical pass (`VResizeLinearVec_32s8u`) drops 4 bits of each horizontal sum, keeps the
//!   high half of each 16x16-bit product and rounds with `(. + 2) >> 2`, which differs from
//!   the scalar formula by 1 on ~10% of pixels. OpenCV 5 (x86-64 wheels) uses that path for
//!   every pixel, row tails included, so this module uses it everywhere too.

use crate::config::Interpolation;
use crate::image::GrayImage;

/// ORB's `layerScale[level]` = `(float)pow((double)scale_factor, level)`: level coordinates
/// times this are level-0 coordinates. `cv::ORB::create` takes the factor as a `float`, so
/// 1.2 is widened from `1.2f` (1.2000000477), not the double 1.2: from level 3 on the two
/// give different `f32` scales, and rarely different level sizes (a 324-px side is 187 px
/// at level 3 in ORB, 188 with the double).
pub fn level_scale(scale_factor: f32, level: usize) -> f32 {
    (scale_factor as f64).powf(level as f64) as f32
}

/// ORB's size of `level`: `(cvRound(w0 * s), cvRound(h0 * s))` with
/// `s = 1.f / layerScale[level]`, all in `f32`, rounding half to even.
pub fn level_size(w0: usize, h0: usize, scale_factor: f32, level: usize) -> (usize, usize) {
    let s = 1.0f32 / level_scale(scale_factor, level);
    let r = |n: usize| (n as f32 * s).round_ties_even() as usize;
    (r(w0), r(h0))
}

/// Fills `levels[1..n]` from `levels[0]` (grows/shrinks the vector, reusing buffers).
pub fn build(
    levels: &mut Vec<GrayImage>,
    n: usize,
    scale_factor: f32,
    interpolation: Interpolation,
) {
    let n = n.max(1);
    levels.resize_with(n, GrayImage::default);
    let (w0, h0) = (levels[0].width, levels[0].height);
    for i in 1..n {
        let (w, h) = level_size(w0, h0, scale_factor, i);
        let (done, rest) = levels.split_at_mut(i);
        rest[0].reshape(w, h);
        resize_linear(&done[i - 1], &mut rest[0], interpolation);
    }
}

/// One axis of a bilinear resize: destination index `d` reads source samples `offsets[d]`
/// and `min(offsets[d] + 1, n - 1)` with weights `weights[d]` (the second weight is 0 when
/// the first tap is the last sample). Weights sum to `ResizeTables::one()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AxisTable {
    pub offsets: Vec<u32>,
    pub weights: Vec<[u16; 2]>,
}

/// Per-column and per-row taps of one resize; the GPU host uploads these same tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResizeTables {
    pub interpolation: Interpolation,
    pub x: AxisTable,
    pub y: AxisTable,
}

impl ResizeTables {
    pub fn new(
        src_w: usize,
        src_h: usize,
        dst_w: usize,
        dst_h: usize,
        interpolation: Interpolation,
    ) -> Self {
        ResizeTables {
            interpolation,
            x: axis_table(src_w, dst_w, interpolation),
            y: axis_table(src_h, dst_h, interpolation),
        }
    }

    /// Fixed-point one: 2^11 (`Linear`) or 2^8 (`LinearExact`).
    pub fn one(interpolation: Interpolation) -> u16 {
        match interpolation {
            Interpolation::Linear => 1 << 11,
            Interpolation::LinearExact => 1 << 8,
        }
    }
}

fn axis_table(src: usize, dst: usize, interpolation: Interpolation) -> AxisTable {
    let mut t = AxisTable {
        offsets: Vec::with_capacity(dst),
        weights: Vec::with_capacity(dst),
    };
    if src == 0 || dst == 0 {
        return t;
    }
    // OpenCV: inv_scale = dst / src, then scale = 1 / inv_scale (not src / dst).
    let scale = 1.0 / (dst as f64 / src as f64);
    let last = src as i64 - 1;
    for d in 0..dst {
        let (i0, w) = match interpolation {
            Interpolation::Linear => {
                // The fraction is taken in float; each weight is cvRound(. * 2^11) on its own.
                let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
                let i = f.floor();
                let (i, f) = clamp_tap(i as i64, f - i, last);
                let w0 = ((1.0 - f) * 2048.0).round_ties_even() as u16;
                (i, [w0, (f * 2048.0).round_ties_even() as u16])
            }
            Interpolation::LinearExact => {
                // softdouble fraction, rounded to 8 fractional bits; w0 = 1 - w1 exactly.
                let f = (d as f64 + 0.5) * scale - 0.5;
                let i = f.floor();
                let (i, f) = clamp_tap(i as i64, f - i, last);
                let w1 = (f * 256.0).round_ties_even() as u16;
                (i, [256 - w1, w1])
            }
        };
        t.offsets.push(i0 as u32);
        t.weights.push(w);
    }
    t
}

/// Left of the first sample and at/after the last one, OpenCV replicates the edge sample.
fn clamp_tap<F: Default>(i: i64, f: F, last: i64) -> (i64, F) {
    if i < 0 {
        (0, F::default())
    } else if i >= last {
        (last, F::default())
    } else {
        (i, f)
    }
}

/// `cv::resize(src, dst, dst.size(), 0, 0, INTER_LINEAR | INTER_LINEAR_EXACT)` for 8-bit
/// gray; the destination size is `dst.width x dst.height` (see the module doc for exactness).
pub fn resize_linear(src: &GrayImage, dst: &mut GrayImage, interpolation: Interpolation) {
    let t = ResizeTables::new(src.width, src.height, dst.width, dst.height, interpolation);
    resize_with_tables(src, dst, &t);
}

/// [`resize_linear`] with precomputed tables (`tables` must match both sizes).
pub fn resize_with_tables(src: &GrayImage, dst: &mut GrayImage, tables: &ResizeTables) {
    let (dw, dh) = (dst.width, dst.height);
    assert_eq!(tables.x.offsets.len(), dw, "resize tables: width mismatch");
    assert_eq!(tables.y.offsets.len(), dh, "resize tables: height mismatch");
    if dw == 0 || dh == 0 {
        return;
    }
    assert!(src.width > 0 && src.height > 0, "resize of an empty image");
    // Horizontal sums of the two source rows the current destination row needs; rows are
    // shared between consecutive destination rows, so keep the last two.
    let mut cache: [(usize, Vec<u32>); 2] = [(usize::MAX, vec![0; dw]), (usize::MAX, vec![0; dw])];
    let last_row = src.height - 1;
    for dy in 0..dh {
        let y0 = tables.y.offsets[dy] as usize;
        let y1 = (y0 + 1).min(last_row);
        // Downscaling, this row's y0 is often the previous row's y1.
        if cache[0].0 != y0 && cache[1].0 == y0 {
            cache.swap(0, 1);
        }
        for (slot, want) in [(0, y0), (1, y1)] {
            if cache[slot].0 != want {
                hpass(src.row(want), &tables.x, &mut cache[slot].1);
                cache[slot].0 = want;
            }
        }
        let [b0, b1] = tables.y.weights[dy];
        let (r0, r1) = (&cache[0].1, &cache[1].1);
        let out = dst.row_mut(dy);
        match tables.interpolation {
            Interpolation::Linear => {
                let (b0, b1) = (b0 as u32, b1 as u32);
                for x in 0..dw {
                    // OpenCV's SIMD vertical pass (see the module doc).
                    let v = ((((r0[x] >> 4) * b0) >> 16) + (((r1[x] >> 4) * b1) >> 16) + 2) >> 2;
                    out[x] = v.min(255) as u8;
                }
            }
            Interpolation::LinearExact => {
                let (b0, b1) = (b0 as u32, b1 as u32);
                for x in 0..dw {
                    let v = (r0[x] * b0 + r1[x] * b1 + (1 << 15)) >> 16;
                    out[x] = v.min(255) as u8;
                }
            }
        }
    }
}

fn hpass(row: &[u8], t: &AxisTable, out: &mut [u32]) {
    let last = row.len() - 1;
    for ((o, &i), &[a0, a1]) in out.iter_mut().zip(&t.offsets).zip(&t.weights) {
        let i = i as usize;
        *o = row[i] as u32 * a0 as u32 + row[(i + 1).min(last)] as u32 * a1 as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orb_level_sizes() {
        // ORB sizes of a 640x480 image (OpenCV 5.0), and the float-factor trap (see level_scale).
        let sizes: Vec<_> = (0..8).map(|l| level_size(640, 480, 1.2, l)).collect();
        assert_eq!(
            sizes,
            [
                (640, 480),
                (533, 400),
                (444, 333),
                (370, 278),
                (309, 231),
                (257, 193),
                (214, 161),
                (179, 134)
            ]
        );
        assert_eq!(level_scale(1.2, 3), 1.728_000_2_f32);
        assert_eq!(level_size(324, 223, 1.2, 3), (187, 129));
    }

    #[test]
    fn weights_sum_to_one_and_taps_in_range() {
        for interp in [Interpolation::Linear, Interpolation::LinearExact] {
            for (s, d) in [(10, 7), (7, 10), (1, 3), (3, 1), (1920, 1600)] {
                let t = axis_table(s, d, interp);
                for (&o, w) in t.offsets.iter().zip(&t.weights) {
                    assert!((o as usize) < s);
                    assert_eq!(w[0] + w[1], ResizeTables::one(interp), "{s}->{d}");
                }
            }
        }
    }

    #[test]
    fn constant_image_stays_constant() {
        for interp in [Interpolation::Linear, Interpolation::LinearExact] {
            let src = GrayImage::from_vec(13, 9, vec![200; 13 * 9]).unwrap();
            let mut dst = GrayImage::new(11, 7);
            resize_linear(&src, &mut dst, interp);
            assert!(dst.data.iter().all(|&v| v == 200), "{interp:?}");
        }
    }

    #[test]
    fn build_reuses_and_sizes() {
        let mut levels = vec![GrayImage::new(100, 50)];
        build(&mut levels, 4, 1.2, Interpolation::LinearExact);
        assert_eq!(levels.len(), 4);
        assert_eq!(
            (levels[3].width, levels[3].height),
            level_size(100, 50, 1.2, 3)
        );
        build(&mut levels, 2, 1.2, Interpolation::Linear);
        assert_eq!(levels.len(), 2);
    }
}
