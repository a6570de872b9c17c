//! Image types: a borrowed, strided view of a camera frame (as in `sensor_msgs/Image`), an
//! owned, tightly packed 8-bit gray image, and the borrowed gray view every CPU stage reads
//! (a pipeline level, or a mono8 frame's own bytes without a copy).
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

impl GrayImage {
    /// The image as the borrowed view the CPU stages read.
    #[inline]
    pub fn view(&self) -> Gray<'_> {
        Gray {
            width: self.width,
            height: self.height,
            data: &self.data,
        }
    }
}

/// A borrowed, tightly packed 8-bit single-channel image: a [`GrayImage`]'s bytes, or a
/// mono8 frame's rows read in place (`step == width`). `Copy`: stages take it by value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gray<'a> {
    pub width: usize,
    pub height: usize,
    pub data: &'a [u8],
}

impl<'a> Gray<'a> {
    /// The 0 x 0 image.
    pub const EMPTY: Gray<'static> = Gray {
        width: 0,
        height: 0,
        data: &[],
    };

    /// Views `data` as `width x height` (`None` unless it is exactly `width * height` bytes).
    pub fn new(width: usize, height: usize, data: &'a [u8]) -> Option<Self> {
        (data.len() == width * height).then_some(Gray {
            width,
            height,
            data,
        })
    }

    #[inline]
    pub fn get(&self, x: usize, y: usize) -> u8 {
        self.data[y * self.width + x]
    }

    #[inline]
    pub fn row(&self, y: usize) -> &'a [u8] {
        &self.data[y * self.width..(y + 1) * self.width]
    }

    /// Rows `y` to the last as one slice, empty when `y` is past the last row: what a row
    /// scan prefetches ahead of itself (`cpu::simd::prefetch`).
    #[inline]
    pub fn rows_from(&self, y: usize) -> &'a [u8] {
        self.data.get(y * self.width..).unwrap_or(&[])
    }
}

/// What the CPU stages' public functions take: a [`GrayImage`] (by reference) or a [`Gray`].
pub trait AsGray {
    fn gray(&self) -> Gray<'_>;
}

impl AsGray for GrayImage {
    #[inline]
    fn gray(&self) -> Gray<'_> {
        self.view()
    }
}

impl AsGray for Gray<'_> {
    #[inline]
    fn gray(&self) -> Gray<'_> {
        *self
    }
}

impl<T: AsGray + ?Sized> AsGray for &T {
    #[inline]
    fn gray(&self) -> Gray<'_> {
        (**self).gray()
    }
}
