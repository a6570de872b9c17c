//! One input's worker thread: takes the newest frame from its slot, runs its own
//! [`Pipeline`] (rebuilt when the live config's generation changes), and publishes the
//! outputs; the slot ([`Slot`]) keeps at most one pending frame.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use r2r::sensor_msgs::msg::PointCloud2;
use r2r::std_msgs::msg::Header;

use super::compressed::Frame;
use super::convert;
use super::diagnostics::{RateLimit, Stats};
use super::matches::PreviousFrame;
use super::params::NodeParams;
use super::publish::listened;
use super::tracks::{Early, TrackOutputs};
use crate::features::Features;
use crate::image::OwnedFrame;
use crate::image::{GrayImage, ImageView};
use crate::output::annotations::KeypointAnnotations;
use crate::pipeline::{BackendChoice, Pipeline};

/// Node-side latencies kept for the shutdown summary (bounded).
const MAX_KEPT_LATENCIES: usize = 1 << 20;

pub(super) struct Pending {
    pub(super) msg: Frame,
    pub(super) received: Instant,
}

#[derive(Default)]
pub(super) struct Slot {
    pub(super) frame: Mutex<Option<Pending>>,
    pub(super) ready: Condvar,
}

pub(super) struct Worker {
    pub(super) label: String,
    pub(super) slot: Arc<Slot>,
    pub(super) stats: Arc<Mutex<Stats>>,
    pub(super) params: Arc<Mutex<NodeParams>>,
    pub(super) shutdown: Arc<AtomicBool>,
    pub(super) logger: String,
    /// `keypoints`, published as serialized bytes ([`convert::KeypointsCdr`]).
    pub(super) pub_kp: r2r::PublisherUntyped,
    /// `edges` and `debug_image`, published as serialized bytes ([`convert::ImageCdr`]).
    pub(super) pub_edges: r2r::PublisherUntyped,
    pub(super) pub_debug: r2r::PublisherUntyped,
    /// `keypoints/annotations` with `foxglove_annotations` (and foxglove_msgs in the build).
    pub(super) pub_ann: Option<r2r::PublisherUntyped>,
    pub(super) pub_matches: r2r::Publisher<PointCloud2>,
    pub(super) tracks: TrackOutputs,
}

impl Worker {
    fn make_pipeline(&self, choice: BackendChoice) -> Result<(Pipeline, u64, bool), String> {
        let (config, generation, debug) = {
            let p = self.params.lock().unwrap();
            (p.live.config.clone(), p.live.generation, p.live.debug_image)
        };
        let pipeline = Pipeline::new(config, choice).map_err(|e| e.to_string())?;
        Ok((pipeline, generation, debug))
    }

    /// Makes the input's pipeline and the state its frames need; the backend's name.
    pub(super) fn start(self, choice: BackendChoice) -> Result<(Running, String), String> {
        let (pipeline, generation, debug) = self
            .make_pipeline(choice)
            .map_err(|e| format!("input {}: pipeline: {e}", self.label))?;
        if let Some(why) = pipeline.fallback_reason() {
            r2r::log_warn!(
                &self.logger,
                "input {}: using the CPU backend: {why}",
                self.label
            );
        }
        self.stats.lock().unwrap().backend = pipeline.backend().name().to_string();
        let backend = pipeline.backend().name().to_string();

        let bad_input_log = RateLimit::new(Duration::from_secs(2));
        let error_log = RateLimit::new(Duration::from_secs(2));
        let kp_cdr = convert::KeypointsCdr::default();
        let gray = GrayImage::default();
        let features = Features::default();
        let header = Header::default();
        let gpu_failure_logged = false;
        let previous = PreviousFrame::default();
        let match_previous = self.params.lock().unwrap().live.match_previous;
        Ok((
            Running {
                w: self,
                choice,
                pipeline,
                generation,
                debug,
                bad_input_log,
                error_log,
                kp_cdr,
                annotations: KeypointAnnotations::default(),
                image_cdr: convert::ImageCdr::default(),
                gray,
                features,
                header,
                gpu_failure_logged,
                previous,
                match_previous,
                decoded: OwnedFrame::default(),
            },
            backend,
        ))
    }

    /// The worker thread: [`Worker::start`] (its result to `init`), then every frame the
    /// spinning thread hands over through the slot, until shutdown.
    pub(super) fn run(
        self,
        choice: BackendChoice,
        init: std::sync::mpsc::Sender<Result<String, String>>,
    ) {
        let mut running = match self.start(choice) {
            Ok((r, backend)) => {
                let _ = init.send(Ok(backend));
                r
            }
            Err(e) => {
                let _ = init.send(Err(e));
                return;
            }
        };
        let (slot, shutdown) = (running.w.slot.clone(), running.w.shutdown.clone());
        loop {
            let (pending, taken) = {
                let mut g = slot.frame.lock().unwrap();
                loop {
                    if shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Some(p) = g.take() {
                        break (p, Instant::now());
                    }
                    g = slot
                        .ready
                        .wait_timeout(g, Duration::from_millis(200))
                        .unwrap()
                        .0;
                }
            };
            running.step(pending, taken);
        }
    }
}

/// A started input ([`Worker::start`]): its pipeline and everything its frames reuse.
pub(super) struct Running {
    pub(super) w: Worker,
    choice: BackendChoice,
    pipeline: Pipeline,
    generation: u64,
    debug: bool,
    bad_input_log: RateLimit,
    error_log: RateLimit,
    kp_cdr: convert::KeypointsCdr,
    annotations: KeypointAnnotations,
    image_cdr: convert::ImageCdr,
    gray: GrayImage,
    features: Features,
    header: Header,
    gpu_failure_logged: bool,
    previous: PreviousFrame,
    match_previous: bool,
    /// A compressed frame's pixels, decoded into this buffer frame after frame.
    decoded: OwnedFrame,
}

impl Running {
    /// How long before this input's next frame the GPU's warm-up should come
    /// (`Pipeline::warm_ahead`); None on the CPU or when off.
    pub(super) fn warm_ahead(&self) -> Option<std::time::Duration> {
        self.pipeline.warm_ahead()
    }

    /// The GPU's warm-up between frames (`Pipeline::warm_gpu`).
    pub(super) fn warm_gpu(&mut self) {
        self.pipeline.warm_gpu();
    }

    /// One frame, taken at `taken`: the pipeline, the outputs, the stats.
    pub(super) fn step(&mut self, pending: Pending, taken: Instant) {
        self.pick_up_params();
        match &pending.msg {
            Frame::Raw(msg) => match msg.view() {
                Ok(view) => {
                    msg.header_into(&mut self.header);
                    self.step_view(&view, &pending, taken);
                }
                Err(e) => self.malformed(format!("{}: {e}", msg.describe())),
            },
            Frame::Compressed(msg) => {
                // Decoded here, on the worker (with one input: on the spinning thread, after
                // the take), into the buffer of the previous frames.
                let mut decoded = std::mem::take(&mut self.decoded);
                let t0 = Instant::now();
                let view = msg
                    .decode_into(&mut decoded)
                    .and_then(|()| decoded.view().map_err(|e| e.to_string()));
                match view {
                    Ok(view) => {
                        let ms = t0.elapsed().as_secs_f64() * 1e3;
                        let mut s = self.w.stats.lock().unwrap();
                        let e = s.window.stage_ms.entry("decode_compressed").or_default();
                        (e.0, e.1) = (e.0 + ms, e.1 + 1);
                        drop(s);
                        msg.header_into(&mut self.header);
                        self.step_view(&view, &pending, taken);
                    }
                    Err(e) => self.malformed(format!("{}: {e}", msg.describe())),
                }
                self.decoded = decoded;
            }
        }
    }

    /// One frame's pixels (`view`) through the pipeline and the outputs.
    fn step_view(&mut self, view: &ImageView, pending: &Pending, taken: Instant) {
        let view = *view;
        let (edges_listened, debug_listened) = self.listeners();
        let cfg = &self.pipeline.config().track;
        let early = self.w.tracks.early(&self.header, &view, cfg);
        let Some(edges_in_message) = self.process(&view, edges_listened, debug_listened, early)
        else {
            return;
        };
        let computed = Instant::now();
        self.publish_keypoints();
        let keypoints_out = Instant::now();
        let camera_problem =
            self.publish_rest(&view, edges_in_message, edges_listened, debug_listened);
        let done = Instant::now();
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        let parts = [
            ms(pending.received, taken),
            ms(taken, computed),
            ms(computed, keypoints_out),
            ms(keypoints_out, done),
        ];
        let latency = (done - pending.received).as_secs_f64() * 1e3;
        let edge_map = edges_in_message || self.features.edges.is_some();
        self.record(
            (pending.received, keypoints_out),
            latency,
            parts,
            (edge_map, camera_problem),
        );
    }

    /// Between frames: the parameter changes picked up (buffers resize on the next frame).
    fn pick_up_params(&mut self) {
        let p = self.w.params.lock().unwrap();
        if p.live.generation != self.generation {
            self.generation = p.live.generation;
            self.debug = p.live.debug_image;
            self.match_previous = p.live.match_previous;
            if let Err(e) = self.pipeline.set_config(p.live.config.clone()) {
                // cannot happen: the parameter layer validated it
                r2r::log_error!(&self.w.logger, "config rejected by pipeline: {e}");
            }
        }
    }

    /// A message whose image cannot be read: counted and logged (rate-limited), dropped.
    fn malformed(&mut self, text: String) {
        let w = &self.w;
        if let Some(skipped) = self.bad_input_log.allow() {
            r2r::log_warn!(
                &w.logger,
                "input {}: dropping malformed image ({text}){}",
                w.label,
                if skipped > 0 {
                    format!(" [{skipped} similar messages suppressed]")
                } else {
                    String::new()
                }
            );
        }
        let mut s = w.stats.lock().unwrap();
        s.count.decode_errors += 1;
        s.window.decode_errors += 1;
        s.last_error = text;
    }

    /// Who listens to `edges` and to the debug image; Canny runs only while someone does
    /// (the debug image draws the edges; performance.md, change 70): its GPU work beside
    /// the detection and the edge map's unpack delay the keypoints. The first frame after
    /// such a subscriber comes or goes resizes the pipeline's buffers.
    fn listeners(&mut self) -> (bool, bool) {
        let w = &self.w;
        let edges = self.pipeline.config().canny.enabled
            && listened(w.pub_edges.get_inter_process_subscription_count());
        let debug = self.debug
            && w.pub_debug
                .get_inter_process_subscription_count()
                .unwrap_or(0)
                > 0;
        self.pipeline.want_edges(edges || debug);
        (edges, debug)
    }

    /// The frame through the pipeline (with `early`, the tracker begins the frame on the GPU
    /// beside the detection: `Tracker::begin`); Some(whether the edge map was written
    /// straight into its message's bytes) when it worked. A failure is counted and logged
    /// (a begun frame dropped); a panic in a stage must not take the node down: it is
    /// counted and the pipeline rebuilt.
    fn process(
        &mut self,
        view: &ImageView,
        edges_listened: bool,
        debug_listened: bool,
        early: Option<Early>,
    ) -> Option<bool> {
        // The edge map is written straight into its message's bytes, unless the debug
        // image, which draws it, needs it in `features` too.
        let edges_in_place = edges_listened && !debug_listened;
        let (pipeline, features, image_cdr, header) = (
            &mut self.pipeline,
            &mut self.features,
            &mut self.image_cdr,
            &self.header,
        );
        #[cfg(feature = "cuda")]
        let tracker = &mut self.w.tracks.tracker;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let px = edges_in_place
                .then(|| image_cdr.mono8_in_place(header, view.width(), view.height()));
            match early {
                #[cfg(feature = "cuda")]
                Some(e) => {
                    let mut begin = |gray: crate::cuda::DeviceGray<'_>| {
                        let input = crate::track::TrackInput::Device(gray, view);
                        tracker.begin(input, e.stamp, e.camera.as_ref(), e.full)
                    };
                    let r = pipeline.process_edges_then(view, features, px, &mut begin);
                    r.map(|written| written && edges_in_place)
                }
                _ => match px {
                    Some(px) => pipeline.process_into_edges(view, features, px),
                    None => pipeline.process_into(view, features).map(|()| false),
                },
            }
        }));
        if !matches!(result, Ok(Ok(_))) {
            // Its device image is about to be overwritten, or freed with the pipeline.
            self.w.tracks.tracker.drop_begun();
        }
        let w = &self.w;
        match result {
            Ok(Ok(in_message)) => {
                if let (Some(why), false) = (self.pipeline.gpu_failure(), self.gpu_failure_logged) {
                    // Logged once; the pipeline redid the frame on the CPU and stays there.
                    r2r::log_warn!(
                        &w.logger,
                        "input {}: GPU failure, switched to the CPU backend: {why}",
                        w.label
                    );
                    self.gpu_failure_logged = true;
                    let mut s = w.stats.lock().unwrap();
                    s.count.gpu_failures += 1;
                    s.gpu_failure = why.to_string();
                }
                Some(in_message)
            }
            Ok(Err(e)) => {
                if self.error_log.allow().is_some() {
                    r2r::log_error!(&w.logger, "input {}: processing failed: {e}", w.label);
                }
                w.stats.lock().unwrap().count.process_errors += 1;
                None
            }
            Err(_) => {
                if self.error_log.allow().is_some() {
                    r2r::log_error!(
                        &w.logger,
                        "input {}: pipeline panicked; rebuilding it",
                        w.label
                    );
                }
                w.stats.lock().unwrap().count.process_errors += 1;
                match w.make_pipeline(self.choice) {
                    Ok((p, g, d)) => {
                        // A matcher in the old pipeline's GPU session goes with it.
                        self.previous = PreviousFrame::default();
                        self.pipeline = p;
                        self.generation = g;
                        self.debug = d;
                    }
                    Err(e) => {
                        r2r::log_error!(
                            &w.logger,
                            "input {}: cannot rebuild pipeline: {e}",
                            w.label
                        )
                    }
                }
                None
            }
        }
    }

    /// `keypoints` (and its Foxglove annotations), serialized by us into reused buffers and
    /// published as bytes (docs/performance.md, change 55); only while someone subscribes
    /// (change 63), as every output.
    fn publish_keypoints(&mut self) {
        if listened(self.w.pub_kp.get_inter_process_subscription_count()) {
            let bytes = self.kp_cdr.encode(
                &self.header,
                &self.features.keypoints,
                self.features.descriptors_for(self.pipeline.config()),
            );
            let _ = self.w.pub_kp.publish_raw(bytes);
        }
        if let Some(p) = &self.w.pub_ann {
            if listened(p.get_inter_process_subscription_count()) {
                let stamp = crate::cdr::Time {
                    sec: self.header.stamp.sec,
                    nanosec: self.header.stamp.nanosec,
                };
                let _ = p.publish_raw(self.annotations.encode(stamp, &self.features.keypoints));
            }
        }
    }

    /// `edges`, `matches`, the tracker's outputs and the debug image; returns the
    /// tracker's camera problem, if any.
    fn publish_rest(
        &mut self,
        view: &ImageView,
        edges_in_message: bool,
        edges_listened: bool,
        debug_listened: bool,
    ) -> Option<String> {
        let (w, header, features) = (&mut self.w, &self.header, &self.features);
        // The edge image (2 MB at 1080p), written by the pipeline into its message's bytes,
        // costs 0.5-0.6 ms to publish, Fast DDS's copy into its sample (docs/performance.md,
        // changes 74 and 75): computed and published only while someone subscribes
        // (above), as the debug image below. A subscriber not yet matched would miss it
        // either way.
        if edges_in_message {
            let _ = w.pub_edges.publish_raw(self.image_cdr.in_place());
        } else if let (Some(edges), true) = (&features.edges, edges_listened) {
            let _ = w.pub_edges.publish_raw(self.image_cdr.mono8(header, edges));
        }
        match (
            self.match_previous,
            features.descriptors_for(self.pipeline.config()),
        ) {
            (true, Some(descriptors)) => {
                let (cloud, problem) = self.previous.step(header, descriptors, &self.pipeline);
                let _ = w.pub_matches.publish(&cloud);
                self.previous.recycle(cloud);
                if let (Some(p), Some(_)) = (problem, self.error_log.allow()) {
                    r2r::log_warn!(&w.logger, "input {}: matcher: {p}", w.label);
                }
            }
            _ => self.previous.reset(),
        }
        let mut camera_problem = None;
        let tracking = self.pipeline.config().track.enabled;
        if tracking {
            let cfg = self.pipeline.config().track.clone();
            w.tracks.picture.want = debug_listened;
            camera_problem = w.tracks.step(header, view, &self.pipeline, &cfg);
        }
        // With tracking, a picture for the frames tracked only (the replay's rule).
        if debug_listened && (!tracking || w.tracks.picture.tracked) {
            crate::cpu::decode::decode(view, &mut self.gray);
            let bytes = if tracking {
                // VINS-Fusion's picture of the tracks (the right camera beside the left).
                let (t, pic) = (&w.tracks.tracker, &w.tracks.picture);
                let tracks = (t.tracks(), t.right_tracks());
                let gray = (&self.gray, pic.right());
                self.image_cdr
                    .tracking_overlay(header, gray, tracks, &pic.prev)
            } else {
                self.image_cdr.debug_overlay(header, &self.gray, features)
            };
            let _ = w.pub_debug.publish_raw(bytes);
            if tracking {
                let tracks = w.tracks.tracker.tracks();
                w.tracks.picture.remember(tracks);
            }
        }
        camera_problem
    }

    /// The frame's measures into the input's stats: `at` (received, keypoints out), its
    /// latency and parts (ms), whether it made an edge map, the tracker's camera problem.
    fn record(
        &mut self,
        at: (Instant, Instant),
        latency: f64,
        parts: [f64; 4],
        (edge_map, camera_problem): (bool, Option<String>),
    ) {
        let (w, features) = (&self.w, &self.features);
        let tracking = self.pipeline.config().track.enabled;
        let mut s = w.stats.lock().unwrap();
        s.track.enabled = tracking;
        s.track.camera_problem = camera_problem;
        s.track.camera = w.tracks.camera_use;
        if tracking {
            s.track.tracks = w.tracks.tracker.tracks().len();
            s.track.right_tracks = w.tracks.tracker.right_tracks().len();
            s.track.stereo_pairs = w.tracks.stereo_pairs;
            if s.track.ms[0].len() < MAX_KEPT_LATENCIES {
                for (all, v) in s.track.ms.iter_mut().zip(w.tracks.times) {
                    all.push(v);
                }
            }
        }
        s.count.processed += 1;
        s.window.processed += 1;
        s.count.edge_maps += edge_map as u64;
        s.window.latency_ms.push(latency);
        let h = &self.header;
        s.run
            .trace
            .push(convert::stamp_ns(h.stamp.sec, h.stamp.nanosec), at.0, at.1);
        for (w, v) in s.window.parts_ms.iter_mut().zip(parts) {
            w.push(v);
        }
        if s.run.latency_ms.len() < MAX_KEPT_LATENCIES {
            s.run.latency_ms.push(latency);
            for (all, v) in s.run.parts_ms.iter_mut().zip(parts) {
                all.push(v);
            }
        }
        for t in &features.timings {
            let e = s.window.stage_ms.entry(t.stage).or_insert((0.0, 0));
            e.0 += t.ms;
            e.1 += 1;
        }
        s.backend = self.pipeline.backend().name().to_string();
    }
}
