//! Image types: a borrowed, strided view of a camera frame (as in `sensor_msgs/Image`) and an
//! owned, tightly packed 8-bit gray image used by every stage.
//!
//! May import: `error`.

mod io;
mod view;

pub use io::{
    decode_encoded, decode_encoded_into, load_view_owned, save_gray_png, save_rgb_png, OwnedFrame,
};
pub use view::{Encoding, FrameLayout, ImageView, MAX_PIXELS, MAX_SIDE};

/// Tightly packed 8-bit single-channel image (`step == width`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrayImage {
    pub width: usize,
    pub height: usize,
    pub data: Vec<u8>,
}

impl GrayImage {
    pub fn new(width: usize, height: usize) -> Self {
        GrayImage {
            width,
            height,
            data: vec![0; width * height],
        }
    }

    /// Wraps `data` (must be exactly `width * height` bytes).
    pub fn from_vec(width: usize, height: usize, data: Vec<u8>) -> Option<Self> {
        (data.len() == width * height).then_some(GrayImage {
            width,
            height,
            data,
        })
    }

    /// Resizes in place, reusing the allocation when it is large enough.
    pub fn reshape(&mut self, width: usize, height: usize) {
        self.width = width;
        self.height = height;
        self.data.resize(width * height, 0);
    }

    #[inline]
    pub fn get(&self, x: usize, y: usize) -> u8 {
        self.data[y * self.width + x]
    }

    #[inline]
    pub fn row(&self, y: usize) -> &[u8] {
        &self.data[y * self.width..(y + 1) * self.width]
    }

    #[inline]
    pub fn row_mut(&mut self, y: usize) -> &mut [u8] {
        let w = self.width;
        &mut self.data[y * w..(y + 1) * w]
    }
}
