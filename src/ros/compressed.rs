//! Compressed camera input (`transport: compressed`): `sensor_msgs/CompressedImage` on
//! `<image>/compressed` (image_transport's `compressed` plugin and `cv_bridge`'s
//! `cv2_to_compressed_imgmsg`: JPEG or PNG, mono or colour), taken as rcl's C message by the
//! spinning thread like a raw image ([`crate::ros::take`]) and decoded on the input's worker
//! (or, with one input, after the take), into a buffer reused frame after frame
//! ([`crate::image::io::decode_encoded_into`]: the `image` crate, zune-jpeg for JPEG).
//!
//! [`Frame`] is what an input's slot holds: a raw or a compressed message.

use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use r2r::sensor_msgs::msg::CompressedImage;
use r2r::std_msgs::msg::Header;
use r2r::{NativeMsg, QosProfile, WrappedTypesupport};

use super::take::{self, slice, ImageTaker, NativeImage};
use crate::image::{decode_encoded_into, OwnedFrame};

type CCompressed = <CompressedImage as WrappedTypesupport>::CStruct;

/// One `sensor_msgs/CompressedImage` as the middleware delivered it.
pub struct NativeCompressed(NativeMsg<CompressedImage>);

// SAFETY: as for `NativeImage` (ros::take): a heap C struct owned by this value alone
// (CompressedImage has strings and a sequence, so Fast DDS never loans it); reading it is
// plain memory access and its destructor may run on any thread.
unsafe impl Send for NativeCompressed {}

impl NativeCompressed {
    /// A copy of `msg` as a C message (tests).
    #[cfg(test)]
    pub fn from_message(msg: &CompressedImage) -> NativeCompressed {
        NativeCompressed(NativeMsg::from(msg))
    }

    fn c(&self) -> &CCompressed {
        &self.0
    }

    /// The `format` string (`"jpeg"`, `"png"`, or image_transport's `"bgr8; jpeg compressed
    /// bgr8"`); invalid UTF-8 reads as `"<not UTF-8>"`.
    pub fn format(&self) -> &str {
        let f = &self.c().format;
        std::str::from_utf8(slice(f.data as *const u8, f.size)).unwrap_or("<not UTF-8>")
    }

    pub fn data(&self) -> &[u8] {
        let d = &self.c().data;
        slice(d.data as *const u8, d.size)
    }

    /// Decodes the image into `out` (its buffer reused). The pixels are those the encoded
    /// image holds, whatever `format` says of the publisher's encoding (a colour JPEG or PNG
    /// stores RGB; image_transport converts to BGR and back around `cv::imencode`), so gray
    /// comes out as for the same raw image. `compressedDepth` (a depth-image header before
    /// the PNG) is refused.
    pub fn decode_into(&self, out: &mut OwnedFrame) -> Result<(), String> {
        let format = self.format();
        if format.contains("compressedDepth") {
            return Err(format!(
                "format {format:?}: compressedDepth (depth images) is not a camera image"
            ));
        }
        decode_encoded_into(self.data(), out).map_err(|e| format!("format {format:?}: {e}"))
    }

    /// Writes the message's header into `h` (its `frame_id` string reused).
    pub fn header_into(&self, h: &mut Header) {
        take::header_into(&self.c().header, h);
    }

    pub fn stamp_ns(&self) -> i64 {
        take::stamp_ns(&self.c().header)
    }

    /// `compressed "format" N B`, for error messages.
    pub fn describe(&self) -> String {
        format!("compressed {:?} {} B", self.format(), self.data().len())
    }
}

/// A frame as an input's slot holds it.
pub enum Frame {
    Raw(NativeImage),
    Compressed(NativeCompressed),
}

impl Frame {
    pub fn stamp_ns(&self) -> i64 {
        match self {
            Frame::Raw(m) => m.stamp_ns(),
            Frame::Compressed(m) => m.stamp_ns(),
        }
    }
}

/// How an input's images come (`transport`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Raw,
    Compressed,
}

impl Transport {
    pub fn parse(s: &str) -> Option<Transport> {
        match s {
            "raw" => Some(Transport::Raw),
            "compressed" => Some(Transport::Compressed),
            _ => None,
        }
    }

    /// The topic subscribed for the image topic `image`: `image` itself, or
    /// `image/compressed` (image_transport's name).
    pub fn topic(self, image: &str) -> String {
        match self {
            Transport::Raw => image.to_string(),
            Transport::Compressed => format!("{image}/compressed"),
        }
    }
}

/// The frames of one input's subscription, taken without waiting by the spinning thread.
pub enum FrameTaker {
    Raw(ImageTaker),
    Compressed(Box<dyn Stream<Item = NativeMsg<CompressedImage>> + Unpin>),
}

// SAFETY: as for `ImageTaker`: r2r's channel receiver of native messages is `Send` but for
// its item type, and the items are `NativeCompressed`s (see its `Send`).
unsafe impl Send for FrameTaker {}

impl FrameTaker {
    /// Subscribes to `image` (raw) or `image/compressed`.
    pub fn subscribe(
        node: &mut r2r::Node,
        image: &str,
        transport: Transport,
        qos: QosProfile,
    ) -> r2r::Result<Self> {
        Ok(match transport {
            Transport::Raw => FrameTaker::Raw(ImageTaker::subscribe(node, image, qos)?),
            Transport::Compressed => FrameTaker::Compressed(Box::new(
                node.subscribe_native::<CompressedImage>(&transport.topic(image), qos)?,
            )),
        })
    }

    /// The next frame already received, if any (call after `spin_once`).
    pub fn try_take(&mut self) -> Option<Frame> {
        match self {
            FrameTaker::Raw(t) => t.try_take().map(Frame::Raw),
            FrameTaker::Compressed(stream) => {
                let mut cx = Context::from_waker(futures::task::noop_waker_ref());
                match stream.poll_next_unpin(&mut cx) {
                    Poll::Ready(Some(m)) => Some(Frame::Compressed(NativeCompressed(m))),
                    _ => None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Encoding;

    fn message(format: &str, data: Vec<u8>) -> CompressedImage {
        CompressedImage {
            header: Header {
                stamp: r2r::builtin_interfaces::msg::Time { sec: 7, nanosec: 9 },
                frame_id: "cam0".into(),
            },
            format: format.into(),
            data,
        }
    }

    fn png(gray: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let enc = ::image::codecs::png::PngEncoder::new(&mut out);
        let (w, h) = (7u32, 5u32);
        let (color, n) = if gray {
            (::image::ExtendedColorType::L8, 1)
        } else {
            (::image::ExtendedColorType::Rgb8, 3)
        };
        let px: Vec<u8> = (0..w * h * n).map(|i| (i * 13) as u8).collect();
        ::image::ImageEncoder::write_image(enc, &px, w, h, color).unwrap();
        out
    }

    #[test]
    fn a_compressed_message_decodes_into_a_reused_buffer() {
        let mut out = OwnedFrame::default();
        let m = NativeCompressed::from_message(&message("mono8; png compressed mono8", png(true)));
        assert_eq!(m.format(), "mono8; png compressed mono8");
        assert_eq!(m.stamp_ns(), 7_000_000_009);
        m.decode_into(&mut out).unwrap();
        assert_eq!(
            (out.width, out.height, out.encoding),
            (7, 5, Encoding::Mono8)
        );
        assert_eq!(out.data[..3], [0, 13, 26]);
        let c = NativeCompressed::from_message(&message("png", png(false)));
        c.decode_into(&mut out).unwrap();
        assert_eq!(
            (out.width, out.height, out.encoding),
            (7, 5, Encoding::Rgb8)
        );
        // Grown to the colour frame once, then reused for smaller and equal frames.
        let ptr = out.data.as_ptr();
        m.decode_into(&mut out).unwrap();
        assert_eq!(out.data.len(), 35);
        c.decode_into(&mut out).unwrap();
        assert_eq!(out.data.as_ptr(), ptr, "the buffer is reused");
        let mut h = Header::default();
        m.header_into(&mut h);
        assert_eq!((h.stamp.sec, h.frame_id.as_str()), (7, "cam0"));
    }

    #[test]
    fn bad_compressed_messages_are_errors() {
        let mut out = OwnedFrame::default();
        let mut cut = png(true);
        cut.truncate(cut.len() / 2);
        for (format, data, why) in [
            ("jpeg", vec![], "empty"),
            ("jpeg", vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 16], "truncated"),
            ("png", cut, "png"),
            ("png", b"not an image at all".to_vec(), "not a PNG"),
            ("16UC1; compressedDepth png", png(true), "compressedDepth"),
        ] {
            let m = NativeCompressed::from_message(&message(format, data));
            let e = m.decode_into(&mut out).unwrap_err();
            assert!(
                e.to_lowercase().contains(&why.to_lowercase()),
                "{format}: {e}"
            );
            assert!(e.contains(format), "{e}");
        }
    }

    #[test]
    fn transports_name_their_topics() {
        assert_eq!(Transport::parse("raw"), Some(Transport::Raw));
        assert_eq!(Transport::parse("theora"), None);
        assert_eq!(
            Transport::Compressed.topic("left/image"),
            "left/image/compressed"
        );
        assert_eq!(Transport::Raw.topic("image"), "image");
    }
}
