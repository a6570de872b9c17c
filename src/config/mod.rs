//! The configuration tree: YAML files, ROS parameters and the CLI's `--set key=value` all use
//! the same dotted names (`canny.low_threshold`, `pyramid.levels`, ...), derived from this one
//! serde tree. `config/default.yaml` documents every field.
//!
//! May import: `error`, `levels`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
pub use crate::levels::Scales;

mod cpu;
mod describe;
mod dotted;
mod duration;
pub mod schema;
mod validate;

pub use cpu::{CpuConfig, MAX_CPU_THREADS};
pub use describe::{DescribeConfig, DescriptorBlur};
pub use duration::parse_duration;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub pyramid: PyramidConfig,
    pub detector: DetectorConfig,
    pub select: SelectConfig,
    pub orient: OrientConfig,
    pub canny: CannyConfig,
    pub describe: DescribeConfig,
    pub track: TrackConfig,
    pub cpu: CpuConfig,
    pub cuda: CudaConfig,
}

/// Feature tracks for VIO front-ends (the `track` module): VINS-Fusion's `feature_tracker`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrackConfig {
    /// Track features from frame to frame (off by default; on in config/vins_frontend.yaml).
    pub enabled: bool,
    /// Tracks kept per frame (VINS `max_cnt`).
    pub max_features: u32,
    /// Minimum distance between tracks, pixels (VINS `min_dist`).
    pub min_distance: f64,
    /// LK window side (odd).
    pub window: u32,
    /// LK pyramid levels above the image (`maxLevel`).
    pub levels: u32,
    /// Track back and keep the points that return within 0.5 px (VINS-Fusion `flow_back`).
    pub flow_back: bool,
    /// Fundamental-matrix RANSAC threshold in pixels (VINS `F_threshold`); 0 = off.
    pub ransac_threshold: f64,
    /// With two inputs, also find the first input's tracks in the second (VINS-Fusion's
    /// stereo mode).
    pub stereo: bool,
    /// Where new features come from.
    pub detector: TrackDetector,
    /// `goodFeaturesToTrack` quality level.
    pub quality: f64,
    /// FAST threshold of the `fast` top-up detector.
    pub fast_threshold: u32,
    /// The order in which tracks of one age claim their disc in VINS's mask.
    pub mask_order: MaskOrder,
    /// How pixels become normalised coordinates (`x_n`, `y_n`) and velocities.
    pub lifting: Lifting,
    /// `feature` (VINS's message) for every Nth tracked frame only, counted from the
    /// tracker's start and each restart: the 2nd, 4th, ... with 2, as VINS-Fusion's own
    /// image path hands its estimator frames with `multiple_thread: 1`. Every frame is still
    /// tracked and its `tracks` published.
    pub feature_every: u32,
    /// Whose front-end the tracker and its `feature` messages follow ([`Frontend`]).
    pub frontend: Frontend,
    /// `vins_mono`: VINS-Mono's `freq`, the `feature` messages per second it aims at (its
    /// frequency control picks the frames; only those get the F test, the mask and new
    /// corners); 0 = 100, as VINS-Mono reads a missing value.
    pub freq: u32,
    /// Equalise each frame before tracking with OpenCV's CLAHE, clip 3, 8x8 tiles
    /// (VINS-Mono's `equalize: 1`; `cpu::clahe`, on the host for either backend).
    pub equalize: bool,
}

/// Whose front-end the tracker follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Frontend {
    /// VINS-Fusion's `FeatureTracker::trackImage`: every frame fully tracked (flow, mask, new
    /// corners, lifting), a `feature` message per frame or per `feature_every` frames.
    VinsFusion,
    /// VINS-Mono's `feature_tracker` node: the first frame only starts the clock; the
    /// frequency control (`freq`) picks the frames that get the F test, the mask, new corners
    /// and a `feature` message (the first such message is not sent, as VINS-Mono's), which
    /// carries only tracks seen at least twice; a new track's velocity is 0 on its second
    /// frame too (VINS-Mono lifts new points before they have an ID); a gap over 1 s or a
    /// time going back sends `restart` instead of that frame, and the next frame starts the
    /// clock again.
    VinsMono,
}

/// The order of VINS's `setMask` among tracks of one age.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaskOrder {
    /// As VINS built with libstdc++ leaves them: its `std::sort` (introsort, not stable),
    /// reproduced step for step (`std_sort`).
    Vins,
    /// Stable: among one age the earlier track first (what a rewrite with a stable sort,
    /// e.g. Python's, does).
    Stable,
}

/// How the tracker lifts pixels to the normalised plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifting {
    /// camodocal's `liftProjective`, what VINS computes: the recursive distortion inverse
    /// (8 steps, PINHOLE / plumb_bob and MEI), the result rounded to f32 as VINS's
    /// `cv::Point2f`, velocities from those f32 values.
    Camodocal,
    /// `cv::undistortPoints` (`cv::fisheye::undistortPoints` for equidistant), in f64.
    Opencv,
}

/// The tracker's top-up detector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrackDetector {
    /// `cv::goodFeaturesToTrack` (Shi-Tomasi), as VINS.
    Gftt,
    /// FAST-9 with NMS ranked by ORB's Harris score.
    Fast,
}

impl Default for TrackConfig {
    fn default() -> Self {
        TrackConfig {
            enabled: false,
            max_features: 150,
            min_distance: 30.0,
            window: 21,
            levels: 3,
            flow_back: true,
            ransac_threshold: 1.0,
            stereo: false,
            detector: TrackDetector::Gftt,
            quality: 0.01,
            fast_threshold: 20,
            mask_order: MaskOrder::Vins,
            lifting: Lifting::Camodocal,
            feature_every: 1,
            frontend: Frontend::VinsFusion,
            freq: 10,
            equalize: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PyramidConfig {
    /// Number of levels (1 = the input image only).
    pub levels: u32,
    /// Size ratio between consecutive levels.
    pub scale_factor: f32,
    /// Resize kernel between levels.
    pub interpolation: Interpolation,
    /// Whose level scales: `orb` (OpenCV ORB) or `orb_slam3` (ORB-SLAM3's running product,
    /// integer keypoint sizes); see [`Scales`].
    pub scales: Scales,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interpolation {
    /// `cv::resize(..., INTER_LINEAR)` on 8-bit images (11-bit fixed-point weights).
    Linear,
    /// `cv::resize(..., INTER_LINEAR_EXACT)`, what OpenCV's ORB uses for its pyramid.
    LinearExact,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetectorMethod {
    /// FAST-9/16 candidates (optionally ranked by ORB's Harris score).
    Fast,
    /// Dense Harris response (`cv::cornerHarris`) + 3x3 NMS + threshold; no FAST.
    Harris,
    /// No corner detection (edges only).
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreType {
    /// ORB's Harris score (7x7 block, k = 0.04) of each FAST corner.
    Harris,
    /// The FAST score itself.
    Fast,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DetectorConfig {
    pub method: DetectorMethod,
    /// FAST threshold (ORB-SLAM3 `iniThFAST`).
    pub fast_threshold: u32,
    /// Threshold for the low-threshold retry in empty cells (ORB-SLAM3 `minThFAST`).
    pub min_fast_threshold: u32,
    /// Retry empty grid cells with `min_fast_threshold` (ORB-SLAM3); needs `select.spread`
    /// `grid` or `quadtree`.
    pub low_threshold_retry: bool,
    /// FAST 3x3 non-maximum suppression on the FAST score.
    pub nonmax_suppression: bool,
    /// Keypoints closer than this to a level's border are dropped (ORB `edgeThreshold`).
    pub border: u32,
    /// The response used to rank FAST corners.
    pub score: ScoreType,
    /// Harris `k` (ORB score and dense Harris).
    pub harris_k: f32,
    /// Block size of ORB's Harris score.
    pub harris_block_size: u32,
    /// Dense Harris (`method: harris`): `cv::cornerHarris` block size.
    pub dense_block_size: u32,
    /// Dense Harris: Sobel aperture (3, 5 or 7).
    pub dense_ksize: u32,
    /// Dense Harris: keep local maxima above this fraction of the level's largest response.
    pub dense_quality: f32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Spread {
    /// Keep the best `n` per level by response (OpenCV ORB `retainBest`).
    None,
    /// Keep the best keypoints of each `cell_size` cell, round robin over cells.
    Grid,
    /// ORB-SLAM3's quadtree (`DistributeOctTree`): split until `n` nodes, best per node.
    Quadtree,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelectConfig {
    /// Keypoint budget per frame, split over levels as ORB does; 0 = keep all.
    pub max_keypoints: u32,
    pub spread: Spread,
    /// Cell side in level pixels for `grid` spread and the low-threshold retry.
    pub cell_size: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OrientConfig {
    /// Intensity-centroid orientation; when off, `angle` is -1 (as `cv::FAST`).
    pub enabled: bool,
    /// Diameter of the circular patch (ORB `patchSize`); also the keypoint `size` at level 0.
    pub patch_size: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CannyConfig {
    pub enabled: bool,
    pub low_threshold: f64,
    pub high_threshold: f64,
    /// L2 gradient magnitude (true) or L1 (false), as `cv::Canny`'s `L2gradient`.
    pub l2_gradient: bool,
    /// Gaussian pre-blur kernel size (0 = no blur; else odd, 3..=31).
    pub blur_ksize: u32,
    /// Gaussian sigma (0 = derived from the size, as `cv::GaussianBlur`).
    pub blur_sigma: f64,
}

/// Settings of the CUDA backend only (the CPU backend ignores them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CudaConfig {
    /// Whether the kernels read the frame straight from pinned host memory.
    pub zero_copy: ZeroCopy,
    /// Whether a frame's launches after the decode are recorded once as CUDA graphs (per
    /// resolution and config) and replayed, one call per stream instead of one per kernel.
    /// Only with the GPU selection (`select.spread: none` and a budget); off is for
    /// comparing (docs/performance.md, change 20).
    pub graphs: bool,
    /// The stages (`Features::timings`) are timed by CUDA events on every N-th frame only
    /// (the first one included; 1 = every frame, 0 = never): with the graphs the events'
    /// nodes cost ~35 us per 1080p frame on the H100 (docs/performance.md, change 22),
    /// without them reading the events ~20 us (change 25). The other frames report the
    /// host's stage alone.
    pub stage_timings: u32,
    /// Whether a kernel may be placed on the GPU while the one before it in its stream
    /// drains (programmatic dependent launch; sm_90 and later, ignored before): every
    /// kernel waits for its predecessor's writes before it reads or writes anything, so
    /// the output is the same either way (docs/performance.md, change 42).
    pub programmatic_launch: bool,
    /// The node only: when it takes a frame from the middleware, it wakes the process's
    /// helper threads (`cuda::driver::crew`), which then spin this many microseconds waiting for the
    /// frame's copy into pinned memory instead of sleeping until the copy starts; 0 = they
    /// sleep (docs/performance.md, change 68: the 1080p copy and upload after a camera's
    /// idle gap 0.16-0.17 -> 0.10-0.12 ms on the H100 machine); -1 = auto: 200 on a
    /// discrete GPU, 0 on an integrated one (Jetson: the spin's CPU, docs/jetson.md).
    pub prewake_us: i32,
    /// The node only, one input only: when its frames come at a steady rate, one small
    /// round trip to the GPU (a 4-byte memset and its wait) this many microseconds before
    /// the next frame is due, which wakes the driver and the GPU from the idle spell between
    /// frames (docs/performance.md, change 79); 0 = none; -1 = auto: 500 on a discrete GPU, 0
    /// on an integrated one (not measured on a Jetson).
    pub warm_ahead_us: i32,
    /// The process's copy crew (`cuda::driver::crew`): how many helper threads copy a frame into
    /// pinned memory and unpack the edge map beside the calling thread; 0 = auto (half the
    /// cores, at most 8; on an integrated GPU a quarter, at most 2). Read when the first CUDA
    /// pipeline of the process starts (a later change needs a restart). docs/jetson.md has
    /// the CPU it costs per frame.
    pub crew_threads: u32,
    /// Whether an 8-bit colour frame (rgb8, bgr8, rgba8, bgra8) is converted to gray on the
    /// host, by the threads that copy it into pinned memory (x86-64 with AVX2, bit for bit
    /// the GPU's conversion), so that only the gray image goes up to the GPU: a third (a
    /// quarter) of the bytes. Off, or without AVX2, or with the frame read in place
    /// (`zero_copy`): the frame goes up as it came and the GPU converts it.
    pub host_gray: bool,
}

impl Default for CudaConfig {
    fn default() -> Self {
        CudaConfig {
            zero_copy: ZeroCopy::default(),
            graphs: true,
            stage_timings: 16,
            programmatic_launch: true,
            prewake_us: -1,
            warm_ahead_us: -1,
            crew_threads: 0,
            host_gray: true,
        }
    }
}

/// How the frame reaches the GPU. Zero copy maps the pinned input buffer into the device's
/// address space: the first kernel reads the frame from host memory, with no upload. On an
/// integrated GPU (Jetson), whose memory is the host's, that removes a copy of the frame.
/// On a discrete GPU the kernel reads over PCIe: on the H100 one 1080p or 4K camera got
/// 8-11 % faster, 720p and four cameras at once slower (docs/performance.md, change 14),
/// so `auto` keeps the upload there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ZeroCopy {
    /// On for integrated GPUs (`CU_DEVICE_ATTRIBUTE_INTEGRATED`), off for discrete ones.
    #[default]
    Auto,
    /// Always map (an error on a GPU that cannot map host memory).
    On,
    /// Always upload through pinned staging.
    Off,
}

// By hand rather than derived: YAML 1.1 readers (PyYAML under `ros2 param set`, launch
// files) turn a bare `on` / `off` into a boolean, so true and false are accepted too.
impl<'de> Deserialize<'de> for ZeroCopy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = ZeroCopy;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("auto, on or off")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<ZeroCopy, E> {
                Ok(if v { ZeroCopy::On } else { ZeroCopy::Off })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<ZeroCopy, E> {
                match v {
                    "auto" => Ok(ZeroCopy::Auto),
                    "on" | "true" => Ok(ZeroCopy::On),
                    "off" | "false" => Ok(ZeroCopy::Off),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(Visit)
    }
}

impl Default for PyramidConfig {
    fn default() -> Self {
        PyramidConfig {
            levels: 8,
            scale_factor: 1.2,
            interpolation: Interpolation::Linear,
            scales: Scales::Orb,
        }
    }
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            method: DetectorMethod::Fast,
            fast_threshold: 20,
            min_fast_threshold: 7,
            low_threshold_retry: false,
            nonmax_suppression: true,
            border: 31,
            score: ScoreType::Harris,
            harris_k: 0.04,
            harris_block_size: 7,
            dense_block_size: 2,
            dense_ksize: 3,
            dense_quality: 0.01,
        }
    }
}

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            max_keypoints: 2000,
            spread: Spread::None,
            cell_size: 30,
        }
    }
}

impl Default for OrientConfig {
    fn default() -> Self {
        OrientConfig {
            enabled: true,
            patch_size: 31,
        }
    }
}

impl Default for CannyConfig {
    fn default() -> Self {
        CannyConfig {
            enabled: true,
            low_threshold: 50.0,
            high_threshold: 150.0,
            l2_gradient: true,
            blur_ksize: 0,
            blur_sigma: 0.0,
        }
    }
}

impl Config {
    /// Parses YAML text (unknown keys and out-of-range values are errors).
    pub fn from_yaml(text: &str) -> Result<Self> {
        let cfg: Config = serde_yaml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::from_yaml(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).expect("config serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_roundtrip() {
        let c = Config::default();
        c.validate().unwrap();
        assert_eq!(Config::from_yaml(&c.to_yaml()).unwrap(), c);
    }

    #[test]
    fn unknown_key_is_named() {
        let e = Config::from_yaml("canny:\n  lo: 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `lo`"), "{e}");
    }

    #[test]
    fn out_of_range_is_named() {
        let e = Config::from_yaml("pyramid:\n  levels: 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("pyramid.levels"), "{e}");
        let e = Config::from_yaml("pyramid:\n  scale_factor: 1.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("pyramid.scale_factor"), "{e}");
    }

    #[test]
    fn dotted_updates_are_atomic() {
        let c = Config::default();
        let d = c.with_value("canny.low_threshold", "10").unwrap();
        assert_eq!(d.canny.low_threshold, 10.0);
        assert!(c.with_value("canny.nope", "1").is_err());
        assert!(c.with_value("pyramid.levels", "99").is_err());
        assert!(c.with_value("canny", "1").is_err());
        let keys: Vec<_> = c.flatten().into_iter().map(|(k, _)| k).collect();
        assert!(keys.contains(&"detector.fast_threshold".to_string()));
    }

    #[test]
    fn zero_copy_takes_names_and_yaml_booleans() {
        let c = Config::default();
        assert_eq!(c.cuda.zero_copy, ZeroCopy::Auto);
        for (v, want) in [
            ("auto", ZeroCopy::Auto),
            ("on", ZeroCopy::On),
            ("off", ZeroCopy::Off),
            ("true", ZeroCopy::On),
            ("false", ZeroCopy::Off),
            ("'on'", ZeroCopy::On),
        ] {
            assert_eq!(
                c.with_value("cuda.zero_copy", v).unwrap().cuda.zero_copy,
                want,
                "{v}"
            );
        }
        let e = c
            .with_value("cuda.zero_copy", "sometimes")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cuda.zero_copy") && e.contains("auto, on or off"),
            "{e}"
        );
        let back = c.with_value("cuda.zero_copy", "on").unwrap();
        assert_eq!(Config::from_yaml(&back.to_yaml()).unwrap(), back);
    }

    /// `cuda.graphs` is on unless a config says otherwise, in a file, a `--set` or a
    /// partial `cuda` section (the other CUDA setting keeps its default).
    #[test]
    fn cuda_graphs_default_on_and_settable() {
        let c = Config::default();
        assert!(c.cuda.graphs);
        assert_eq!(c.cuda.stage_timings, 16);
        let every = c.with_value("cuda.stage_timings", "1").unwrap();
        assert_eq!(every.cuda.stage_timings, 1);
        let off = c.with_value("cuda.graphs", "false").unwrap();
        assert!(!off.cuda.graphs);
        assert_eq!(Config::from_yaml(&off.to_yaml()).unwrap(), off);
        let partial = Config::from_yaml("cuda:\n  zero_copy: on\n").unwrap();
        assert!(partial.cuda.graphs && partial.cuda.zero_copy == ZeroCopy::On);
        let e = c.with_value("cuda.graphs", "sometimes").unwrap_err();
        assert!(e.to_string().contains("cuda.graphs"), "{e}");
        assert!(c.cuda.programmatic_launch && partial.cuda.programmatic_launch);
        let plain = c.with_value("cuda.programmatic_launch", "false").unwrap();
        assert!(!plain.cuda.programmatic_launch && plain.cuda.graphs);
        assert_eq!(c.cuda.prewake_us, -1);
        assert_eq!(c.cuda.warm_ahead_us, -1);
        assert_eq!(c.cuda.crew_threads, 0);
        let off = c.with_value("cuda.warm_ahead_us", "0").unwrap();
        assert_eq!(off.cuda.warm_ahead_us, 0);
        assert_eq!(Config::from_yaml(&off.to_yaml()).unwrap(), off);
        for (key, bad) in [
            ("cuda.prewake_us", ["-2", "10001"]),
            ("cuda.warm_ahead_us", ["-2", "100001"]),
        ] {
            for bad in bad {
                let e = c.with_value(key, bad).unwrap_err().to_string();
                assert!(e.contains(key) && e.contains("-1 = auto"), "{e}");
            }
        }
        assert_eq!(
            c.with_value("cuda.crew_threads", "3")
                .unwrap()
                .cuda
                .crew_threads,
            3
        );
        let e = c
            .with_value("cuda.crew_threads", "65")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cuda.crew_threads"), "{e}");
        assert_eq!(
            c.with_value("cuda.prewake_us", "0")
                .unwrap()
                .cuda
                .prewake_us,
            0
        );
        assert_eq!(Config::from_yaml(&plain.to_yaml()).unwrap(), plain);
    }
}
