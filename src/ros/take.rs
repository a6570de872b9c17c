//! Images taken as rcl's own C messages (`Node::subscribe_native`) and read in place: the
//! pixels the middleware deserialized are not converted into a Rust `Image` first (r2r's
//! typed subscription copies them into a new `Vec`: 2 MB per 1080p mono8 frame, 6 MB per
//! bgr8 one), and the messages are drained on the thread that spins the node, right after
//! `spin_once` (no hop through the async runtime). Used by the node and by the relay that
//! measures the transport floor, so that both take a frame the same way.

use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use r2r::sensor_msgs::msg::Image;
use r2r::std_msgs::msg::Header;
use r2r::{NativeMsg, QosProfile, WrappedTypesupport};

use crate::error::DecodeError;
use crate::image::ImageView;

type CImage = <Image as WrappedTypesupport>::CStruct;

/// One `sensor_msgs/Image` as the middleware delivered it.
pub struct NativeImage(NativeMsg<Image>);

// SAFETY: the message is a heap C struct owned by this value alone (r2r's native subscriber
// makes it with `NativeMsg::new()`, rosidl's create; it is only loaned when the middleware
// can loan the type, which Fast DDS does for fixed-size types only, never for an Image with
// its strings and sequence). Nothing in it is tied to the thread that took it: reading it
// is plain memory access, and its destructor (rosidl's destroy, freeing with the default
// allocator) may run on any thread.
unsafe impl Send for NativeImage {}

/// `(data, size)` of a rosidl sequence or string as a slice (empty when `data` is null).
pub(super) fn slice<'a, T>(data: *const T, size: usize) -> &'a [T] {
    if data.is_null() || size == 0 {
        return &[];
    }
    // SAFETY: rosidl keeps `size` initialised elements at `data` while the message lives;
    // the caller ties the slice's lifetime to the message.
    unsafe { std::slice::from_raw_parts(data, size) }
}

/// A C message's header.
pub(super) type CHeader = <Header as WrappedTypesupport>::CStruct;

/// A C message's `header` into `h` (its `frame_id` string reused).
pub(super) fn header_into(c: &CHeader, h: &mut Header) {
    h.stamp.sec = c.stamp.sec;
    h.stamp.nanosec = c.stamp.nanosec;
    h.frame_id.clear();
    let id = slice(c.frame_id.data as *const u8, c.frame_id.size);
    h.frame_id.push_str(&String::from_utf8_lossy(id));
}

/// A C message's header stamp in ns ([`crate::ros::convert::stamp_ns`]).
pub(super) fn stamp_ns(c: &CHeader) -> i64 {
    crate::ros::convert::stamp_ns(c.stamp.sec, c.stamp.nanosec)
}

impl NativeImage {
    /// A copy of `msg` as a C message (tests and the relay's image mode).
    pub fn from_image(msg: &Image) -> NativeImage {
        NativeImage(NativeMsg::from(msg))
    }

    fn c(&self) -> &CImage {
        &self.0
    }

    pub fn width(&self) -> u32 {
        self.c().width
    }

    pub fn height(&self) -> u32 {
        self.c().height
    }

    pub fn step(&self) -> u32 {
        self.c().step
    }

    /// The encoding; invalid UTF-8 reads as itself replaced by `"<not UTF-8>"`, which no
    /// decoder accepts.
    pub fn encoding(&self) -> &str {
        let e = &self.c().encoding;
        std::str::from_utf8(slice(e.data as *const u8, e.size)).unwrap_or("<not UTF-8>")
    }

    pub fn data(&self) -> &[u8] {
        let d = &self.c().data;
        slice(d.data as *const u8, d.size)
    }

    /// Validates the message as a frame (as `convert::image_view` does for a Rust `Image`).
    pub fn view(&self) -> Result<ImageView<'_>, DecodeError> {
        ImageView::new(
            self.data(),
            self.width() as usize,
            self.height() as usize,
            self.step() as usize,
            self.encoding(),
            self.c().is_bigendian != 0,
        )
    }

    /// Writes the message's header into `h` (its `frame_id` string reused).
    pub fn header_into(&self, h: &mut Header) {
        header_into(&self.c().header, h);
    }

    /// The header stamp in ns ([`crate::ros::convert::stamp_ns`]).
    pub fn stamp_ns(&self) -> i64 {
        stamp_ns(&self.c().header)
    }

    /// `WxH "encoding" step S data N B`, for error messages.
    pub fn describe(&self) -> String {
        format!(
            "{}x{} {:?} step {} data {} B",
            self.width(),
            self.height(),
            self.encoding(),
            self.step(),
            self.data().len()
        )
    }

    /// The C message itself (to republish it unchanged with `publish_native`).
    pub fn native_mut(&mut self) -> &mut NativeMsg<Image> {
        &mut self.0
    }
}

/// The images of one subscription, taken without waiting by the spinning thread.
pub struct ImageTaker {
    stream: Box<dyn Stream<Item = NativeMsg<Image>> + Unpin>,
}

// SAFETY: the stream is r2r's channel receiver of native messages, which is `Send` but for
// its item type; the items are `NativeImage`s (see its `Send`).
unsafe impl Send for ImageTaker {}

impl ImageTaker {
    /// Subscribes to `topic` (`sensor_msgs/msg/Image`).
    pub fn subscribe(node: &mut r2r::Node, topic: &str, qos: QosProfile) -> r2r::Result<Self> {
        let stream = node.subscribe_native::<Image>(topic, qos)?;
        Ok(ImageTaker {
            stream: Box::new(stream),
        })
    }

    /// The next image already received, if any (call after `spin_once`).
    pub fn try_take(&mut self) -> Option<NativeImage> {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        match self.stream.poll_next_unpin(&mut cx) {
            Poll::Ready(Some(m)) => Some(NativeImage(m)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(encoding: &str, w: u32, h: u32, step: u32, len: usize) -> Image {
        Image {
            header: Header {
                stamp: r2r::builtin_interfaces::msg::Time {
                    sec: 12,
                    nanosec: 345,
                },
                frame_id: "cam0".into(),
            },
            height: h,
            width: w,
            encoding: encoding.into(),
            is_bigendian: 0,
            step,
            data: (0..len).map(|i| (i * 7) as u8).collect(),
        }
    }

    #[test]
    fn a_native_image_reads_as_the_rust_one() {
        let msg = image("bgr8", 5, 3, 16, 48);
        let n = NativeImage::from_image(&msg);
        assert_eq!((n.width(), n.height(), n.step()), (5, 3, 16));
        assert_eq!(n.encoding(), "bgr8");
        assert_eq!(n.data(), &msg.data[..]);
        let (a, b) = (
            n.view().unwrap(),
            super::super::convert::image_view(&msg).unwrap(),
        );
        assert_eq!(a.layout(), b.layout());
        assert_eq!(a.data(), b.data());
        let mut h = Header {
            frame_id: "a much longer frame id than before".into(),
            ..Default::default()
        };
        n.header_into(&mut h);
        assert_eq!(h, msg.header);
        assert_eq!(n.describe(), "5x3 \"bgr8\" step 16 data 48 B");
    }

    #[test]
    fn bad_native_images_are_errors() {
        for msg in [
            image("bgr8", 5, 3, 16, 47), // short data
            image("bgr8", 5, 3, 14, 48), // step below the row
            image("yuv9", 5, 3, 16, 48), // unknown encoding
            image("mono8", 0, 0, 0, 0),  // empty
        ] {
            let n = NativeImage::from_image(&msg);
            assert!(n.view().is_err(), "{}", n.describe());
            assert!(super::super::convert::image_view(&msg).is_err());
        }
    }
}
