//! One error type for the whole library; input problems are values, never panics.
//!
//! May import: nothing of the crate.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an input image buffer was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown or unsupported encoding {0:?} (supported: mono8, 8UC1, mono16, 16UC1, rgb8, bgr8, rgba8, bgra8, yuv422/uyvy, yuv422_yuy2/yuyv)")]
    UnknownEncoding(String),
    #[error("image size {width}x{height} is empty")]
    ZeroSize { width: usize, height: usize },
    #[error("image size {width}x{height} exceeds the limit of {max_side} pixels per side / {max_pixels} pixels")]
    TooLarge {
        width: usize,
        height: usize,
        max_side: usize,
        max_pixels: usize,
    },
    #[error("step {step} is smaller than width*bytes_per_pixel = {min}")]
    StepTooSmall { step: usize, min: usize },
    #[error("data has {len} bytes but step*height = {need}")]
    BufferTooShort { len: usize, need: usize },
    #[error("encoding {encoding} packs pixel pairs and needs an even width, got {width}")]
    OddWidth { encoding: String, width: usize },
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bad input image: {0}")]
    Decode(#[from] DecodeError),
    #[error("config: {0}")]
    Config(String),
    #[error("cuda: {0}")]
    Cuda(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    ImageFile { path: PathBuf, msg: String },
    #[error("bag: {0}")]
    Bag(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
