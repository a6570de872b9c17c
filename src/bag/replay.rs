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
//!
//! Every output message carries the input's header (stamp, frame_id) and the input's log
//! and publish times.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::cdr::{self, Header};
use super::eval::{self, HomographyPair};
use super::reader::{Bag, RawMessage};
use super::report::{FrameStats, Heatmap, MatcherInfo, ReportInput};
use super::writer::McapBagWriter;
use crate::error::{Error, Result};
use crate::image::{Encoding, GrayImage, ImageView};
use crate::matching::{MatchParams, Matcher};
use crate::output::pointcloud;
use crate::pipeline::{BackendChoice, BackendKind, Descriptor, Features, Keypoint, Pipeline};
use crate::Config;

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

/// Output topic names for an input image topic.
pub fn keypoints_topic(t: &str) -> String {
    format!("{}/keypoints", t.trim_end_matches('/'))
}
pub fn edges_topic(t: &str) -> String {
    format!("{}/edges", t.trim_end_matches('/'))
}
pub fn annotations_topic(t: &str) -> String {
    format!("{}/keypoints/annotations", t.trim_end_matches('/'))
}

fn is_image_type(t: &str) -> bool {
    t == cdr::IMAGE || t == cdr::COMPRESSED_IMAGE
}

/// Picks the topics to replay, with a clear error when there are none.
fn select_topics(bag: &Bag, wanted: &[String]) -> Result<Vec<super::TopicInfo>> {
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

/// A decoded input frame: either a view of a raw `Image`'s bytes or a decoded compressed one.
pub enum FrameData<'a> {
    Raw(cdr::Image<'a>),
    Decoded {
        header: Header,
        data: Vec<u8>,
        width: usize,
        height: usize,
        encoding: Encoding,
    },
}

impl FrameData<'_> {
    pub fn header(&self) -> &Header {
        match self {
            FrameData::Raw(i) => &i.header,
            FrameData::Decoded { header, .. } => header,
        }
    }

    pub fn view(&self) -> std::result::Result<ImageView<'_>, crate::DecodeError> {
        match self {
            FrameData::Raw(i) => ImageView::new(
                &i.data,
                i.width as usize,
                i.height as usize,
                i.step as usize,
                &i.encoding,
                i.is_bigendian != 0,
            ),
            FrameData::Decoded {
                data,
                width,
                height,
                encoding,
                ..
            } => ImageView::with_encoding(
                data,
                *width,
                *height,
                width * encoding.bytes_per_pixel(),
                *encoding,
                false,
            ),
        }
    }
}

/// Error of a frame we skip (the bag is fine, this one image is not usable).
pub struct FrameSkip(pub String);

/// Decodes one message of an image topic. `Err(Error)` = the message is not the type it
/// claims (fatal); `Ok(Err(FrameSkip))` = a well-formed message with an unusable image.
pub fn decode_frame<'a>(
    msgtype: &str,
    data: &'a [u8],
) -> Result<std::result::Result<FrameData<'a>, FrameSkip>> {
    match msgtype {
        cdr::IMAGE => Ok(Ok(FrameData::Raw(cdr::Image::decode(data)?))),
        cdr::COMPRESSED_IMAGE => {
            let m = cdr::CompressedImage::decode(data)?;
            let frame = match crate::image::decode_encoded(&m.data) {
                Ok(f) => f,
                Err(e) => {
                    return Ok(Err(FrameSkip(format!(
                        "compressed image (format {:?}) does not decode: {e}",
                        m.format
                    ))))
                }
            };
            Ok(Ok(FrameData::Decoded {
                header: m.header,
                data: frame.data,
                width: frame.width,
                height: frame.height,
                encoding: frame.encoding,
            }))
        }
        other => Err(Error::Bag(format!("not an image type: {other}"))),
    }
}

/// The `keypoints` PointCloud2, serialized.
pub fn keypoints_message(
    header: &Header,
    keypoints: &[Keypoint],
    descriptors: Option<&[Descriptor]>,
    scratch: &mut Vec<u8>,
) -> Vec<u8> {
    pointcloud::encode(keypoints, descriptors, scratch);
    let n = keypoints.len() as u32;
    let step = pointcloud::point_step(descriptors.is_some()) as u32;
    cdr::PointCloud2 {
        header: header.clone(),
        height: 1,
        width: n,
        fields: pointcloud::fields(descriptors.is_some())
            .iter()
            .map(|f| cdr::PointField {
                name: f.name.to_string(),
                offset: f.offset,
                datatype: f.datatype,
                count: f.count,
            })
            .collect(),
        is_bigendian: false,
        point_step: step,
        row_step: step * n,
        data: Cow::Borrowed(scratch),
        is_dense: true,
    }
    .encode()
}

fn edges_message(header: &Header, edges: &GrayImage) -> Vec<u8> {
    cdr::Image {
        header: header.clone(),
        height: edges.height as u32,
        width: edges.width as u32,
        encoding: "mono8".into(),
        is_bigendian: 0,
        step: edges.width as u32,
        data: Cow::Borrowed(&edges.data),
    }
    .encode()
}

/// One colour per pyramid level (cycled), as Foxglove colours.
fn level_color(octave: i32) -> cdr::Color {
    const P: [(f64, f64, f64); 8] = [
        (0.0, 1.0, 0.0),
        (1.0, 1.0, 0.0),
        (1.0, 0.5, 0.0),
        (1.0, 0.0, 0.0),
        (1.0, 0.0, 1.0),
        (0.5, 0.3, 1.0),
        (0.0, 0.6, 1.0),
        (0.0, 1.0, 1.0),
    ];
    let (r, g, b) = P[octave.rem_euclid(8) as usize];
    cdr::Color { r, g, b, a: 1.0 }
}

/// Foxglove image annotations: one `POINTS` annotation (colour = pyramid level), one
/// `LINE_LIST` with each keypoint's orientation (radius = size / 2), and a count label.
pub fn annotations_message(header: &Header, keypoints: &[Keypoint]) -> Vec<u8> {
    let ts = header.stamp;
    let points = keypoints
        .iter()
        .map(|k| cdr::Point2 {
            x: k.x as f64,
            y: k.y as f64,
        })
        .collect();
    let colors = keypoints.iter().map(|k| level_color(k.octave)).collect();
    let mut lines = Vec::new();
    let mut line_colors = Vec::new();
    for k in keypoints.iter().filter(|k| k.angle >= 0.0) {
        let a = (k.angle as f64).to_radians();
        let r = k.size as f64 / 2.0;
        lines.push(cdr::Point2 {
            x: k.x as f64,
            y: k.y as f64,
        });
        lines.push(cdr::Point2 {
            x: k.x as f64 + r * a.cos(),
            y: k.y as f64 + r * a.sin(),
        });
        let c = level_color(k.octave);
        line_colors.push(c);
        line_colors.push(c);
    }
    let clear = cdr::Color::default();
    let mut ann = cdr::ImageAnnotations {
        circles: Vec::new(),
        points: vec![cdr::PointsAnnotation {
            timestamp: ts,
            kind: cdr::POINTS,
            points,
            outline_color: level_color(0),
            outline_colors: colors,
            fill_color: clear,
            thickness: 4.0,
        }],
        texts: vec![cdr::TextAnnotation {
            timestamp: ts,
            position: cdr::Point2 { x: 8.0, y: 20.0 },
            text: format!("{} keypoints", keypoints.len()),
            font_size: 16.0,
            text_color: cdr::Color {
                r: 1.0,
                g: 1.0,
                b: 1.0,
                a: 1.0,
            },
            background_color: cdr::Color {
                r: 0.0,
                g: 0.0,
                b: 0.0,
                a: 0.6,
            },
        }],
    };
    if !lines.is_empty() {
        ann.points.push(cdr::PointsAnnotation {
            timestamp: ts,
            kind: cdr::LINE_LIST,
            points: lines,
            outline_color: level_color(0),
            outline_colors: line_colors,
            fill_color: clear,
            thickness: 1.0,
        });
    }
    ann.encode()
}

struct TopicState {
    keypoints: u16,
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

/// Command-line arguments of `gpu_features replay` (flattened into the binary's clap tree).
#[derive(clap::Args, Clone, Debug)]
pub struct ReplayArgs {
    /// YAML config (as for `detect`; see config/default.yaml); defaults when absent.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override one setting, e.g. `--set canny.low_threshold=30` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// auto: CUDA when usable, else CPU (says why on stderr).
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Image topic to replay (repeatable); default: every Image / CompressedImage topic.
    #[arg(long = "topic", value_name = "T")]
    pub topics: Vec<String>,
    /// Output directory: out.mcap, report.md, report.json and the plots.
    #[arg(long)]
    pub out: PathBuf,
    /// Stop after N frames.
    #[arg(long, value_name = "N")]
    pub max_frames: Option<usize>,
    /// No progress bar (it is only drawn on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Image pair with a ground-truth homography for the repeatability section:
    /// `[NAME=]IMG1,IMG2,H` (e.g. tests/data/graf1.png,tests/data/graf3.png,tests/data/H1to3p.xml).
    #[arg(long, value_name = "[NAME=]IMG1,IMG2,H")]
    pub homography: Vec<HomographyPair>,
    /// JSON written by scripts/eval_homography.py, shown beside our numbers.
    #[arg(long, value_name = "FILE")]
    pub opencv_eval: Option<PathBuf>,
    /// A bag directory (with metadata.yaml) or one .mcap / .db3 file.
    pub bag: PathBuf,
}

impl ReplayArgs {
    pub fn options(&self) -> Result<ReplayOptions> {
        let mut config = match &self.config {
            Some(p) => Config::from_file(p)?,
            None => Config::default(),
        };
        for s in &self.set {
            let (k, v) = s
                .split_once('=')
                .ok_or_else(|| Error::Config(format!("--set {s:?}: expected KEY=VALUE")))?;
            config = config.with_value(k.trim(), v.trim())?;
        }
        Ok(ReplayOptions {
            bag: self.bag.clone(),
            out_dir: self.out.clone(),
            topics: self.topics.clone(),
            config,
            backend: self.backend,
            progress: !self.no_progress,
            max_frames: self.max_frames,
            homography: self.homography.clone(),
            opencv_eval: self.opencv_eval.clone(),
        })
    }
}

/// `gpu_features replay`: runs and prints a one-line summary; errors go to stderr.
pub fn main(args: &ReplayArgs) -> std::process::ExitCode {
    let result = args.options().and_then(|o| run(&o));
    match result {
        Ok(s) => {
            let topics: Vec<String> = s
                .per_topic
                .iter()
                .map(|(t, n)| format!("{t}: {n}"))
                .collect();
            println!(
                "replayed {} frames ({}; {} skipped) on {} in {:.1} s -> {}, {}",
                s.frames,
                topics.join(", "),
                s.skipped,
                s.backend,
                s.wall_s,
                s.out_bag.display(),
                s.report_md.display()
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Runs a replay: see the module docs for the outputs.
pub fn run(opts: &ReplayOptions) -> Result<ReplaySummary> {
    let t_start = Instant::now();
    // Outputs of an earlier run go first, so that whatever happens next, DIR never holds a
    // result that is not this run's.
    remove_stale(&opts.out_dir)?;
    let bag = Bag::open(&opts.bag)?;
    let topics = select_topics(&bag, &opts.topics)?;
    let wanted: HashSet<String> = topics.iter().map(|t| t.name.clone()).collect();
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
    let cell = super::report::COVERAGE_CELL;
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

        // Evaluation measures.
        let mut gray = GrayImage::default();
        crate::cpu::decode::decode(&view, &mut gray);
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
        .with_match_track(match_track);
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
        Some(p) => Some(super::report::load_opencv_eval(p)?),
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
    let written = super::report::write(&input, &opts.out_dir)?;
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
