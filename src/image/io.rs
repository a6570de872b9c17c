//! Reading image files (PNG/JPEG/PGM through the `image` crate) into frames, and writing.
//!
//! Colour files are handed to the pipeline as `rgb8` frames so that gray conversion is
//! ours (OpenCV-exact), not the `image` crate's.

use std::path::Path;

use super::{Encoding, GrayImage, ImageView, MAX_PIXELS, MAX_SIDE};
use crate::error::{Error, Result};

/// A decoded image file that owns its bytes; [`OwnedFrame::view`] borrows it as a frame.
#[derive(Clone, Debug)]
pub struct OwnedFrame {
    pub data: Vec<u8>,
    pub width: usize,
    pub height: usize,
    pub encoding: Encoding,
}

impl OwnedFrame {
    pub fn view(&self) -> Result<ImageView<'_>> {
        let step = self.width * self.encoding.bytes_per_pixel();
        Ok(ImageView::with_encoding(
            &self.data,
            self.width,
            self.height,
            step,
            self.encoding,
            false,
        )?)
    }
}

/// Loads an image file as mono8 (gray files) or rgb8 (everything else).
pub fn load_view_owned(path: &Path) -> Result<OwnedFrame> {
    let file_err = |msg: String| Error::ImageFile {
        path: path.to_path_buf(),
        msg,
    };
    let reader = ::image::ImageReader::open(path)
        .map_err(|e| Error::io(path, e))?
        .with_guessed_format()
        .map_err(|e| Error::io(path, e))?;
    decode_reader(reader).map_err(file_err)
}

/// Decodes an encoded image (PNG/JPEG/PGM bytes, e.g. a `CompressedImage`) like
/// [`load_view_owned`]; the error says why it does not decode.
pub fn decode_encoded(bytes: &[u8]) -> std::result::Result<OwnedFrame, String> {
    let reader = ::image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    decode_reader(reader)
}

fn decode_reader<R: std::io::BufRead + std::io::Seek>(
    mut reader: ::image::ImageReader<R>,
) -> std::result::Result<OwnedFrame, String> {
    // The frame limits, checked from the header before any pixel buffer is allocated.
    let mut limits = ::image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE as u32);
    limits.max_image_height = Some(MAX_SIDE as u32);
    limits.max_alloc = Some((MAX_PIXELS * 8) as u64);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| e.to_string())?;
    let (width, height) = (img.width() as usize, img.height() as usize);
    if width * height > MAX_PIXELS {
        return Err(format!(
            "{width}x{height} is larger than {MAX_PIXELS} pixels"
        ));
    }
    let gray = matches!(
        img.color(),
        ::image::ColorType::L8 | ::image::ColorType::L16 | ::image::ColorType::La8
    );
    Ok(if gray {
        OwnedFrame {
            data: img.into_luma8().into_raw(),
            width,
            height,
            encoding: Encoding::Mono8,
        }
    } else {
        OwnedFrame {
            data: img.into_rgb8().into_raw(),
            width,
            height,
            encoding: Encoding::Rgb8,
        }
    })
}

/// Loads an image file and converts it to gray exactly as `cv::cvtColor(..., RGB2GRAY)`.
pub fn load_gray(path: &Path) -> Result<GrayImage> {
    let frame = load_view_owned(path)?;
    let mut gray = GrayImage::default();
    crate::cpu::decode::decode(&frame.view()?, &mut gray);
    Ok(gray)
}

pub fn save_gray_png(img: &GrayImage, path: &Path) -> Result<()> {
    save_png(
        &img.data,
        img.width,
        img.height,
        ::image::ExtendedColorType::L8,
        path,
    )
}

/// Writes packed 8-bit RGB pixels (e.g. an overlay) as a PNG.
pub fn save_rgb_png(data: &[u8], width: usize, height: usize, path: &Path) -> Result<()> {
    save_png(data, width, height, ::image::ExtendedColorType::Rgb8, path)
}

fn save_png(
    data: &[u8],
    width: usize,
    height: usize,
    color: ::image::ExtendedColorType,
    path: &Path,
) -> Result<()> {
    ::image::save_buffer(path, data, width as u32, height as u32, color).map_err(|e| {
        Error::ImageFile {
            path: path.to_path_buf(),
            msg: e.to_string(),
        }
    })
}
