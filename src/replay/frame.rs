//! Input frames: an `Image` or `CompressedImage` message decoded into something the
//! pipeline takes.

use crate::cdr::{self, Header};
use crate::error::{Error, Result};
use crate::image::{Encoding, ImageView};

/// A decoded input frame: either a view of a raw `Image`'s bytes or a decoded compressed one.
pub enum FrameData<'a> {
    Raw(cdr::Image<'a>),
    Decoded {
        header: Header,
        data: Vec<u8>,
        width: usize,
        height: usize,
        encoding: Encoding,
    },
}

impl FrameData<'_> {
    pub fn header(&self) -> &Header {
        match self {
            FrameData::Raw(i) => &i.header,
            FrameData::Decoded { header, .. } => header,
        }
    }

    pub fn view(&self) -> std::result::Result<ImageView<'_>, crate::DecodeError> {
        match self {
            FrameData::Raw(i) => ImageView::new(
                &i.data,
                i.width as usize,
                i.height as usize,
                i.step as usize,
                &i.encoding,
                i.is_bigendian != 0,
            ),
            FrameData::Decoded {
                data,
                width,
                height,
                encoding,
                ..
            } => ImageView::with_encoding(
                data,
                *width,
                *height,
                width * encoding.bytes_per_pixel(),
                *encoding,
                false,
            ),
        }
    }
}

/// Error of a frame we skip (the bag is fine, this one image is not usable).
pub struct FrameSkip(pub String);

/// Decodes one message of an image topic. `Err(Error)` = the message is not the type it
/// claims (fatal); `Ok(Err(FrameSkip))` = a well-formed message with an unusable image.
pub fn decode_frame<'a>(
    msgtype: &str,
    data: &'a [u8],
) -> Result<std::result::Result<FrameData<'a>, FrameSkip>> {
    match msgtype {
        cdr::IMAGE => Ok(Ok(FrameData::Raw(cdr::Image::decode(data)?))),
        cdr::COMPRESSED_IMAGE => {
            let m = cdr::CompressedImage::decode(data)?;
            let frame = match crate::image::decode_encoded(&m.data) {
                Ok(f) => f,
                Err(e) => {
                    return Ok(Err(FrameSkip(format!(
                        "compressed image (format {:?}) does not decode: {e}",
                        m.format
                    ))))
                }
            };
            Ok(Ok(FrameData::Decoded {
                header: m.header,
                data: frame.data,
                width: frame.width,
                height: frame.height,
                encoding: frame.encoding,
            }))
        }
        other => Err(Error::Bag(format!("not an image type: {other}"))),
    }
}
