//! `describe.*`: the ORB descriptor stage's settings, OpenCV ORB's or ORB-SLAM3's.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DescribeConfig {
    /// ORB rBRIEF descriptors (32 bytes) of the kept keypoints, as `ORB::detectAndCompute`.
    pub enabled: bool,
    /// The 7x7 sigma-2 blur the descriptor samples, as its consumer calls `GaussianBlur`.
    pub blur: DescriptorBlur,
    /// The rotated pattern offsets with one fused multiply-add each, as GCC compiles
    /// ORB-SLAM3's descriptor where FMA is in the target (`-march=native` on an FMA CPU, its
    /// default build; every aarch64 build, Jetsons included): `fma(px, a, -(py*b))`,
    /// `fma(px, b, py*a)`. Off: two rounded products, as OpenCV's ORB (docs/slam.md).
    pub fma: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DescriptorBlur {
    /// OpenCV ORB: a non-isolated ROI of its padded pyramid, OpenCV's float path.
    Orb,
    /// ORB-SLAM3: a continuous clone of the level, OpenCV's bit-exact fixed-point path
    /// (kernel 18 34 48 56 48 34 18 / 256, as `cpu::blur`).
    OrbSlam3,
}

impl Default for DescribeConfig {
    fn default() -> Self {
        DescribeConfig {
            enabled: true,
            blur: DescriptorBlur::Orb,
            fma: false,
        }
    }
}
