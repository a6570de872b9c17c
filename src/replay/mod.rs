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
//! * this module: the replay loop ([`run`]).
//!
//! May import: `bag`, `eval`, `report`, the pipeline, `matching`, `output`; nothing imports
//! this room but the CLI, the fuzz harnesses and the tests.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use self::report::{FrameStats, Heatmap, MatcherInfo, ReportInput};
use crate::bag::cdr;
use crate::bag::reader::{Bag, RawMessage, TopicInfo};
use crate::bag::writer::McapBagWriter;
use crate::camera::vins::VinsConfig;
use crate::camera::CameraModel;
use crate::error::{Error, Result};
use crate::eval::{self, HomographyPair};
use crate::image::GrayImage;
use crate::matching::{MatchParams, Matcher};
use crate::pipeline::{BackendChoice, BackendKind, Descriptor, Features, Keypoint, Pipeline};
use crate::Config;

mod cli;
mod frame;
mod messages;
pub mod report;
mod tracks;

pub use self::cli::{main, ReplayArgs};
pub use self::frame::{decode_frame, FrameData, FrameSkip};
use self::messages::edges_message;
pub use self::messages::{
    annotations_message, annotations_topic, edges_topic, feature_topic, keypoints_message,
    keypoints_topic, restart_topic, tracks_message, tracks_topic,
};
pub use self::tracks::camera_info_topic;
use self::tracks::{Cameras, TrackState};

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

fn is_image_type(t: &str) -> bool {
    t == cdr::IMAGE || t == cdr::COMPRESSED_IMAGE
}

/// Picks the topics to replay, with a clear error when there are none.
fn select_topics(bag: &Bag, wanted: &[String]) -> Result<Vec<TopicInfo>> {
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

struct TopicState {
    keypoints: u16,
    /// With `track.enabled`.
    tracks: Option<TrackState>,
    edges: Option<u16>,
    annotations: u16,
    image: u16,
    frames: usize,
    /// The previous frame's gray image, keypoints and descriptors (empty when the config
    /// computes none), for the tracking measures.
    prev: Option<(GrayImage, Vec<Keypoint>, Vec<Descriptor>)>,
}

/// The descriptor matcher of the tracking measure: one per replay, CUDA when the pipeline
/// runs on CUDA, else the CPU.
struct TrackMatcher {
    matcher: Matcher,
    params: MatchParams,
    /// The matcher's output, reused from pair to pair.
    matches: Vec<crate::matching::Match>,
}

impl TrackMatcher {
    fn new(pipeline: BackendKind) -> TrackMatcher {
        let matcher = match pipeline {
            BackendKind::Cpu => Matcher::new(BackendChoice::Cpu),
            BackendKind::Cuda => Matcher::new(BackendChoice::Cuda).or_else(|e| {
                eprintln!("replay: descriptor matching on the CPU, the CUDA matcher failed: {e}");
                Matcher::new(BackendChoice::Cpu)
            }),
        }
        .expect("the CPU matcher always starts");
        TrackMatcher {
            matcher,
            params: MatchParams::default(),
            matches: Vec::new(),
        }
    }

    fn info(&self) -> MatcherInfo {
        MatcherInfo {
            backend: self.matcher.backend().name(),
            params: self.params,
        }
    }

    /// Descriptor tracking of one frame pair; a failing CUDA matcher is replaced by the
    /// CPU one (same results) and the pair redone.
    fn track(
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

fn progress_bar(total: Option<u64>, enabled: bool) -> indicatif::ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = match total {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new_spinner(),
    };
    let tpl = if total.is_some() {
        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} frames  {msg}  ETA {eta}"
    } else {
        "{spinner} [{elapsed_precise}] {pos} frames  {msg}"
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(tpl) {
        pb.set_style(style);
    }
    pb
}

fn remove_stale(out_dir: &Path) -> Result<()> {
    if !out_dir.is_dir() {
        return Ok(());
    }
    for name in [
        "out.mcap",
        "report.md",
        "report.json",
        "report.html",
        "latency.png",
        "frame_latency.png",
        "keypoints.png",
        "levels.png",
        "coverage.png",
        "tracking.png",
        "tracks_alive.png",
        "track_lengths.png",
        "heatmap.png",
        "homography.png",
    ] {
        let p = out_dir.join(name);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&p, e)),
        }
    }
    Ok(())
}

/// Runs a replay: see the module docs for the outputs.
pub fn run(opts: &ReplayOptions) -> Result<ReplaySummary> {
    let t_start = Instant::now();
    // Outputs of an earlier run go first, so that whatever happens next, DIR never holds a
    // result that is not this run's.
    remove_stale(&opts.out_dir)?;
    let bag = Bag::open(&opts.bag)?;
    let topics = select_topics(&bag, &opts.topics)?;
    let mut wanted: HashSet<String> = topics.iter().map(|t| t.name.clone()).collect();
    // Each image topic's camera_info, when the bag has it and no VINS config gives the camera.
    let infos: HashMap<String, String> = if opts.vins.is_none() {
        let all = bag.topics()?;
        topics
            .iter()
            .map(|t| (camera_info_topic(&t.name), t.name.clone()))
            .filter(|(info, _)| {
                all.iter()
                    .any(|a| &a.name == info && a.msgtype == cdr::CAMERA_INFO)
            })
            .collect()
    } else {
        HashMap::new()
    };
    wanted.extend(infos.keys().cloned());
    let mut cameras: Cameras = HashMap::new();
    let total: Option<u64> = topics
        .iter()
        .map(|t| t.count)
        .sum::<Option<u64>>()
        .map(|n| opts.max_frames.map_or(n, |m| n.min(m as u64)));

    let mut pipeline = Pipeline::new(opts.config.clone(), opts.backend)?;
    if let Some(why) = pipeline.fallback_reason() {
        eprintln!("replay: CUDA not used, running on the CPU: {why}");
    }
    // Descriptor tracking needs descriptors: only when the config computes them.
    let mut track_matcher = opts
        .config
        .describe
        .enabled
        .then(|| TrackMatcher::new(pipeline.backend()));
    std::fs::create_dir_all(&opts.out_dir).map_err(|e| Error::io(&opts.out_dir, e))?;
    let out_bag = opts.out_dir.join("out.mcap");
    let mut writer = McapBagWriter::create(&out_bag)?;

    let mut states: HashMap<String, TopicState> = HashMap::new();
    let mut stats: Vec<FrameStats> = Vec::new();
    let mut skipped = 0usize;
    let mut skip_reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut scratch = Vec::new();
    let pb = progress_bar(total, opts.progress);
    let canny = opts.config.canny.enabled;
    let cell = report::COVERAGE_CELL;
    let mut heatmap = Heatmap::new(cell);
    let mut processing_s = 0.0f64;
    let mut done = 0usize;
    const STOP: &str = "\u{0}max-frames reached";

    let result = bag.read(&wanted, &mut |m: RawMessage| {
        if opts.max_frames.is_some_and(|n| done >= n) {
            return Err(Error::Bag(STOP.into()));
        }
        let ctx = |e: Error| {
            let e = match e {
                Error::Bag(s) => s,
                other => other.to_string(),
            };
            Error::Bag(format!(
                "{}: message on {} at log time {} ns: {e}",
                bag.path().display(),
                m.topic,
                m.log_time
            ))
        };
        if let Some(image_topic) = infos.get(m.topic) {
            let cam = cdr::decode::<cdr::CameraInfo>(m.data, m.msgtype)
                .map_err(|e| e.to_string())
                .and_then(|i| {
                    CameraModel::from_camera_info(
                        i.width,
                        i.height,
                        &i.distortion_model,
                        &i.k,
                        &i.d,
                    )
                });
            if let Err(e) = &cam {
                if !matches!(cameras.get(image_topic), Some(Err(prev)) if prev == e) {
                    eprintln!("replay: {}: {e}; tracking {image_topic} in pixels", m.topic);
                }
            }
            cameras.insert(image_topic.clone(), cam);
            return Ok(());
        }
        if !is_image_type(m.msgtype) {
            return Err(ctx(Error::Bag(format!(
                "type {:?} is not an image type",
                m.msgtype
            ))));
        }
        let st = match states.get_mut(m.topic) {
            Some(s) => s,
            None => {
                let s = TopicState {
                    image: writer.channel(m.topic, m.msgtype)?,
                    keypoints: writer.channel(&keypoints_topic(m.topic), cdr::POINT_CLOUD2)?,
                    tracks: if opts.config.track.enabled {
                        Some(TrackState::new(
                            &mut writer,
                            m.topic,
                            &opts.config,
                            pipeline.backend(),
                        )?)
                    } else {
                        None
                    },
                    edges: if canny {
                        Some(writer.channel(&edges_topic(m.topic), cdr::IMAGE)?)
                    } else {
                        None
                    },
                    annotations: writer
                        .channel(&annotations_topic(m.topic), cdr::IMAGE_ANNOTATIONS)?,
                    frames: 0,
                    prev: None,
                };
                states.entry(m.topic.to_string()).or_insert(s)
            }
        };
        writer.write(st.image, m.log_time, m.publish_time, m.data)?;
        let frame = match decode_frame(m.msgtype, m.data).map_err(ctx)? {
            Ok(f) => f,
            Err(FrameSkip(why)) => {
                skipped += 1;
                *skip_reasons.entry(why).or_default() += 1;
                return Ok(());
            }
        };
        let view = match frame.view() {
            Ok(v) => v,
            Err(e) => {
                skipped += 1;
                *skip_reasons.entry(e.to_string()).or_default() += 1;
                return Ok(());
            }
        };
        let t0 = Instant::now();
        let features: Features = pipeline.process(&view).map_err(ctx)?;
        let frame_ms = t0.elapsed().as_secs_f64() * 1e3;
        processing_s += frame_ms / 1e3;
        let header = frame.header();
        let descriptors = features.descriptors_for(pipeline.config());
        let kp_msg = keypoints_message(header, &features.keypoints, descriptors, &mut scratch);
        writer.write(st.keypoints, m.log_time, m.publish_time, &kp_msg)?;
        if let (Some(ch), Some(edges)) = (st.edges, features.edges.as_ref()) {
            writer.write(
                ch,
                m.log_time,
                m.publish_time,
                &edges_message(header, edges),
            )?;
        }
        let ann = annotations_message(header, &features.keypoints);
        writer.write(st.annotations, m.log_time, m.publish_time, &ann)?;

        // Evaluation measures (and the tracks, on the same gray image).
        let mut gray = GrayImage::default();
        crate::cpu::decode::decode(&view, &mut gray);
        let mut feature_tracks = None;
        if let Some(ts) = st.tracks.as_mut() {
            let camera = match &opts.vins {
                Some(v) => Some(v.camera_for(m.topic)),
                None => cameras.get(m.topic).and_then(|c| c.as_ref().ok()),
            };
            let at = (m.log_time, m.publish_time);
            feature_tracks =
                Some(ts.frame(&mut writer, at, header, &gray, camera, &mut scratch)?);
        }
        let track = st
            .prev
            .as_ref()
            .map(|(pg, pk, _)| eval::track(pg, pk, &gray, &features.keypoints));
        let match_track = match (&mut track_matcher, &st.prev) {
            (Some(tm), Some((_, pk, pd))) => Some(
                tm.track((pk, pd), (&features.keypoints, &features.descriptors))
                    .map_err(ctx)?,
            ),
            _ => None,
        };
        let fs = FrameStats::new(
            m.topic,
            m.log_time,
            header.stamp.as_nanos(),
            &features,
            (view.width(), view.height()),
            cell,
            frame_ms,
            track,
        )
        .with_match_track(match_track)
        .with_feature_tracks(feature_tracks);
        stats.push(fs);
        heatmap.add(&features.keypoints, (view.width(), view.height()));
        st.prev = Some((gray, features.keypoints, features.descriptors));
        st.frames += 1;
        done += 1;
        pb.inc(1);
        if !pb.is_hidden() {
            let secs = t_start.elapsed().as_secs_f64().max(1e-9);
            pb.set_message(format!("{:.1} frames/s", done as f64 / secs));
        }
        Ok(())
    });
    pb.finish_and_clear();
    match result {
        Ok(()) => {}
        Err(Error::Bag(s)) if s == STOP => {}
        Err(e) => return Err(e),
    }
    if done == 0 && skipped > 0 {
        let reasons: Vec<String> = skip_reasons
            .iter()
            .map(|(r, n)| format!("{n}x {r}"))
            .collect();
        return Err(Error::Bag(format!(
            "{}: no frame could be used: {}",
            bag.path().display(),
            reasons.join("; ")
        )));
    }
    let out_bag = writer.finish()?;

    let mut homography = Vec::new();
    for pair in &opts.homography {
        homography.push(eval::evaluate_pair(pair, &opts.config)?);
    }
    let opencv = match &opts.opencv_eval {
        Some(p) => Some(report::load_opencv_eval(p)?),
        None => None,
    };
    let per_topic: BTreeMap<String, usize> =
        states.iter().map(|(k, s)| (k.clone(), s.frames)).collect();
    let wall_s = t_start.elapsed().as_secs_f64();
    let input = ReportInput {
        bag: bag.path().to_path_buf(),
        storage: bag.storage().name(),
        backend: pipeline.backend().name(),
        config: opts.config.clone(),
        frames: stats,
        per_topic: per_topic.clone(),
        skipped,
        skip_reasons,
        wall_s,
        processing_s,
        homography,
        opencv,
        matcher: track_matcher.as_ref().map(TrackMatcher::info),
        heatmap,
    };
    let written = report::write(&input, &opts.out_dir)?;
    Ok(ReplaySummary {
        frames: done,
        per_topic,
        skipped,
        backend: pipeline.backend().name(),
        out_bag,
        report_md: written.markdown,
        report_json: written.json,
        report_html: written.html,
        plots: written.plots,
        wall_s,
    })
}
