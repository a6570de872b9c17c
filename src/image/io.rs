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

/// An empty frame (no pixels; buffers to decode into grow on first use).
impl Default for OwnedFrame {
    fn default() -> Self {
        OwnedFrame {
            data: Vec::new(),
            width: 0,
            height: 0,
            encoding: Encoding::Mono8,
        }
    }
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
    // A clear word for an empty file (the decoders only say "unexpected end of file").
    if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        return Err(file_err("the file is empty".into()));
    }
    let reader = ::image::ImageReader::open(path)
        .map_err(|e| Error::io(path, e))?
        .with_guessed_format()
        .map_err(|e| Error::io(path, e))?;
    decode_reader(reader).map_err(file_err)
}

/// Decodes an encoded image (PNG/JPEG/PGM bytes, e.g. a `CompressedImage`) like
/// [`load_view_owned`]; the error says why it does not decode.
pub fn decode_encoded(bytes: &[u8]) -> std::result::Result<OwnedFrame, String> {
    let mut frame = OwnedFrame::default();
    decode_encoded_into(bytes, &mut frame)?;
    Ok(frame)
}

/// [`decode_encoded`] into `frame`, whose buffer is reused: 8-bit gray and RGB images (what
/// cameras and image_transport's `compressed` plugin send) are decoded straight into it, with
/// no allocation of their own once it has grown; other colour types (16-bit, alpha) are
/// converted as [`load_view_owned`] does. On error `frame` is left unchanged or empty.
pub fn decode_encoded_into(
    bytes: &[u8],
    frame: &mut OwnedFrame,
) -> std::result::Result<(), String> {
    if bytes.is_empty() {
        return Err("the data is empty".into());
    }
    let reader = ::image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    decode_reader_into(reader, frame)
}

fn decode_reader<R: std::io::BufRead + std::io::Seek>(
    reader: ::image::ImageReader<R>,
) -> std::result::Result<OwnedFrame, String> {
    let mut frame = OwnedFrame::default();
    decode_reader_into(reader, &mut frame)?;
    Ok(frame)
}

fn decode_reader_into<R: std::io::BufRead + std::io::Seek>(
    mut reader: ::image::ImageReader<R>,
    frame: &mut OwnedFrame,
) -> std::result::Result<(), String> {
    use ::image::ImageDecoder;
    // The frame limits, checked from the header before any pixel buffer is allocated.
    let mut limits = ::image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE as u32);
    limits.max_image_height = Some(MAX_SIDE as u32);
    limits.max_alloc = Some((MAX_PIXELS * 8) as u64);
    reader.limits(limits.clone());
    if reader.format() == Some(::image::ImageFormat::Jpeg) {
        // The JPEG decoder fills the rows of a truncated file with gray and reports success;
        // a file cut short must be an error, so check that the image data is complete first.
        let mut inner = reader.into_inner();
        let start = inner.stream_position().map_err(|e| e.to_string())?;
        let complete = jpeg_is_complete(&mut inner).map_err(|e| e.to_string())?;
        if !complete {
            return Err(
                "truncated JPEG: the image data ends before the end-of-image marker".into(),
            );
        }
        inner
            .seek(std::io::SeekFrom::Start(start))
            .map_err(|e| e.to_string())?;
        reader = ::image::ImageReader::with_format(inner, ::image::ImageFormat::Jpeg);
        reader.limits(limits);
    }
    let format = reader.format();
    let decoder = reader.into_decoder().map_err(|e| decode_error(format, e))?;
    let (w, h) = decoder.dimensions();
    let (width, height) = (w as usize, h as usize);
    if width * height > MAX_PIXELS {
        return Err(format!(
            "{width}x{height} is larger than {MAX_PIXELS} pixels"
        ));
    }
    let color = decoder.color_type();
    let direct = match color {
        ::image::ColorType::L8 => Some(Encoding::Mono8),
        ::image::ColorType::Rgb8 => Some(Encoding::Rgb8),
        _ => None,
    };
    if let Some(encoding) = direct {
        // Straight into the reused buffer (its size checked against the decoder's own).
        let n = decoder.total_bytes() as usize;
        frame.data.resize(n, 0);
        decoder
            .read_image(&mut frame.data)
            .map_err(|e| decode_error(format, e))?;
        (frame.width, frame.height, frame.encoding) = (width, height, encoding);
        return Ok(());
    }
    let img = ::image::DynamicImage::from_decoder(decoder).map_err(|e| decode_error(format, e))?;
    let gray = matches!(
        img.color(),
        ::image::ColorType::L8 | ::image::ColorType::L16 | ::image::ColorType::La8
    );
    (frame.data, frame.encoding) = if gray {
        (img.into_luma8().into_raw(), Encoding::Mono8)
    } else {
        (img.into_rgb8().into_raw(), Encoding::Rgb8)
    };
    (frame.width, frame.height) = (width, height);
    Ok(())
}

/// Says what went wrong in words a user can act on (the format, "too large", "truncated").
fn decode_error(format: Option<::image::ImageFormat>, e: ::image::ImageError) -> String {
    use ::image::ImageError;
    match (&e, format) {
        (ImageError::Limits(_), _) => format!(
            "the image is larger than the limit of {MAX_SIDE} pixels per side and \
             {MAX_PIXELS} pixels ({e})"
        ),
        (ImageError::Unsupported(_), None) => {
            "not a PNG, JPEG or PNM (PGM/PPM) image (unknown file signature)".into()
        }
        (ImageError::IoError(io), Some(f)) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            format!("cannot decode {f:?}: the file is truncated ({e})")
        }
        (_, Some(f)) => format!("cannot decode {f:?}: {e}"),
        (_, None) => e.to_string(),
    }
}

/// Whether a JPEG stream reaches its end-of-image marker (`FF D9`): walks the marker
/// segments (skipping each by its length, so thumbnails inside APPn segments are not
/// mistaken for the end) and the entropy-coded data after each start-of-scan (where `FF` is
/// followed by `00` stuffing or a restart marker, so the next other marker ends the scan).
/// Bytes after the marker (camera trailers, motion-photo videos) are allowed. Reads the
/// stream once, in buffered chunks.
fn jpeg_is_complete<R: std::io::BufRead>(r: &mut R) -> std::io::Result<bool> {
    fn byte<R: std::io::BufRead>(r: &mut R) -> std::io::Result<Option<u8>> {
        let b = r.fill_buf()?.first().copied();
        if b.is_some() {
            r.consume(1);
        }
        Ok(b)
    }
    /// Skips `n` bytes; false at the end of the stream.
    fn skip<R: std::io::BufRead>(r: &mut R, mut n: usize) -> std::io::Result<bool> {
        while n > 0 {
            let k = r.fill_buf()?.len().min(n);
            if k == 0 {
                return Ok(false);
            }
            r.consume(k);
            n -= k;
        }
        Ok(true)
    }
    /// Advances to the next 0xFF byte and consumes it; false at the end of the stream.
    fn to_ff<R: std::io::BufRead>(r: &mut R) -> std::io::Result<bool> {
        loop {
            let buf = r.fill_buf()?;
            if buf.is_empty() {
                return Ok(false);
            }
            match buf.iter().position(|&b| b == 0xFF) {
                Some(i) => {
                    r.consume(i + 1);
                    return Ok(true);
                }
                None => {
                    let n = buf.len();
                    r.consume(n);
                }
            }
        }
    }
    loop {
        if !to_ff(r)? {
            return Ok(false);
        }
        // Fill bytes: any number of FF before the marker code.
        let code = loop {
            match byte(r)? {
                None => return Ok(false),
                Some(0xFF) => continue,
                Some(c) => break c,
            }
        };
        match code {
            0xD9 => return Ok(true),
            // Standalone markers; inside a scan, 00 is a stuffed FF data byte.
            0x00 | 0x01 | 0xD0..=0xD8 => continue,
            _ => {
                let (Some(hi), Some(lo)) = (byte(r)?, byte(r)?) else {
                    return Ok(false);
                };
                let len = u16::from_be_bytes([hi, lo]) as usize;
                // A segment (after a start-of-scan header, the entropy-coded data follows;
                // `to_ff` passes over it to the next marker either way).
                if !skip(r, len.saturating_sub(2))? {
                    return Ok(false);
                }
            }
        }
    }
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
