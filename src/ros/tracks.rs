//! The tracker in the node (`track.enabled`): per input, the latest `camera_info` (checked
//! by `camera::CameraModel::from_camera_info`), the [`Tracker`], and its three outputs:
//! `tracks` (PointCloud2, `output::tracks` layout), `feature` (`sensor_msgs/PointCloud` in
//! the layout `feature_format` names) and `restart` (`std_msgs/Bool`, true when the tracker
//! started over: time went backwards, the resolution or the camera changed).
//!
//! Without a usable `camera_info` the tracks are published in pixels (normalised fields
//! NaN), no `feature` message is published, and /diagnostics says why at WARN level.
//!
//! Stereo ([`StereoLink`], `track.stereo` with two inputs or more, VINS-Fusion's mode): the
//! second input's worker hands its frames over by stamp, as a device copy of its pipeline's
//! gray image while the first input's tracker runs on the GPU (no host conversion, no
//! upload), else decoded to gray on the host; the first input's worker tracks its frame,
//! then finds its tracks in the second camera's frame of the same stamp (within 3 ms; it
//! waits up to 30 ms for it while the second camera is alive), publishes them on the second
//! input's `tracks`, and both cameras in `feature`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use r2r::std_msgs::msg::{Bool, Header};

use super::cameras::{usable_camera, CameraSlot, CameraUse};
use super::convert;
use super::publish::listened;
use crate::camera::CameraModel;
use crate::config::TrackConfig;
use crate::image::{GrayImage, ImageView};
use crate::output::gate::{Before, FeatureGate};
use crate::output::tracks::VinsFormat;
use crate::pipeline::{BackendKind, Pipeline};
use crate::track::{RightInput, Track, TrackInput, TrackParams, Tracker, STEREO_PAIR_TOLERANCE_NS};

/// One frame of the second camera: its stamp in ns, its header (the right tracks are
/// published with it) and its pixels in gray, on the GPU (`dev`, when `on_device`) or on
/// the host (`img`).
#[derive(Default)]
struct StereoFrame {
    stamp_ns: i64,
    header: Header,
    img: GrayImage,
    #[cfg(feature = "cuda")]
    dev: Option<crate::cuda::KeptGray>,
    on_device: bool,
}

impl StereoFrame {
    /// The frame as the tracker takes it.
    fn input(&self) -> RightInput<'_> {
        #[cfg(feature = "cuda")]
        if let (true, Some(k)) = (self.on_device, &self.dev) {
            return RightInput::Device(k.gray());
        }
        RightInput::Gray(&self.img)
    }

    /// `view` (the frame the second camera's `pipeline` just processed) into this frame:
    /// the pipeline's gray image copied on the device unless `want_host`, else decoded on
    /// the host.
    fn fill(&mut self, view: &ImageView, pipeline: &Pipeline, want_host: bool) {
        #[cfg(feature = "cuda")]
        {
            self.on_device = !want_host && pipeline.keep_gray(&mut self.dev).unwrap_or(false);
        }
        #[cfg(not(feature = "cuda"))]
        let _ = (pipeline, want_host);
        if !self.on_device {
            crate::cpu::decode::decode(view, &mut self.img);
        }
    }
}

/// Waiting frames of the second camera, and spare ones to reuse.
type StereoFrames = (VecDeque<StereoFrame>, Vec<StereoFrame>);

/// Stereo (`track.stereo` with two inputs, VINS-Fusion's mode): the second input's worker
/// hands its frames (gray, by stamp) to the first input's, which tracks both cameras.
pub(super) struct StereoLink {
    /// Frames of the second camera, oldest first (at most STEREO_KEPT), with their stamps
    /// in ns; `free` keeps the buffers of used ones (no allocation per frame).
    frames: Mutex<StereoFrames>,
    ready: Condvar,
    /// When the second camera last handed a frame over: the first waits for a pair only
    /// while the second is alive (a frame within the last second).
    last_put: Mutex<Option<Instant>>,
    /// The first camera's tracker is not on the GPU (or has not said yet): the frames are
    /// handed over on the host.
    host_only: AtomicBool,
}

impl Default for StereoLink {
    fn default() -> Self {
        StereoLink {
            frames: Mutex::default(),
            ready: Condvar::new(),
            last_put: Mutex::new(None),
            host_only: AtomicBool::new(true),
        }
    }
}

/// Frames of the second camera kept waiting for their pair.
const STEREO_KEPT: usize = 4;
/// How long the first camera's worker waits for the second camera's frame (while the second
/// camera is alive).
const STEREO_WAIT: Duration = Duration::from_millis(30);

impl StereoLink {
    /// The second camera's frame (`header`, stamp `stamp_ns`, `view` as its `pipeline` just
    /// processed it): kept on the GPU while the first camera's tracker is there, else
    /// decoded to gray on the host.
    pub(super) fn put(
        &self,
        header: &Header,
        stamp_ns: i64,
        view: &ImageView,
        pipeline: &Pipeline,
    ) {
        let spare = self.frames.lock().unwrap().1.pop();
        let mut f = spare.unwrap_or_default();
        f.fill(view, pipeline, self.host_only.load(Ordering::Relaxed));
        f.header.clone_from(header);
        f.stamp_ns = stamp_ns;
        let mut g = self.frames.lock().unwrap();
        g.0.push_back(f);
        while g.0.len() > STEREO_KEPT {
            let old = g.0.pop_front().expect("not empty");
            g.1.push(old);
        }
        drop(g);
        *self.last_put.lock().unwrap() = Some(Instant::now());
        self.ready.notify_all();
    }

    /// Runs `f` on the second camera's frame taken within 3 ms of `stamp_ns`, waiting up to
    /// STEREO_WAIT for it; frames older than it are dropped. None when none came.
    fn take<R>(&self, stamp_ns: i64, f: impl FnOnce(&StereoFrame) -> R) -> Option<R> {
        let alive = self
            .last_put
            .lock()
            .unwrap()
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1));
        let deadline = Instant::now() + if alive { STEREO_WAIT } else { Duration::ZERO };
        let mut g = self.frames.lock().unwrap();
        loop {
            while g
                .0
                .front()
                .is_some_and(|f| f.stamp_ns < stamp_ns - STEREO_PAIR_TOLERANCE_NS)
            {
                let old = g.0.pop_front().expect("not empty");
                g.1.push(old);
            }
            if let Some(i) =
                g.0.iter()
                    .position(|f| (f.stamp_ns - stamp_ns).abs() <= STEREO_PAIR_TOLERANCE_NS)
            {
                let frame = g.0.remove(i).expect("found");
                drop(g);
                let r = f(&frame);
                self.frames.lock().unwrap().1.push(frame);
                return Some(r);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            g = self.ready.wait_timeout(g, deadline - now).unwrap().0;
        }
    }
}

/// An input's part in stereo tracking.
pub(super) enum StereoRole {
    Mono,
    /// The first input: tracks both cameras, publishes the second's tracks on its topic.
    Left {
        link: Arc<StereoLink>,
        right_camera: CameraSlot,
        /// The second camera's `tracks` (serialized by [`convert::TracksCdr`]).
        pub_right_tracks: r2r::PublisherUntyped,
    },
    /// The second input: hands its frames to the first (its own tracker idles).
    Right {
        link: Arc<StereoLink>,
    },
}

pub(super) struct TrackOutputs {
    pub(super) tracker: Tracker,
    pub(super) camera: CameraSlot,
    /// `tracks` and `feature`, published as bytes serialized into reused buffers (nothing
    /// allocated per frame once they have grown).
    pub(super) pub_tracks: r2r::PublisherUntyped,
    pub(super) pub_feature: r2r::PublisherUntyped,
    pub(super) pub_restart: r2r::Publisher<Bool>,
    pub(super) format: VinsFormat,
    pub(super) tracks_cdr: convert::TracksCdr,
    pub(super) feature_cdr: convert::FeatureCdr,
    /// Which frames are tracked and which get `feature` and `restart` (`track.frontend`,
    /// `feature_every`, `freq`): the replay's rule.
    pub(super) gate: FeatureGate,
    /// The tracker was made: on the first tracked frame, beside the input's pipeline (in its
    /// GPU session on CUDA: `Tracker::for_pipeline`).
    pub(super) started: bool,
    pub(super) stereo: StereoRole,
    /// Stereo frames of the first camera whose pair did not come, and those tracked in
    /// both cameras (diagnostics).
    pub(super) stereo_missed: u64,
    pub(super) stereo_pairs: u64,
    /// Why `vins_config` could not be read (the node tracks on camera_info or pixels).
    pub(super) vins_problem: Option<String>,
    /// The last frame's times, ms ([`TRACK_PARTS`]; NaN where a part did not run).
    pub(super) times: [f64; TRACK_PARTS.len()],
    /// The camera model the last frame was tracked with, and where it came from.
    pub(super) camera_use: CameraUse,
    /// What the tracking picture (`debug_image` with tracking on) needs beside the tracks.
    pub(super) picture: TrackPicture,
}

/// The tracking picture's state ([`crate::output::overlay::render_tracks`]): whether it is
/// drawn this frame (set by the worker before the step), the stereo pair's right frame on the
/// host, and the tracks' positions in the previous picture (by id), for the arrows.
#[derive(Default)]
pub(super) struct TrackPicture {
    pub(super) want: bool,
    /// This frame was tracked (not skipped by `track.frontend`'s rule): only such frames
    /// get a picture, as in the replay.
    pub(super) tracked: bool,
    right: GrayImage,
    /// `right` is this frame's pair.
    has_right: bool,
    pub(super) prev: HashMap<u64, (f32, f32)>,
}

impl TrackPicture {
    /// The right camera's frame of this picture, if it has one.
    pub(super) fn right(&self) -> Option<&GrayImage> {
        self.has_right.then_some(&self.right)
    }

    /// After drawing: the positions the next picture's arrows point to (the map's memory
    /// reused).
    pub(super) fn remember(&mut self, tracks: &[Track]) {
        self.prev.clear();
        self.prev.extend(tracks.iter().map(|t| (t.id, (t.x, t.y))));
    }
}

/// The parts of a frame's tracking step in the node: the frame begun on the GPU inside the
/// pipeline's call (`begin`: `Tracker::begin`, host time; part of the latency's pipeline
/// part), the first camera's frame tracked (`track`), and within it the flows' launch and
/// collection (`flow`: on the GPU mostly the wait for LK) and the new corners (`corners`),
/// the wait for the second camera's frame of the same stamp (`stereo_wait`), the stereo step
/// on it (`right`), and the outputs' publication (`publish`: `tracks`, `feature`, `restart`).
pub(super) const TRACK_PARTS: [&str; 7] = [
    "begin",
    "track",
    "flow",
    "corners",
    "stereo_wait",
    "right",
    "publish",
];

/// [`TRACK_PARTS`]'s indices of the parts filled in after the step.
const PAIR_WAIT: usize = 4;
const RIGHT: usize = 5;
const PUBLISH: usize = 6;

/// A frame the tracker begins on the GPU while its pipeline detects (`Tracker::begin`),
/// as far as it is known before the pipeline runs (read only by the GPU build).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) struct Early {
    pub(super) stamp: f64,
    pub(super) camera: Option<CameraModel>,
    /// VINS's whole step, or the flow only (VINS-Mono's frames without `feature`).
    pub(super) full: bool,
}

impl TrackOutputs {
    /// The frame's tracking when the tracker may begin it beside the pipeline's detection
    /// (`Tracker::begin`, then [`TrackOutputs::step`] finishes it): None when the frame is
    /// not tracked, the tracker is on the CPU or not made yet, its settings are about to
    /// change, or this input is a stereo pair's second.
    pub(super) fn early(
        &self,
        header: &Header,
        view: &ImageView,
        cfg: &TrackConfig,
    ) -> Option<Early> {
        let second = matches!(self.stereo, StereoRole::Right { .. }) && cfg.stereo;
        if !cfg.enabled
            || !self.started
            || second
            || self.tracker.backend() != BackendKind::Cuda
            || *self.tracker.params() != TrackParams::from_config(cfg)
        {
            return None;
        }
        let stamp = stamp_seconds(header);
        let full = self.gate.peek(stamp, cfg)?;
        let stamp_ns = convert::stamp_ns(header.stamp.sec, header.stamp.nanosec);
        let (camera, ..) = usable_camera(&self.camera, view.width(), view.height(), stamp_ns);
        Some(Early {
            stamp,
            camera,
            full,
        })
    }

    /// Tracks one frame (`view`, which `pipeline` just processed: the tracker takes its gray
    /// image on the GPU when it has one) and publishes; returns the camera problem for
    /// diagnostics, if any.
    pub(super) fn step(
        &mut self,
        header: &Header,
        view: &ImageView,
        pipeline: &Pipeline,
        cfg: &TrackConfig,
    ) -> Option<String> {
        let params = TrackParams::from_config(cfg);
        if !self.started {
            self.started = true;
            let (t, why) = Tracker::for_pipeline(pipeline, params);
            self.tracker = t;
            if let Some(why) = why {
                return Some(format!("tracker on the CPU: {why}"));
            }
        }
        if *self.tracker.params() != params {
            self.tracker.set_params(params);
        }
        let stamp_ns = convert::stamp_ns(header.stamp.sec, header.stamp.nanosec);
        if let (StereoRole::Right { link }, true) = (&self.stereo, cfg.stereo) {
            link.put(header, stamp_ns, view, pipeline);
            return None;
        }
        let (camera, mut problem, used) =
            usable_camera(&self.camera, view.width(), view.height(), stamp_ns);
        self.camera_use = used;
        self.picture.has_right = false;
        self.picture.tracked = false;
        let stamp = stamp_seconds(header);
        let input = track_input(pipeline, view);
        match self.gate.before(stamp, cfg) {
            Before::Skip { restart } => {
                if restart {
                    let _ = self.pub_restart.publish(&Bool { data: true });
                }
                self.times = [f64::NAN; TRACK_PARTS.len()];
                return problem;
            }
            Before::Track { full: true } => self.tracker.track_input(input, stamp, camera.as_ref()),
            Before::Track { full: false } => {
                self.tracker.track_flow_only(input, stamp, camera.as_ref())
            }
        };
        self.picture.tracked = true;
        let stats = self.tracker.stats();
        let nan = f64::NAN;
        let (begin, flow, corners) = (stats.begin_ms, stats.flow_ms, stats.detect_ms);
        // In TRACK_PARTS' order; the stereo parts and `publish` are filled in below.
        self.times = [begin, stats.total_ms, flow, corners, nan, nan, nan];
        let published = Instant::now();
        if listened(self.pub_tracks.get_inter_process_subscription_count()) {
            let bytes = self.tracks_cdr.encode(header, self.tracker.tracks());
            let _ = self.pub_tracks.publish_raw(bytes);
        }
        let stereo = cfg.stereo && self.pair_with_right(stamp_ns, &mut problem);
        // The stereo step is timed apart: `publish` counts the publications only.
        let stereo_ms = self.times[PAIR_WAIT..=RIGHT]
            .iter()
            .filter(|v| v.is_finite())
            .sum::<f64>();
        let tracks = self.tracker.tracks();
        let cameras: [&[Track]; 2] = [tracks, self.tracker.right_tracks()];
        let cameras = if stereo { &cameras[..] } else { &cameras[..1] };
        let after = self.gate.after(self.tracker.resets(), cfg);
        // No `feature` before the camera model is known: VINS cannot use pixels (its
        // initialisation does not check the count), and an empty message would still count.
        if after.feature
            && camera.is_some()
            && listened(self.pub_feature.get_inter_process_subscription_count())
        {
            let min_age = FeatureGate::min_age(cfg);
            let bytes = self
                .feature_cdr
                .encode(header, cameras, self.format, min_age);
            let _ = self.pub_feature.publish_raw(bytes);
        }
        if after.restart {
            let _ = self.pub_restart.publish(&Bool { data: true });
        }
        self.times[PUBLISH] = published.elapsed().as_secs_f64() * 1e3 - stereo_ms;
        match (&self.vins_problem, problem) {
            (Some(v), None) => Some(format!(
                "vins_config not used ({v}): camera from camera_info"
            )),
            (Some(v), Some(p)) => Some(format!("vins_config not used ({v}); {p}")),
            (None, p) => p,
        }
    }

    /// The first camera of a stereo pair: tracks the second camera's frame of this stamp
    /// (`stamp_ns`) and publishes its tracks; false, with the reason in `problem`, when it
    /// did not come (or this input is not a stereo pair's first).
    fn pair_with_right(&mut self, stamp_ns: i64, problem: &mut Option<String>) -> bool {
        let StereoRole::Left {
            link,
            right_camera,
            pub_right_tracks,
        } = &self.stereo
        else {
            return false;
        };
        let tracker = &mut self.tracker;
        // The next frames of the second camera come on the GPU while this tracker is (on the
        // host while the tracking picture, which draws them, is wanted).
        let on_gpu = tracker.backend() == BackendKind::Cuda;
        let picture = &mut self.picture;
        link.host_only
            .store(!on_gpu || picture.want, Ordering::Relaxed);
        let t0 = Instant::now();
        let times = &mut self.times;
        let got = link.take(stamp_ns, |right| {
            if picture.want && !right.on_device {
                picture.right.clone_from(&right.img);
                picture.has_right = true;
            }
            let t1 = Instant::now();
            let input = right.input();
            let (w, h) = input.size();
            let (cam, why, _) = usable_camera(right_camera, w, h, stamp_ns);
            let r = tracker.track_right_input(input, cam.as_ref());
            times[PAIR_WAIT] = (t1 - t0).as_secs_f64() * 1e3;
            times[RIGHT] = t1.elapsed().as_secs_f64() * 1e3;
            (r, why, right.header.clone())
        });
        match got {
            Some((r, why, right_header)) => {
                self.stereo_pairs += 1;
                // The right tracks carry the second camera's own header.
                if listened(pub_right_tracks.get_inter_process_subscription_count()) {
                    let bytes = self
                        .tracks_cdr
                        .encode(&right_header, self.tracker.right_tracks());
                    let _ = pub_right_tracks.publish_raw(bytes);
                }
                if let Err(e) = r {
                    *problem = Some(format!("stereo: {e}"));
                } else if let Some(w) = why {
                    *problem = problem.take().or(Some(format!("second camera: {w}")));
                }
                true
            }
            None => {
                self.stereo_missed += 1;
                *problem = problem.take().or(Some(format!(
                    "stereo: {} frames without a second-camera frame within 3 ms of their stamp",
                    self.stereo_missed
                )));
                false
            }
        }
    }
}

/// The tracker's stamp of a frame, as ROS's `Time::toSec`: seconds plus nanoseconds * 1e-9
/// (one expression for [`TrackOutputs::early`] and [`TrackOutputs::step`], so that a begun
/// frame is found again).
fn stamp_seconds(header: &Header) -> f64 {
    header.stamp.sec as f64 + header.stamp.nanosec as f64 * 1e-9
}

/// The frame for the tracker: with the pipeline's gray image on the GPU when it has one (the
/// GPU tracker then builds its pyramid from it: no second conversion, no second upload).
#[cfg(feature = "cuda")]
fn track_input<'a>(pipeline: &'a Pipeline, view: &'a ImageView<'a>) -> TrackInput<'a> {
    match pipeline.gray_on_device() {
        Some(gray) => TrackInput::Device(gray, view),
        None => TrackInput::View(view),
    }
}

/// (No GPU in this build: the frame as it came.)
#[cfg(not(feature = "cuda"))]
fn track_input<'a>(_: &Pipeline, view: &'a ImageView<'a>) -> TrackInput<'a> {
    TrackInput::View(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pipeline::BackendChoice;

    fn header(ns: i64) -> Header {
        let mut h = Header::default();
        h.stamp.sec = (ns / 1_000_000_000) as i32;
        h.stamp.nanosec = (ns % 1_000_000_000) as u32;
        h.frame_id = format!("right {ns}");
        h
    }

    /// The link pairs by stamp (within 3 ms), drops the second camera's frames older than
    /// the first's, hands the pixels over on the host when the pipeline is on the CPU, and
    /// does not wait for a camera that never sent anything.
    #[test]
    fn the_stereo_link_pairs_frames_by_stamp() {
        let pipeline = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
        let link = StereoLink::default();
        let (w, h) = (16usize, 8usize);
        // Nothing sent yet: no wait, no pair.
        let t = Instant::now();
        assert!(link.take(0, |_| ()).is_none());
        assert!(t.elapsed() < STEREO_WAIT);
        let frames: Vec<Vec<u8>> = (0..3u8).map(|k| vec![k * 50; w * h]).collect();
        for (k, px) in frames.iter().enumerate() {
            let view = ImageView::new(px, w, h, w, "mono8", false).unwrap();
            let ns = 1_000_000_000 + k as i64 * 33_000_000;
            link.put(&header(ns), ns, &view, &pipeline);
        }
        // 2 ms after the second frame: the second (the first, older, is dropped).
        let got = link.take(1_035_000_000, |f| {
            let RightInput::Gray(g) = f.input() else {
                panic!("a CPU pipeline's frame is on the host")
            };
            (f.header.frame_id.clone(), g.data[0], (g.width, g.height))
        });
        assert_eq!(got, Some(("right 1033000000".into(), 50, (w, h))));
        assert_eq!(link.frames.lock().unwrap().0.len(), 1, "the third stays");
        // No frame within 3 ms of this stamp: after waiting, none (the third is newer).
        let t = Instant::now();
        assert!(link.take(1_050_000_000, |_| ()).is_none());
        assert!(
            t.elapsed() >= STEREO_WAIT,
            "the second camera is alive: it waited"
        );
        let got = link.take(1_066_000_000, |f| f.header.frame_id.clone());
        assert_eq!(got.as_deref(), Some("right 1066000000"));
    }
}
