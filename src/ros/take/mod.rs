//! How the node takes its images from the middleware, and the image it then reads in place.
//!
//! * [`serialized`] (`image_take: serialized`, the default): the message's serialized bytes,
//!   taken straight into a page-locked frame buffer that the pipeline uploads from; the
//!   fields located by [`image_cdr`].
//! * [`native`] (`image_take: message`): rcl's C message, deserialized by the middleware's
//!   type support and taken right after `spin_once`; the pipeline copies its pixels into
//!   pinned memory. The relay that measures the transport floor takes images this way.
//!
//! Either way the pixels are not copied into a Rust `Image` first (r2r's typed
//! subscription would: 2 MB per 1080p mono8 frame, 6 MB per bgr8 one).

pub mod image_cdr;
pub mod native;
pub mod serialized;

pub use native::{ImageTaker, NativeImage};
pub use serialized::{FramePool, ImageSubscriptions, SerializedImage};

use r2r::std_msgs::msg::Header;

use crate::error::DecodeError;
use crate::image::ImageView;
use crate::pipeline::FrameBuffer;

/// One image as taken, either way.
pub enum TakenImage {
    Native(NativeImage),
    Serialized(SerializedImage),
}

impl TakenImage {
    /// Validates the message as a frame.
    pub fn view(&self) -> Result<ImageView<'_>, DecodeError> {
        match self {
            TakenImage::Native(m) => m.view(),
            TakenImage::Serialized(m) => {
                let f = m
                    .fields()
                    .map_err(|e| DecodeError::NotAnImage(e.to_string()))?;
                let b = m.bytes();
                let encoding = std::str::from_utf8(&b[f.encoding.clone()]).unwrap_or("<not UTF-8>");
                ImageView::new(
                    &b[f.data.clone()],
                    f.width as usize,
                    f.height as usize,
                    f.step as usize,
                    encoding,
                    f.is_bigendian != 0,
                )
            }
        }
    }

    /// The frame buffer the pixels lie in (a serialized take into the input's pool).
    pub fn buffer(&self) -> Option<&FrameBuffer> {
        match self {
            TakenImage::Serialized(m) => m.buffer(),
            TakenImage::Native(_) => None,
        }
    }

    /// Whether the pipeline's helper threads will copy (or convert) the pixels on the host:
    /// all but a serialized take into a frame buffer of a frame uploaded as it is (not an
    /// 8-bit colour one, which `cuda.host_gray` converts on the way).
    pub fn copied_on_host(&self) -> bool {
        let TakenImage::Serialized(m) = self else {
            return true;
        };
        let colour = m.fields().is_ok_and(|f| {
            matches!(
                &m.bytes()[f.encoding.clone()],
                b"rgb8" | b"bgr8" | b"rgba8" | b"bgra8"
            )
        });
        m.buffer().is_none() || colour
    }

    /// Writes the message's header into `h` (its `frame_id` string reused); a message
    /// whose fields could not be located leaves a zero stamp and an empty frame id.
    pub fn header_into(&self, h: &mut Header) {
        match self {
            TakenImage::Native(m) => m.header_into(h),
            TakenImage::Serialized(m) => {
                h.frame_id.clear();
                let Ok(f) = m.fields() else {
                    h.stamp = Default::default();
                    return;
                };
                h.stamp.sec = f.sec;
                h.stamp.nanosec = f.nanosec;
                h.frame_id
                    .push_str(&String::from_utf8_lossy(&m.bytes()[f.frame_id.clone()]));
            }
        }
    }

    /// `WxH "encoding" step S data N B` (or what makes the bytes no Image), for errors.
    pub fn describe(&self) -> String {
        match self {
            TakenImage::Native(m) => m.describe(),
            TakenImage::Serialized(m) => match m.fields() {
                Ok(f) => format!(
                    "{}x{} {:?} step {} data {} B",
                    f.width,
                    f.height,
                    String::from_utf8_lossy(&m.bytes()[f.encoding.clone()]),
                    f.step,
                    f.data.len()
                ),
                Err(e) => format!("{} serialized bytes ({e})", m.bytes().len()),
            },
        }
    }
}
