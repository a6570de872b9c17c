//! Encoding decode + gray conversion (CPU reference for `kernels/decode.cu`).
//!
//! * 8-bit colour: `cv::cvtColor(RGB2GRAY/BGR2GRAY/RGBA2GRAY/BGRA2GRAY)` on 8-bit images,
//!   i.e. the fixed-point formula `(R*9798 + G*19235 + B*3735 + 16384) >> 15` (alpha ignored).
//! * `yuv422`/`uyvy` and `yuv422_yuy2`/`yuyv`: the luma byte, as `COLOR_YUV2GRAY_UYVY/YUY2`.
//! * `mono16`/`16UC1`: `round(v / 256)` with ties to even, saturated at 255, which is what
//!   `cv::Mat::convertTo(CV_8U, 1.0/256)` (and so `cv_bridge`) produces. The byte order
//!   follows the message's `is_bigendian`.

use std::path::Path;

use crate::error::Result;
use crate::image::{load_view_owned, Encoding, GrayImage, ImageView};

pub use super::rgb_gray::{gray_from_rgb, GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT};

/// `convertTo(CV_8U, 1/256)`: round half to even, saturate.
#[inline]
pub fn gray_from_mono16(v: u16) -> u8 {
    let (q, r) = ((v >> 8) as u32, (v & 0xff) as u32);
    let up = r > 128 || (r == 128 && q & 1 == 1);
    (q + up as u32).min(255) as u8
}

/// Loads an image file and converts it to gray exactly as `cv::cvtColor(..., RGB2GRAY)`.
pub fn load_gray(path: &Path) -> Result<GrayImage> {
    let frame = load_view_owned(path)?;
    let mut gray = GrayImage::default();
    decode(&frame.view()?, &mut gray);
    Ok(gray)
}

/// Converts any supported frame to a packed gray image (reshaping `out`).
pub fn decode(view: &ImageView, out: &mut GrayImage) {
    let (w, h) = (view.width(), view.height());
    out.reshape(w, h);
    for y in 0..h {
        decode_row(view, y, out.row_mut(y));
    }
}

/// Row `y` of `view` into `dst` (its width).
#[inline]
fn decode_row(view: &ImageView, y: usize, dst: &mut [u8]) {
    {
        let src = view.row(y);
        match view.encoding() {
            Encoding::Mono8 => dst.copy_from_slice(src),
            Encoding::Mono16 => {
                for (d, px) in dst.iter_mut().zip(src.chunks_exact(2)) {
                    let v = if view.big_endian() {
                        u16::from_be_bytes([px[0], px[1]])
                    } else {
                        u16::from_le_bytes([px[0], px[1]])
                    };
                    *d = gray_from_mono16(v);
                }
            }
            Encoding::Rgb8 | Encoding::Bgr8 | Encoding::Rgba8 | Encoding::Bgra8 => {
                let (bpp, r, b) = color_layout(view.encoding()).expect("a colour encoding");
                super::rgb_gray::rgb_to_gray::<false>(dst, src, bpp, r, b);
            }
            Encoding::Uyvy => luma_bytes(dst, src, 1),
            Encoding::Yuyv => luma_bytes(dst, src, 0),
        }
    }
}

/// [`decode`] in `bands` bands of rows on the current rayon pool (the same bytes).
pub fn decode_banded(view: &ImageView, out: &mut GrayImage, bands: usize) {
    use rayon::prelude::*;
    let (w, h) = (view.width(), view.height());
    out.reshape(w, h);
    if w == 0 || h == 0 {
        return;
    }
    let rows = h.div_ceil(bands.clamp(1, h));
    out.data
        .par_chunks_mut(rows * w)
        .enumerate()
        .for_each(|(k, o)| {
            for (i, dst) in o.chunks_exact_mut(w).enumerate() {
                decode_row(view, k * rows + i, dst);
            }
        });
}

/// An 8-bit colour encoding's pixel: (bytes, red's byte, blue's byte); green is byte 1.
pub fn color_layout(e: Encoding) -> Option<(usize, usize, usize)> {
    match e {
        Encoding::Rgb8 => Some((3, 0, 2)),
        Encoding::Bgr8 => Some((3, 2, 0)),
        Encoding::Rgba8 => Some((4, 0, 2)),
        Encoding::Bgra8 => Some((4, 2, 0)),
        _ => None,
    }
}

fn luma_bytes(dst: &mut [u8], src: &[u8], offset: usize) {
    for (d, s) in dst.iter_mut().zip(src.iter().skip(offset).step_by(2)) {
        *d = *s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mono16_rounds_half_to_even() {
        assert_eq!(gray_from_mono16(128), 0);
        assert_eq!(gray_from_mono16(129), 1);
        assert_eq!(gray_from_mono16(384), 2);
        assert_eq!(gray_from_mono16(383), 1);
        assert_eq!(gray_from_mono16(65535), 255);
        assert_eq!(gray_from_mono16(65407), 255);
    }

    #[test]
    fn gray_weights_match_opencv_extremes() {
        assert_eq!(gray_from_rgb(255, 255, 255), 255);
        assert_eq!(gray_from_rgb(255, 0, 0), 76);
        assert_eq!(gray_from_rgb(0, 255, 0), 150);
        assert_eq!(gray_from_rgb(0, 0, 255), 29);
    }
}
