//! The replay loop: [`run`] hands the bag's messages, in storage order, to a [`Replayer`],
//! which keeps the cameras from `camera_info`, runs each image through the pipeline, writes
//! its outputs, hands its gray image to the tracking ([`Tracking`]: per topic, or a stereo
//! pair) and collects the report's measures; at the end it writes the report.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

use super::report::{self, FrameStats, Heatmap, ReportInput};
use super::stereo::{StereoPair, Waiting};
use super::tracks::{Cameras, TrackFrame, TrackState};
use super::{
    annotations_topic, camera_info_topic, decode_frame, edges_message, edges_topic, is_image_type,
    keypoints_message, keypoints_topic, select_topics, FrameSkip, ReplayOptions, ReplaySummary,
    TrackMatcher,
};
use crate::bag::reader::{Bag, Flow, RawMessage};
use crate::bag::writer::McapBagWriter;
use crate::camera::CameraModel;
use crate::cdr::{self, Header};
use crate::error::{Error, Result};
use crate::eval;
use crate::features::{Descriptor, Features, Keypoint};
use crate::image::GrayImage;
use crate::output::annotations::KeypointAnnotations;
use crate::pipeline::Pipeline;

/// Runs a replay: see the module docs for the outputs.
pub fn run(opts: &ReplayOptions) -> Result<ReplaySummary> {
    let t_start = Instant::now();
    // Outputs of an earlier run go first, so that whatever happens next, DIR never holds a
    // result that is not this run's.
    remove_stale(&opts.out_dir)?;
    let bag = Bag::open(&opts.bag)?;
    let mut r = Replayer::new(opts, &bag)?;
    let pb = progress_bar(r.total, opts.progress);
    let wanted = r.wanted.clone();
    bag.read(&wanted, &mut |m: RawMessage| {
        let flow = r.message(&bag, &m)?;
        if r.done as u64 > pb.position() {
            pb.inc(1);
            if !pb.is_hidden() {
                let secs = t_start.elapsed().as_secs_f64().max(1e-9);
                pb.set_message(format!("{:.1} frames/s", r.done as f64 / secs));
            }
        }
        Ok(flow)
    })?;
    pb.finish_and_clear();
    r.finish(&bag, t_start)
}

/// An error of one message, named by the bag, topic and log time.
fn in_message(bag: &Bag, m: &RawMessage, e: Error) -> Error {
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
}

/// The output channels of one image topic, and what its next frame's measures need.
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

/// The feature tracker's part (with `track.enabled`): one tracker per image topic, or with
/// `track.stereo` one for the pair (the first camera's topic tracks both).
enum Tracking {
    Off,
    PerTopic(HashMap<String, TrackState>),
    Stereo(Box<StereoPair>),
}

/// One replay's state between messages.
struct Replayer<'a> {
    opts: &'a ReplayOptions,
    /// The image topics and their `camera_info` topics.
    wanted: HashSet<String>,
    /// `camera_info` topic -> its image topic (when no VINS config gives the cameras).
    infos: HashMap<String, String>,
    cameras: Cameras,
    total: Option<u64>,
    pipeline: Pipeline,
    track_matcher: Option<TrackMatcher>,
    writer: McapBagWriter,
    states: HashMap<String, TopicState>,
    tracking: Tracking,
    stats: Vec<FrameStats>,
    skipped: usize,
    skip_reasons: BTreeMap<String, usize>,
    scratch: Vec<u8>,
    /// The keypoints' Foxglove annotations (the node's encoder: the same bytes).
    annotations: KeypointAnnotations,
    heatmap: Heatmap,
    processing_s: f64,
    /// Frames processed, all topics.
    done: usize,
}

impl<'a> Replayer<'a> {
    fn new(opts: &'a ReplayOptions, bag: &Bag) -> Result<Replayer<'a>> {
        let topics = select_topics(bag, &opts.topics)?;
        let mut wanted: HashSet<String> = topics.iter().map(|t| t.name.clone()).collect();
        // Each image topic's camera_info, when the bag has it and no VINS config gives the
        // camera.
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
        let total: Option<u64> = topics
            .iter()
            .map(|t| t.count)
            .sum::<Option<u64>>()
            .map(|n| opts.max_frames.map_or(n, |m| n.min(m as u64)));
        let pipeline = Pipeline::new(opts.config.clone(), opts.backend)?;
        if let Some(why) = pipeline.fallback_reason() {
            eprintln!("replay: CUDA not used, running on the CPU: {why}");
        }
        // Descriptor tracking needs descriptors: only when the config computes them.
        let track_matcher = opts
            .config
            .describe
            .enabled
            .then(|| TrackMatcher::new(&pipeline));
        std::fs::create_dir_all(&opts.out_dir).map_err(|e| Error::io(&opts.out_dir, e))?;
        let mut writer = McapBagWriter::create(&opts.out_dir.join("out.mcap"))?;
        let track = &opts.config.track;
        let tracking = if !track.enabled {
            Tracking::Off
        } else if track.stereo {
            let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
            let image_topics = opts.vins.as_ref().map(|v| &v.image_topics[..]);
            let (left, right) = StereoPair::topics(&names, image_topics)?;
            let state = TrackState::new(
                &mut writer,
                left,
                (&opts.config, opts.debug_image),
                &pipeline,
            )?;
            Tracking::Stereo(Box::new(StereoPair::new(&mut writer, left, right, state)?))
        } else {
            Tracking::PerTopic(HashMap::new())
        };
        Ok(Replayer {
            opts,
            wanted,
            infos,
            cameras: HashMap::new(),
            total,
            pipeline,
            track_matcher,
            writer,
            states: HashMap::new(),
            tracking,
            stats: Vec::new(),
            skipped: 0,
            skip_reasons: BTreeMap::new(),
            scratch: Vec::new(),
            annotations: KeypointAnnotations::default(),
            heatmap: Heatmap::new(report::COVERAGE_CELL),
            processing_s: 0.0,
            done: 0,
        })
    }

    /// One message of the bag; [`Flow::Break`] once `max_frames` frames are done.
    fn message(&mut self, bag: &Bag, m: &RawMessage) -> Result<Flow> {
        if self.opts.max_frames.is_some_and(|n| self.done >= n) {
            return Ok(Flow::Break(()));
        }
        if let Some(image_topic) = self.infos.get(m.topic) {
            self.camera_info(image_topic.clone(), m);
        } else if !is_image_type(m.msgtype) {
            return Err(in_message(
                bag,
                m,
                Error::Bag(format!("type {:?} is not an image type", m.msgtype)),
            ));
        } else {
            self.image(bag, m)?;
        }
        Ok(Flow::Continue(()))
    }

    /// A `camera_info` message: the camera of its image topic from now on (or its problem,
    /// said once).
    fn camera_info(&mut self, image_topic: String, m: &RawMessage) {
        let cam = cdr::decode::<cdr::CameraInfo>(m.data, m.msgtype)
            .map_err(|e| e.to_string())
            .and_then(|i| {
                CameraModel::from_camera_info(i.width, i.height, &i.distortion_model, &i.k, &i.d)
            });
        if let Err(e) = &cam {
            if !matches!(self.cameras.get(&image_topic), Some(Err(prev)) if prev == e) {
                eprintln!("replay: {}: {e}; tracking {image_topic} in pixels", m.topic);
            }
        }
        self.cameras.insert(image_topic, cam);
    }

    /// The topic's output channels, opened on its first message.
    fn topic_state(&mut self, m: &RawMessage) -> Result<&mut TopicState> {
        if !self.states.contains_key(m.topic) {
            let w = &mut self.writer;
            let image = w.channel(m.topic, m.msgtype)?;
            let keypoints = w.channel(&keypoints_topic(m.topic), cdr::POINT_CLOUD2)?;
            if let Tracking::PerTopic(t) = &mut self.tracking {
                let ts = TrackState::new(
                    w,
                    m.topic,
                    (&self.opts.config, self.opts.debug_image),
                    &self.pipeline,
                )?;
                t.insert(m.topic.to_string(), ts);
            }
            let edges = match self.opts.config.canny.enabled {
                true => Some(w.channel(&edges_topic(m.topic), cdr::IMAGE)?),
                false => None,
            };
            let annotations = w.channel(&annotations_topic(m.topic), cdr::IMAGE_ANNOTATIONS)?;
            let s = TopicState {
                image,
                keypoints,
                edges,
                annotations,
                frames: 0,
                prev: None,
            };
            self.states.insert(m.topic.to_string(), s);
        }
        Ok(self.states.get_mut(m.topic).expect("inserted above"))
    }

    /// An image message: the pipeline's outputs, the tracking and the measures.
    fn image(&mut self, bag: &Bag, m: &RawMessage) -> Result<()> {
        let ctx = |e: Error| in_message(bag, m, e);
        let st = self.topic_state(m)?;
        let (image_ch, kp_ch, edges_ch, ann_ch) =
            (st.image, st.keypoints, st.edges, st.annotations);
        let at = (m.log_time, m.publish_time);
        self.writer.write(image_ch, at.0, at.1, m.data)?;
        let frame = match decode_frame(m.msgtype, m.data).map_err(ctx)? {
            Ok(f) => f,
            Err(FrameSkip(why)) => {
                self.skip(why);
                return Ok(());
            }
        };
        let view = match frame.view() {
            Ok(v) => v,
            Err(e) => {
                self.skip(e.to_string());
                return Ok(());
            }
        };
        let t0 = Instant::now();
        let features: Features = self.pipeline.process(&view).map_err(ctx)?;
        let frame_ms = t0.elapsed().as_secs_f64() * 1e3;
        self.processing_s += frame_ms / 1e3;
        let header = frame.header();
        let descriptors = features.descriptors_for(self.pipeline.config());
        let w = &mut self.writer;
        let kp_msg = keypoints_message(header, &features.keypoints, descriptors, &mut self.scratch);
        w.write(kp_ch, at.0, at.1, &kp_msg)?;
        if let (Some(ch), Some(edges)) = (edges_ch, features.edges.as_ref()) {
            w.write(ch, at.0, at.1, &edges_message(header, edges))?;
        }
        let ann = self.annotations.encode(header.stamp, &features.keypoints);
        w.write(ann_ch, at.0, at.1, ann)?;

        // Evaluation measures (and the tracks, on the same gray image).
        let mut gray = GrayImage::default();
        crate::cpu::decode::decode(&view, &mut gray);
        let stats_index = self.stats.len();
        let feature_tracks = self.track(m.topic, at, header, &gray, stats_index)?;
        let st = self.states.get_mut(m.topic).expect("opened above");
        let track = st
            .prev
            .as_ref()
            .map(|(pg, pk, _)| eval::track(pg, pk, &gray, &features.keypoints));
        let match_track = match (&mut self.track_matcher, &st.prev) {
            (Some(tm), Some((_, pk, pd))) => Some(
                tm.track((pk, pd), (&features.keypoints, &features.descriptors))
                    .map_err(ctx)?,
            ),
            _ => None,
        };
        let size = (view.width(), view.height());
        let fs = FrameStats::new(
            m.topic,
            m.log_time,
            header.stamp.as_nanos(),
            &features,
            size,
            report::COVERAGE_CELL,
            frame_ms,
            track,
        )
        .with_match_track(match_track)
        .with_feature_tracks(feature_tracks);
        self.stats.push(fs);
        self.heatmap.add(&features.keypoints, size);
        st.prev = Some((gray, features.keypoints, features.descriptors));
        st.frames += 1;
        self.done += 1;
        Ok(())
    }

    fn skip(&mut self, why: String) {
        self.skipped += 1;
        *self.skip_reasons.entry(why).or_default() += 1;
    }

    /// The frame handed to the tracking. Per topic it is tracked now and its measures
    /// returned; in a stereo pair the frames wait for their partners, and the measures of
    /// the first camera's frames are set in `stats` when they are tracked.
    fn track(
        &mut self,
        topic: &str,
        at: (u64, u64),
        header: &Header,
        gray: &GrayImage,
        stats_index: usize,
    ) -> Result<Option<report::FeatureTrackFrame>> {
        let camera = camera_of(self.opts, &self.cameras, topic);
        match &mut self.tracking {
            Tracking::Off => Ok(None),
            Tracking::PerTopic(t) => {
                let ts = t.get_mut(topic).expect("opened with the topic");
                let frame = TrackFrame {
                    at,
                    header,
                    gray,
                    camera,
                };
                ts.frame(&mut self.writer, frame, None, &mut self.scratch)
            }
            Tracking::Stereo(pair) => {
                let w = Waiting {
                    at,
                    header: header.clone(),
                    gray: gray.clone(),
                    camera: camera.cloned(),
                    stats_index,
                };
                for (index, f) in pair.put(&mut self.writer, topic, w, &mut self.scratch)? {
                    set_feature_tracks(&mut self.stats, index, f);
                }
                Ok(None)
            }
        }
    }

    /// After the last message: the frames still waiting tracked, the bag closed, the report
    /// written.
    fn finish(mut self, bag: &Bag, t_start: Instant) -> Result<ReplaySummary> {
        if let Tracking::Stereo(pair) = &mut self.tracking {
            for (index, f) in pair.flush(&mut self.writer, &mut self.scratch)? {
                set_feature_tracks(&mut self.stats, index, f);
            }
            if pair.alone > 0 {
                eprintln!(
                    "replay: stereo: {} of {} first-camera frames had no second-camera frame \
                     within 3 ms and were tracked alone",
                    pair.alone,
                    pair.alone + pair.pairs
                );
            }
        }
        if self.done == 0 && self.skipped > 0 {
            let reasons: Vec<String> = self
                .skip_reasons
                .iter()
                .map(|(r, n)| format!("{n}x {r}"))
                .collect();
            return Err(Error::Bag(format!(
                "{}: no frame could be used: {}",
                bag.path().display(),
                reasons.join("; ")
            )));
        }
        let opts = self.opts;
        let out_bag = self.writer.finish()?;
        let mut homography = Vec::new();
        for pair in &opts.homography {
            homography.push(eval::evaluate_pair(pair, &opts.config)?);
        }
        let opencv = match &opts.opencv_eval {
            Some(p) => Some(report::load_opencv_eval(p)?),
            None => None,
        };
        let per_topic: BTreeMap<String, usize> = self
            .states
            .iter()
            .map(|(k, s)| (k.clone(), s.frames))
            .collect();
        let wall_s = t_start.elapsed().as_secs_f64();
        let backend = self.pipeline.backend().name();
        let input = ReportInput {
            bag: bag.path().to_path_buf(),
            storage: bag.storage().name(),
            backend,
            config: opts.config.clone(),
            frames: self.stats,
            per_topic: per_topic.clone(),
            skipped: self.skipped,
            skip_reasons: self.skip_reasons,
            wall_s,
            processing_s: self.processing_s,
            homography,
            opencv,
            matcher: self.track_matcher.as_ref().map(TrackMatcher::info),
            heatmap: self.heatmap,
        };
        let written = report::write(&input, &opts.out_dir)?;
        Ok(ReplaySummary {
            frames: self.done,
            per_topic,
            skipped: self.skipped,
            backend,
            out_bag,
            report_md: written.markdown,
            report_json: written.json,
            report_html: written.html,
            plots: written.plots,
            wall_s,
        })
    }
}

/// The topic's camera: the VINS config's, or the last good `camera_info`.
fn camera_of<'c>(
    opts: &'c ReplayOptions,
    cameras: &'c Cameras,
    topic: &str,
) -> Option<&'c CameraModel> {
    match &opts.vins {
        Some(v) => Some(v.camera_for(topic)),
        None => cameras.get(topic).and_then(|c| c.as_ref().ok()),
    }
}

/// A stereo frame's measures, set when it was tracked (after its stats were collected).
fn set_feature_tracks(
    stats: &mut [FrameStats],
    index: usize,
    f: Option<report::FeatureTrackFrame>,
) {
    if let Some(s) = stats.get_mut(index) {
        s.feature_tracks = f;
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

/// Outputs of an earlier run in `out_dir`, removed.
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
