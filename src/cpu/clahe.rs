//! Contrast-limited adaptive histogram equalisation, as OpenCV's `cv::createCLAHE(clip,
//! tiles)->apply` computes it on an 8-bit image (VINS-Mono's `equalize: 1` runs it with clip
//! 3.0 on an 8x8 grid before tracking):
//!
//! 1. the image is cut into `tiles x tiles` tiles; when its width or height is not a
//!    multiple of the grid, the tiles are cut from a copy padded on the right and bottom by
//!    `tiles - width % tiles` columns and `tiles - height % tiles` rows (a whole extra tile
//!    of padding on the side that already divides), mirrored without repeating the edge
//!    (BORDER_REFLECT_101);
//! 2. per tile a 256-bin histogram, every bin clipped at `max(1, trunc(clip * tile_area /
//!    256))`, the clipped count spread evenly over all bins and its remainder one by one from
//!    bin 0 in steps of `max(256 / remainder, 1)`; the tile's lookup table is the running sum
//!    times `255 / tile_area` (f32), rounded half to even;
//! 3. every pixel bilinearly between the tables of the four nearest tile centres, in f32 in
//!    OpenCV's order of operations, rounded half to even.
//!
//! Checked against OpenCV 4.6 (Debian's, which VINS links) pixel for pixel by
//! `scripts/vins/track_harness.cpp --clahe` in scripts/test-vio.sh.

use crate::image::GrayImage;

/// Tables and column weights kept between frames (nothing allocated once a size is seen).
#[derive(Default)]
pub struct ClaheScratch {
    lut: Vec<u8>,
    hist: Vec<u32>,
    cols: Vec<(usize, usize, f32, f32)>,
}

/// `dst` = CLAHE of `src` with clip limit `clip` (OpenCV's `clipLimit`; <= 0: no clipping)
/// on a `tiles x tiles` grid.
pub fn clahe(src: &GrayImage, clip: f64, tiles: usize, dst: &mut GrayImage, s: &mut ClaheScratch) {
    let (w, h) = (src.width, src.height);
    dst.width = w;
    dst.height = h;
    dst.data.resize(w * h, 0);
    if w == 0 || h == 0 || tiles == 0 {
        return;
    }
    let padded = w % tiles != 0 || h % tiles != 0;
    let (ew, eh) = if padded {
        (w + tiles - w % tiles, h + tiles - h % tiles)
    } else {
        (w, h)
    };
    let (tw, th) = (ew / tiles, eh / tiles);
    tile_luts(src, clip, tiles, (tw, th), s);
    interpolate(src, tiles, (tw, th), dst, s);
}

/// Step 2: every tile's table into `s.lut` (tile `ty * tiles + tx` at 256 times that).
fn tile_luts(src: &GrayImage, clip: f64, tiles: usize, tile: (usize, usize), s: &mut ClaheScratch) {
    let (w, h) = (src.width, src.height);
    let (tw, th) = tile;
    let area = tw * th;
    let scale = 255.0f32 / area as f32;
    let limit = if clip > 0.0 {
        ((clip * area as f64 / 256.0) as i64).max(1) as u32
    } else {
        0
    };
    // BORDER_REFLECT_101 past the right and bottom edges (never more than a tile past them).
    let reflect = |i: usize, n: usize| if i < n { i } else { 2 * n - 2 - i };
    s.lut.resize(tiles * tiles * 256, 0);
    s.hist.resize(256, 0);
    for ty in 0..tiles {
        for tx in 0..tiles {
            let hist = &mut s.hist;
            hist.fill(0);
            for y in ty * th..(ty + 1) * th {
                let row = &src.data[reflect(y, h) * w..][..w];
                let xs = tx * tw..(tx + 1) * tw;
                if xs.end <= w {
                    for &v in &row[xs] {
                        hist[v as usize] += 1;
                    }
                } else {
                    for x in xs {
                        hist[row[reflect(x, w)] as usize] += 1;
                    }
                }
            }
            if limit > 0 {
                let mut clipped = 0u32;
                for b in hist.iter_mut() {
                    if *b > limit {
                        clipped += *b - limit;
                        *b = limit;
                    }
                }
                let (batch, mut rest) = (clipped / 256, clipped % 256);
                for b in hist.iter_mut() {
                    *b += batch;
                }
                if rest > 0 {
                    let step = (256 / rest as usize).max(1);
                    let mut i = 0;
                    while i < 256 && rest > 0 {
                        hist[i] += 1;
                        i += step;
                        rest -= 1;
                    }
                }
            }
            let lut = &mut s.lut[(ty * tiles + tx) * 256..][..256];
            let mut sum = 0u32;
            for (l, &b) in lut.iter_mut().zip(hist.iter()) {
                sum += b;
                *l = round_u8(sum as f32 * scale);
            }
        }
    }
}

/// Step 3: each pixel between the four nearest tiles' tables.
fn interpolate(
    src: &GrayImage,
    tiles: usize,
    tile: (usize, usize),
    dst: &mut GrayImage,
    s: &mut ClaheScratch,
) {
    let (w, h) = (src.width, src.height);
    let (tw, th) = tile;
    // Per column: the left and right tiles' table offsets and weights.
    let inv_tw = 1.0f32 / tw as f32;
    s.cols.clear();
    s.cols.extend((0..w).map(|x| {
        let txf = x as f32 * inv_tw - 0.5;
        let t1 = txf.floor();
        let xa = txf - t1;
        let t1 = t1 as i64;
        let (a, b) = (t1.max(0) as usize, ((t1 + 1) as usize).min(tiles - 1));
        (a * 256, b * 256, xa, 1.0 - xa)
    }));
    let inv_th = 1.0f32 / th as f32;
    for y in 0..h {
        let tyf = y as f32 * inv_th - 0.5;
        let t1 = tyf.floor();
        let ya = tyf - t1;
        let ya1 = 1.0 - ya;
        let t1 = t1 as i64;
        let (a, b) = (t1.max(0) as usize, ((t1 + 1) as usize).min(tiles - 1));
        let p1 = &s.lut[a * tiles * 256..][..tiles * 256];
        let p2 = &s.lut[b * tiles * 256..][..tiles * 256];
        let src_row = &src.data[y * w..][..w];
        let dst_row = &mut dst.data[y * w..][..w];
        for ((d, &v), &(i1, i2, xa, xa1)) in dst_row.iter_mut().zip(src_row).zip(&s.cols) {
            let v = v as usize;
            let f = |l: u8| l as f32;
            let res = (f(p1[i1 + v]) * xa1 + f(p1[i2 + v]) * xa) * ya1
                + (f(p2[i1 + v]) * xa1 + f(p2[i2 + v]) * xa) * ya;
            *d = round_u8(res);
        }
    }
}

/// OpenCV's `saturate_cast<uchar>(float)`: rounded half to even, clamped to 0..=255.
fn round_u8(v: f32) -> u8 {
    v.round_ties_even().clamp(0.0, 255.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(w: usize, h: usize, f: impl Fn(usize, usize) -> u8) -> GrayImage {
        let mut g = GrayImage::new(w, h);
        for y in 0..h {
            for x in 0..w {
                g.data[y * w + x] = f(x, y);
            }
        }
        g
    }

    #[test]
    fn a_flat_image_maps_to_its_clipped_ramp() {
        let src = img(64, 64, |_, _| 100);
        let (mut dst, mut s) = (GrayImage::default(), ClaheScratch::default());
        clahe(&src, 3.0, 8, &mut dst, &mut s);
        // Tile 8x8 = 64 px; limit max(1, trunc(3 * 64 / 256) = 0) = 1, so 63 are clipped:
        // none per bin, a remainder of 63 one each to bins 0, 4, ..., 248. Bin 100 (a
        // multiple of 4) holds 2; the running sum at 100 is 25 + 2 = 27.
        let want = round_u8(27.0 * 255.0 / 64.0);
        assert!(dst.data.iter().all(|&v| v == want), "{:?}", &dst.data[..4]);
    }

    #[test]
    fn without_clipping_a_tile_is_equalised() {
        // One tile (grid 1): the table is the cumulative histogram; a ramp of 256 values,
        // each once, maps every value v to round((v + 1) * 255 / 256).
        let src = img(16, 16, |x, y| (y * 16 + x) as u8);
        let (mut dst, mut s) = (GrayImage::default(), ClaheScratch::default());
        clahe(&src, 0.0, 1, &mut dst, &mut s);
        for (i, &v) in dst.data.iter().enumerate() {
            assert_eq!(v, round_u8((i + 1) as f32 * 255.0 / 256.0), "pixel {i}");
        }
    }

    #[test]
    fn sizes_off_the_grid_pad_and_keep_the_output_size() {
        let src = img(37, 21, |x, y| ((x * 7 + y * 13) % 251) as u8);
        let (mut dst, mut s) = (GrayImage::default(), ClaheScratch::default());
        clahe(&src, 3.0, 8, &mut dst, &mut s);
        assert_eq!((dst.width, dst.height, dst.data.len()), (37, 21, 37 * 21));
        // The padding is what the tiles see: the image padded by hand (3 columns, 3 rows,
        // mirrored without the edge) divides by the grid, and its equalisation cropped back
        // is the same image.
        let reflect = |i: usize, n: usize| if i < n { i } else { 2 * n - 2 - i };
        let by_hand = img(40, 24, |x, y| {
            src.data[reflect(y, 21) * 37 + reflect(x, 37)]
        });
        let mut whole = GrayImage::default();
        clahe(&by_hand, 3.0, 8, &mut whole, &mut s);
        let cropped: Vec<u8> = (0..21)
            .flat_map(|y| whole.data[y * 40..y * 40 + 37].to_vec())
            .collect();
        assert_eq!(dst.data, cropped);
        // A side that divides still gets a whole tile of padding (OpenCV's rule): 40x21 is
        // cut as 48x24, not 40x24.
        let wide = img(40, 21, |x, y| by_hand.data[y * 40 + x]);
        let mut a = GrayImage::default();
        clahe(&wide, 3.0, 8, &mut a, &mut s);
        let not_padded = img(40, 24, |x, y| by_hand.data[y * 40 + x]);
        let mut b = GrayImage::default();
        clahe(&not_padded, 3.0, 8, &mut b, &mut s);
        assert_ne!(a.data[..40 * 21], b.data[..40 * 21]);
    }
}
