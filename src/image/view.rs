//! A validated, borrowed view of one camera frame: the fields of `sensor_msgs/Image`.

use crate::error::DecodeError;

/// Largest accepted side, in pixels (16K covers every camera we know of).
pub const MAX_SIDE: usize = 16384;
/// Largest accepted frame, in pixels (about 268 Mpx).
pub const MAX_PIXELS: usize = 1 << 28;

/// Pixel encodings accepted on input, named as in `sensor_msgs/image_encodings.hpp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `mono8` and `8UC1`.
    Mono8,
    /// `mono16` and `16UC1`.
    Mono16,
    Rgb8,
    Bgr8,
    Rgba8,
    Bgra8,
    /// `yuv422` / `uyvy`: bytes U Y0 V Y1.
    Uyvy,
    /// `yuv422_yuy2` / `yuyv`: bytes Y0 U Y1 V.
    Yuyv,
}

impl Encoding {
    /// Parses a `sensor_msgs/Image` encoding string.
    pub fn parse(s: &str) -> Result<Self, DecodeError> {
        Ok(match s {
            "mono8" | "8UC1" => Encoding::Mono8,
            "mono16" | "16UC1" => Encoding::Mono16,
            "rgb8" => Encoding::Rgb8,
            "bgr8" => Encoding::Bgr8,
            "rgba8" => Encoding::Rgba8,
            "bgra8" => Encoding::Bgra8,
            "yuv422" | "uyvy" => Encoding::Uyvy,
            "yuv422_yuy2" | "yuyv" => Encoding::Yuyv,
            other => return Err(DecodeError::UnknownEncoding(other.to_string())),
        })
    }

    /// The canonical ROS name.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Mono8 => "mono8",
            Encoding::Mono16 => "mono16",
            Encoding::Rgb8 => "rgb8",
            Encoding::Bgr8 => "bgr8",
            Encoding::Rgba8 => "rgba8",
            Encoding::Bgra8 => "bgra8",
            Encoding::Uyvy => "yuv422",
            Encoding::Yuyv => "yuv422_yuy2",
        }
    }

    pub fn bytes_per_pixel(self) -> usize {
        match self {
            Encoding::Mono8 => 1,
            Encoding::Mono16 | Encoding::Uyvy | Encoding::Yuyv => 2,
            Encoding::Rgb8 | Encoding::Bgr8 => 3,
            Encoding::Rgba8 | Encoding::Bgra8 => 4,
        }
    }

    pub const ALL: [Encoding; 8] = [
        Encoding::Mono8,
        Encoding::Mono16,
        Encoding::Rgb8,
        Encoding::Bgr8,
        Encoding::Rgba8,
        Encoding::Bgra8,
        Encoding::Uyvy,
        Encoding::Yuyv,
    ];
}

/// A frame whose geometry has been checked against its buffer: every pixel it names is in
/// `data`, so stages can index without further checks.
#[derive(Clone, Copy, Debug)]
pub struct ImageView<'a> {
    data: &'a [u8],
    width: usize,
    height: usize,
    step: usize,
    encoding: Encoding,
    big_endian: bool,
}

impl<'a> ImageView<'a> {
    /// Validates a frame as it arrives in a `sensor_msgs/Image`.
    pub fn new(
        data: &'a [u8],
        width: usize,
        height: usize,
        step: usize,
        encoding: &str,
        big_endian: bool,
    ) -> Result<Self, DecodeError> {
        Self::with_encoding(
            data,
            width,
            height,
            step,
            Encoding::parse(encoding)?,
            big_endian,
        )
    }

    pub fn with_encoding(
        data: &'a [u8],
        width: usize,
        height: usize,
        step: usize,
        encoding: Encoding,
        big_endian: bool,
    ) -> Result<Self, DecodeError> {
        let layout = FrameLayout {
            width,
            height,
            step,
            encoding,
            big_endian,
        };
        let need = layout.bytes().map_err(|e| match e {
            DecodeError::BufferTooShort { need, .. } => DecodeError::BufferTooShort {
                len: data.len(),
                need,
            },
            e => e,
        })?;
        if data.len() < need {
            return Err(DecodeError::BufferTooShort {
                len: data.len(),
                need,
            });
        }
        Ok(ImageView {
            data,
            width,
            height,
            step,
            encoding,
            big_endian,
        })
    }

    /// The frame's geometry.
    pub fn layout(&self) -> FrameLayout {
        FrameLayout {
            width: self.width,
            height: self.height,
            step: self.step,
            encoding: self.encoding,
            big_endian: self.big_endian,
        }
    }

    /// A tightly packed mono8 view.
    pub fn mono8(data: &'a [u8], width: usize, height: usize) -> Result<Self, DecodeError> {
        Self::with_encoding(data, width, height, width, Encoding::Mono8, false)
    }

    /// The frame itself as a gray image when it is one already: mono8 without row padding
    /// (`step == width`). The CPU pipeline then reads it in place instead of copying it.
    pub fn packed_mono8(&self) -> Option<super::Gray<'a>> {
        (self.encoding == Encoding::Mono8 && self.step == self.width)
            .then(|| {
                super::Gray::new(
                    self.width,
                    self.height,
                    &self.data[..self.width * self.height],
                )
            })
            .flatten()
    }

    pub fn data(&self) -> &'a [u8] {
        self.data
    }
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn height(&self) -> usize {
        self.height
    }
    pub fn step(&self) -> usize {
        self.step
    }
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
    pub fn big_endian(&self) -> bool {
        self.big_endian
    }

    /// Bytes of row `y` that hold pixels (without the padding).
    #[inline]
    pub fn row(&self, y: usize) -> &'a [u8] {
        let start = y * self.step;
        &self.data[start..start + self.width * self.encoding.bytes_per_pixel()]
    }
}

/// A frame's geometry without its bytes: what a buffer must hold to be that frame
/// (`Pipeline::input_buffer` sizes its buffer from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    pub width: usize,
    pub height: usize,
    /// Bytes per row, at least `width * encoding.bytes_per_pixel()`.
    pub step: usize,
    pub encoding: Encoding,
    pub big_endian: bool,
}

impl FrameLayout {
    /// A tightly packed mono8 frame.
    pub fn mono8(width: usize, height: usize) -> Self {
        FrameLayout {
            width,
            height,
            step: width,
            encoding: Encoding::Mono8,
            big_endian: false,
        }
    }

    /// Checks the geometry as [`ImageView`] does (sizes, step, pixel pairs) and returns the
    /// bytes a frame of it holds (`step * height`).
    pub fn bytes(&self) -> Result<usize, DecodeError> {
        let FrameLayout {
            width,
            height,
            step,
            encoding,
            ..
        } = *self;
        if width == 0 || height == 0 {
            return Err(DecodeError::ZeroSize { width, height });
        }
        if width > MAX_SIDE || height > MAX_SIDE || width * height > MAX_PIXELS {
            return Err(DecodeError::TooLarge {
                width,
                height,
                max_side: MAX_SIDE,
                max_pixels: MAX_PIXELS,
            });
        }
        if matches!(encoding, Encoding::Uyvy | Encoding::Yuyv) && width % 2 == 1 {
            return Err(DecodeError::OddWidth {
                encoding: encoding.name().to_string(),
                width,
            });
        }
        let min = width * encoding.bytes_per_pixel();
        if step < min {
            return Err(DecodeError::StepTooSmall { step, min });
        }
        // The last row need only hold its pixels, but sensor_msgs promises step*height bytes;
        // holding publishers to that catches truncated messages early.
        let need = step
            .checked_mul(height)
            .ok_or(DecodeError::BufferTooShort {
                len: 0,
                need: usize::MAX,
            })?;
        Ok(need)
    }
}
