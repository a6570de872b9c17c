//! `gpu_features`: ORB-style oriented FAST corners (with ORB's Harris score) and Canny edges
//! over an image pyramid, with a plain-Rust CPU reference that matches OpenCV bit for bit
//! and a CUDA backend that must match the CPU reference.
//!
//! The library knows nothing of ROS: the node (`--features ros`) and the bag replay are thin
//! shells around [`Pipeline`].
//!
//! Data flow of one frame (each arrow is a stage with the same name in `cpu/`, `cuda/` and
//! `kernels/`):
//!
//! ```text
//! bytes --decode--> gray level 0 --pyramid--> levels
//!   |-> fast (+ harris score) -> nms -> select (budget, spread) -> orient -> keypoints
//!   |                                          (blurred levels) -> describe -> descriptors
//!   '-> canny (blur, sobel, magnitude, nms, hysteresis) ------------------> edge map
//! ```

#[cfg(feature = "tools")]
pub mod bag;
#[cfg(feature = "tools")]
pub mod bench;
pub mod camera;
pub mod cdr;
pub mod config;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod error;
#[cfg(feature = "tools")]
pub mod eval;
pub mod features;
#[cfg(feature = "tools")]
pub mod fuzzing;
pub mod image;
pub mod levels;
pub mod matching;
pub mod output;
pub mod pipeline;
pub mod process;
#[cfg(feature = "tools")]
pub mod replay;
#[cfg(feature = "tools")]
pub mod report;
#[cfg(feature = "ros")]
pub mod ros;
pub mod select;
#[cfg(feature = "tools")]
pub mod soak;
pub mod std_sort;
pub mod track;

pub use config::Config;
pub use error::{DecodeError, Error, Result};
pub use features::{Descriptor, Features, Keypoint, StageTiming};
pub use image::{AsGray, Encoding, FrameLayout, Gray, GrayImage, ImageView};
pub use pipeline::{BackendChoice, BackendKind, Pipeline};
