//! What a frame produces, shared by the pipeline and both backends (which import it from
//! here, not from `pipeline`, so that no module imports its own caller).
//!
//! May import: `config`, `error`, `image`.

use crate::config::Config;
use crate::image::GrayImage;

/// One detected keypoint, in level-0 pixel coordinates (as OpenCV's `KeyPoint`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Keypoint {
    pub x: f32,
    pub y: f32,
    /// Harris score, FAST score or dense Harris response, as configured.
    pub response: f32,
    /// Diameter of the meaningful neighbourhood in level-0 pixels (patch size * scale).
    pub size: f32,
    /// Orientation in degrees in [0, 360), or -1 when orientation is off.
    pub angle: f32,
    /// Pyramid level the keypoint was found on.
    pub octave: i32,
}

/// A 256-bit rBRIEF descriptor (OpenCV ORB's `CV_8U` row of 32 bytes, bit `j` of byte `i`
/// is test pair `8i + j`); compared with the Hamming distance.
pub type Descriptor = [u8; 32];

/// Wall time of one stage, in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTiming {
    pub stage: &'static str,
    pub ms: f64,
    /// Ran beside the stages after it (Canny on its own CUDA stream): part of no sum of the
    /// frame's critical path.
    pub overlapped: bool,
}

/// The CUDA backend's GPU time after the decode as a whole (the pyramid to the last
/// download, Canny beside it), timed by two events around the graphs on frames whose graphs
/// hold no stage events (halfway between two `cuda.stage_timings` frames): the stage events'
/// nodes cost GPU time themselves. Marked `overlapped` (it spans the other stages).
pub const AFTER_DECODE_STAGE: &str = "after decode (no stage events)";

/// Everything one frame produces.
#[derive(Clone, Debug, Default)]
pub struct Features {
    /// Sorted by (octave, y, x): deterministic on every backend.
    pub keypoints: Vec<Keypoint>,
    /// One ORB descriptor per keypoint, same order, when `describe.enabled` (else empty).
    pub descriptors: Vec<Descriptor>,
    /// Canny edge map of level 0 (0/255), when Canny is enabled.
    pub edges: Option<GrayImage>,
    /// (width, height) of every pyramid level.
    pub level_sizes: Vec<(usize, usize)>,
    pub timings: Vec<StageTiming>,
}

impl Features {
    /// The descriptors for the outputs (CSV column, PointCloud2 field): `Some` when `cfg`
    /// computes them (one per keypoint, possibly none), `None` when `describe` is off.
    pub fn descriptors_for(&self, cfg: &Config) -> Option<&[Descriptor]> {
        cfg.describe.enabled.then_some(&self.descriptors[..])
    }
}

/// The error for a caller's edge-map buffer (`Pipeline::process_into_edges`) whose length is
/// not the frame's `width * height`.
pub(crate) fn check_edges_len(len: usize, width: usize, height: usize) -> crate::error::Result<()> {
    if len == width * height {
        return Ok(());
    }
    Err(crate::Error::Config(format!(
        "edge map buffer of {len} bytes for a {width}x{height} frame (needs {})",
        width * height
    )))
}
