//! What the tracker takes a frame as ([`TrackInput`]): gray pixels on the host, a message's
//! frame in any encoding, or (GPU) the gray image the pipeline already has on the device,
//! and [`HostFrame`], which turns any of them into host pixels only when the CPU needs them;
//! the second stereo camera's frame as [`RightInput`].

use crate::image::{GrayImage, ImageView};

/// A frame for [`super::Tracker::track_input`].
#[derive(Clone, Copy)]
pub enum TrackInput<'a> {
    /// Gray pixels on the host.
    Gray(&'a GrayImage),
    /// A frame in any encoding the decode takes, converted to gray on the host as the CPU
    /// reference's decode does.
    View(&'a ImageView<'a>),
    /// The same frame's gray image already on the GPU (the pipeline's:
    /// `Pipeline::gray_on_device`) with the frame it came from: the GPU tracker builds its
    /// pyramid from the device copy (no host conversion, no upload); the view is decoded on
    /// the host only when the CPU needs the pixels (the FAST top-up, a GPU failure).
    #[cfg(feature = "cuda")]
    Device(crate::cuda::DeviceGray<'a>, &'a ImageView<'a>),
}

impl TrackInput<'_> {
    pub fn size(&self) -> (usize, usize) {
        match self {
            TrackInput::Gray(g) => (g.width, g.height),
            TrackInput::View(v) => (v.width(), v.height()),
            #[cfg(feature = "cuda")]
            TrackInput::Device(_, v) => (v.width(), v.height()),
        }
    }
}

/// The second camera's frame for [`super::Tracker::track_right_input`] (stereo).
#[derive(Clone, Copy)]
pub enum RightInput<'a> {
    /// Gray pixels on the host.
    Gray(&'a GrayImage),
    /// Gray pixels on the GPU (a copy kept from that camera's pipeline:
    /// `crate::cuda::KeptGray`): the GPU tracker builds the right pyramid from it with a
    /// device copy; a tracker on the CPU cannot read it (an error for that frame).
    #[cfg(feature = "cuda")]
    Device(crate::cuda::DeviceGray<'a>),
}

impl<'a> RightInput<'a> {
    /// The pixels when they are on the host.
    pub(super) fn host(self) -> Option<&'a GrayImage> {
        match self {
            RightInput::Gray(g) => Some(g),
            #[cfg(feature = "cuda")]
            RightInput::Device(_) => None,
        }
    }

    pub fn size(&self) -> (usize, usize) {
        match self {
            RightInput::Gray(g) => (g.width, g.height),
            #[cfg(feature = "cuda")]
            RightInput::Device(g) => (g.width(), g.height()),
        }
    }
}

/// A frame's host pixels, made on first use (into a buffer the tracker keeps).
pub(super) struct HostFrame<'a> {
    pub(super) input: TrackInput<'a>,
    pub(super) buf: GrayImage,
    ready: bool,
}

impl<'a> HostFrame<'a> {
    /// `input` with `buf` to decode into. A device image whose size is not the view's is
    /// not used (the view is decoded instead).
    pub(super) fn new(input: TrackInput<'a>, buf: GrayImage) -> Self {
        let input = match input {
            #[cfg(feature = "cuda")]
            TrackInput::Device(g, v) if (g.width(), g.height()) != (v.width(), v.height()) => {
                TrackInput::View(v)
            }
            i => i,
        };
        HostFrame {
            input,
            buf,
            ready: false,
        }
    }

    /// The gray pixels on the host.
    pub(super) fn pixels(&mut self) -> &GrayImage {
        let view = match self.input {
            TrackInput::Gray(g) => return g,
            TrackInput::View(v) => v,
            #[cfg(feature = "cuda")]
            TrackInput::Device(_, v) => v,
        };
        if !self.ready {
            crate::cpu::decode::decode(view, &mut self.buf);
            self.ready = true;
        }
        &self.buf
    }

    /// The gray image on the GPU, if the frame came with one.
    #[cfg(feature = "cuda")]
    pub(super) fn device(&self) -> Option<crate::cuda::DeviceGray<'a>> {
        match self.input {
            TrackInput::Device(g, _) => Some(g),
            _ => None,
        }
    }
}
