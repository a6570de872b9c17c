//! `gpu_features replay`: every image of a bag through the pipeline, into an MCAP bag and an
//! evaluation report.
//!
//! Output topics, for an input image topic `T`:
//!
//! | topic                        | type                                  |
//! |------------------------------|---------------------------------------|
//! | `T`                          | the input message, bytes unchanged    |
//! | `T/keypoints`                | `sensor_msgs/msg/PointCloud2` ([`crate::output::pointcloud`] layout) |
//! | `T/edges`                    | `sensor_msgs/msg/Image`, mono8 (when Canny is on) |
//! | `T/keypoints/annotations`    | `foxglove_msgs/msg/ImageAnnotations`  |
//! | `T/tracks`                   | `sensor_msgs/msg/PointCloud2` (`output::tracks` layout; with `track.enabled`) |
//! | `T/feature`                  | `sensor_msgs/msg/PointCloud`, VINS-Fusion's layout, the node's bytes (with `track.enabled`, once the camera is known) |
//! | `T/restart`                  | `std_msgs/msg/Bool` true when the tracker started over (as the node's `restart`) |
//! | `T/debug_image`              | `sensor_msgs/msg/Image`, bgr8: VINS-Fusion's tracking picture, the node's `debug_image` with tracking (with `track.enabled` and `--debug-image`) |
//!
//! The camera of `T` comes from `--vins-config` (its camodocal files, as VINS reads them)
//! or else from the bag's `camera_info` beside `T` (`dirname(T)/camera_info`, the last one
//! before the frame); without either the tracks stay in pixels and no `feature` is written.
//!
//! Every output message carries the input's header (stamp, frame_id) and the input's log
//! and publish times.
//!
//! * `frame`: decoding the input messages into images ([`decode_frame`]).
//! * `messages`: the output topics and their messages ([`keypoints_message`], ...).
//! * `cli`: `gpu_features replay`'s arguments and entry point ([`ReplayArgs`], [`main`]).
//! * `tracks`: the tracker's outputs per image topic (`tracks`, `feature`, `restart`) and
//!   the cameras beside the topics ([`camera_info_topic`]).
//! * `report`: the replay's evaluation report (report.json / .md / .html and its plots),
//!   built from `eval`'s metrics with the shared [`crate::report`] tools.
//! * `run`: the replay loop ([`run`]).
//! * `stereo`: with `track.stereo`, two image topics paired by stamp and tracked as
//!   VINS-Fusion's stereo mode.
//! * this module: the options, the topics' choice and the descriptor matcher of the
//!   tracking measure.
//!
//! May import: `bag`, `camera`, `cdr`, `config`, `cpu`, `error`, `eval`, `features`, `image`,
//! `matching`, `output`, `pipeline`, `report`, `track`; nothing imports this room but the CLI,
//! the fuzz harnesses and the tests.

use std::collections::BTreeMap;
use std::path::PathBuf;

use self::report::MatcherInfo;
use crate::bag::reader::{Bag, TopicInfo};
use crate::camera::vins::VinsConfig;
use crate::cdr;
use crate::error::{Error, Result};
use crate::eval::{self, HomographyPair};
use crate::features::{Descriptor, Keypoint};
use crate::matching::{MatchParams, Matcher};
use crate::pipeline::BackendChoice;
use crate::Config;

mod cli;
mod frame;
mod messages;
pub mod report;
mod run;
mod stereo;
mod tracks;

pub use self::cli::{main, ReplayArgs};
pub use self::frame::{decode_frame, FrameData, FrameSkip};
use self::messages::edges_message;
pub use self::messages::{
    annotations_topic, debug_image_topic, edges_topic, feature_topic, keypoints_message,
    keypoints_topic, restart_topic, tracks_message, tracks_topic,
};
pub use self::run::run;
pub use self::tracks::camera_info_topic;

/// Everything `replay` needs.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// A bag directory (with `metadata.yaml`) or one `.mcap` / `.db3` file.
    pub bag: PathBuf,
    /// Output directory: `out.mcap`, `report.md`, `report.json`, `report.html`, `*.png`.
    pub out_dir: PathBuf,
    /// Image topics to replay; empty = every `Image` / `CompressedImage` topic.
    pub topics: Vec<String>,
    pub config: Config,
    pub backend: BackendChoice,
    /// Show a progress bar (only ever drawn when stderr is a terminal).
    pub progress: bool,
    /// Stop after this many frames (all topics together).
    pub max_frames: Option<usize>,
    /// Image pairs with a known homography for the repeatability / matching-score section.
    pub homography: Vec<HomographyPair>,
    /// `scripts/eval_homography.py`'s JSON, shown side by side with ours.
    pub opencv_eval: Option<PathBuf>,
    /// A VINS-Fusion config: the cameras from its camodocal files (its tracker settings are
    /// applied to `config` by the CLI).
    pub vins: Option<VinsConfig>,
    /// With tracking: write `T/debug_image`, the tracking picture the node publishes on
    /// `debug_image` ([`crate::output::overlay::render_tracks`]).
    pub debug_image: bool,
}

impl ReplayOptions {
    pub fn new(bag: impl Into<PathBuf>, out_dir: impl Into<PathBuf>) -> Self {
        ReplayOptions {
            bag: bag.into(),
            out_dir: out_dir.into(),
            topics: Vec::new(),
            config: Config::default(),
            backend: BackendChoice::Auto,
            progress: true,
            max_frames: None,
            homography: Vec::new(),
            opencv_eval: None,
            vins: None,
            debug_image: false,
        }
    }
}

/// What a finished replay produced.
#[derive(Clone, Debug)]
pub struct ReplaySummary {
    /// Frames processed, all topics.
    pub frames: usize,
    /// Frames per input topic.
    pub per_topic: BTreeMap<String, usize>,
    /// Frames whose image could not be used (bad geometry / encoding / compressed data).
    pub skipped: usize,
    pub backend: &'static str,
    pub out_bag: PathBuf,
    pub report_md: PathBuf,
    pub report_json: PathBuf,
    /// report.md as one self-contained page (plots embedded).
    pub report_html: PathBuf,
    pub plots: Vec<PathBuf>,
    /// Wall time of the whole replay, seconds.
    pub wall_s: f64,
}

pub(super) fn is_image_type(t: &str) -> bool {
    t == cdr::IMAGE || t == cdr::COMPRESSED_IMAGE
}

/// Picks the topics to replay, with a clear error when there are none.
pub(super) fn select_topics(bag: &Bag, wanted: &[String]) -> Result<Vec<TopicInfo>> {
    let topics = bag.topics()?;
    let listing = || {
        if topics.is_empty() {
            "the bag has no topics".to_string()
        } else {
            let v: Vec<String> = topics
                .iter()
                .map(|t| format!("{} ({})", t.name, t.msgtype))
                .collect();
            format!("topics: {}", v.join(", "))
        }
    };
    if wanted.is_empty() {
        let imgs: Vec<_> = topics
            .iter()
            .filter(|t| is_image_type(&t.msgtype))
            .cloned()
            .collect();
        if imgs.is_empty() {
            return Err(Error::Bag(format!(
                "{}: no sensor_msgs/msg/Image or CompressedImage topic; {}",
                bag.path().display(),
                listing()
            )));
        }
        return Ok(imgs);
    }
    let mut out = Vec::new();
    for w in wanted {
        match topics.iter().find(|t| &t.name == w) {
            None => {
                return Err(Error::Bag(format!(
                    "{}: no topic {w}; {}",
                    bag.path().display(),
                    listing()
                )))
            }
            Some(t) if !is_image_type(&t.msgtype) => {
                return Err(Error::Bag(format!(
                    "{}: topic {w} has type {:?}, not sensor_msgs/msg/Image or CompressedImage",
                    bag.path().display(),
                    t.msgtype
                )))
            }
            Some(t) => out.push(t.clone()),
        }
    }
    Ok(out)
}

/// The descriptor matcher of the tracking measure: one per replay, CUDA when the pipeline
/// runs on CUDA, else the CPU.
pub(super) struct TrackMatcher {
    matcher: Matcher,
    params: MatchParams,
    /// The matcher's output, reused from pair to pair.
    matches: Vec<crate::matching::Match>,
}

impl TrackMatcher {
    /// The matcher of `pipeline`'s descriptors, in its GPU session on CUDA
    /// (`Matcher::for_pipeline`).
    pub(super) fn new(pipeline: &crate::pipeline::Pipeline) -> TrackMatcher {
        let matcher = Matcher::for_pipeline(pipeline);
        if let Some(why) = matcher.fallback_reason() {
            eprintln!("replay: descriptor matching on the CPU, the CUDA matcher failed: {why}");
        }
        TrackMatcher {
            matcher,
            params: MatchParams::default(),
            matches: Vec::new(),
        }
    }

    pub(super) fn info(&self) -> MatcherInfo {
        MatcherInfo {
            backend: self.matcher.backend().name(),
            params: self.params,
        }
    }

    /// Descriptor tracking of one frame pair; a failing CUDA matcher is replaced by the
    /// CPU one (same results) and the pair redone.
    pub(super) fn track(
        &mut self,
        prev: (&[Keypoint], &[Descriptor]),
        cur: (&[Keypoint], &[Descriptor]),
    ) -> Result<eval::MatchTrackStats> {
        match eval::track_descriptors(
            &mut self.matcher,
            &self.params,
            prev,
            cur,
            &mut self.matches,
        ) {
            Err(Error::Cuda(why)) => {
                eprintln!("replay: CUDA matcher failed, matching on the CPU from now on: {why}");
                self.matcher = Matcher::new(BackendChoice::Cpu)?;
                eval::track_descriptors(
                    &mut self.matcher,
                    &self.params,
                    prev,
                    cur,
                    &mut self.matches,
                )
            }
            r => r,
        }
    }
}
