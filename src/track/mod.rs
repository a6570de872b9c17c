//! Feature tracks for visual-inertial odometry: the front-end of VINS-Mono / VINS-Fusion's
//! `feature_tracker`, rebuilt on the OpenCV-exact CPU reference (`cpu::lk`, `cpu::gftt`).
//!
//! Per frame ([`Tracker::track`]), in VINS-Fusion's order (steps 1-2 here, the rest in
//! track/steps.rs):
//! 1. the frame's LK pyramid (kept as the next frame's previous pyramid);
//! 2. the previous points tracked forward (`calcOpticalFlowPyrLK`, window 21, 3 levels);
//!    with `flow_back`, tracked back (1 level, from the previous positions) and kept only
//!    when they return within 0.5 px; points whose rounded position leaves the image's
//!    one-pixel border dropped;
//! 3. every surviving track one frame older; with `ransac_threshold > 0` the fundamental
//!    matrix test (VINS-Mono's `rejectWithF`, [`fundamental`]);
//! 4. VINS's mask ([`mask`]): tracks by age, oldest first (ties in their previous order),
//!    each kept only where no older one already claimed its disc of `min_distance`;
//! 5. new corners where the mask allows, up to `max_features` (`goodFeaturesToTrack`, or
//!    FAST ranked by ORB's Harris score), with new IDs;
//! 6. normalised coordinates through the camera model (none without `camera_info`) and
//!    velocities against the previous frame's positions of the same IDs.
//!
//! VINS-Mono's front-end (`TrackParams::frontend`, the frames picked by
//! `output::gate::FeatureGate`): its unpublished frames get steps 1, 2 and 6 only
//! ([`Tracker::track_flow_only`]); a new track's velocity is 0 on its second frame too. With
//! `equalize` every frame is first equalised by OpenCV's CLAHE (`cpu::clahe`, on the host).
//!
//! Stereo (VINS-Fusion's second camera): `Tracker::track_stereo` (track/stereo.rs).
//!
//! IDs are `u64`, never reused within a tracker; the state resets (all tracks dropped, IDs
//! continuing) when the time goes backwards (a looping bag), the resolution changes or the
//! camera model changes.
//!
//! Deliberate differences from VINS: the mask's sort is stable (VINS's `std::sort` leaves
//! equal ages in an order that depends on the standard library), and the F test runs on
//! VINS-Fusion's path too (it left it commented out) when configured.
//!
//! May import: `camera`, `config`, `cpu`, `cuda`, `error`, `image`, `pipeline` (`BackendKind`), `std_sort` (`cpu` and `cuda` for LK
//! and the corner detectors).

mod engine;
pub mod fundamental;
mod input;
mod lift;
pub mod mask;
mod steps;
mod stereo;
mod types;
mod work;

use self::engine::FlowEngine;
use self::input::HostFrame;
pub use self::input::{RightInput, TrackInput};
pub use self::stereo::STEREO_PAIR_TOLERANCE_NS;
pub use self::types::{FrameStats, Reset, TopUp, Track, TrackParams};
use self::work::Work;
use crate::camera::CameraModel;
use crate::cpu::clahe::clahe;
use crate::image::GrayImage;
use crate::pipeline::BackendKind;

/// How much of VINS's per-frame work a frame gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Everything (VINS-Fusion's every frame; VINS-Mono's published frames).
    Full,
    /// Flow, border and lifting only (VINS-Mono's frames without a `feature` message).
    FlowOnly,
}

/// A frame begun early ([`Tracker::begin`]): its pyramid built and its LK queued on the
/// GPU; the same frame's `track_input` (stamp, size, step and camera alike) finishes it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Begun {
    stamp: f64,
    size: (usize, usize),
    step: Step,
}

/// VINS's feature tracker for one camera. Buffers are kept from frame to frame; a
/// resolution change reallocates them once.
#[derive(Default)]
pub struct Tracker {
    params: TrackParams,
    engine: FlowEngine,
    /// Why the GPU engine was given up, if it was.
    gpu_failure: Option<String>,
    prev_pts: Vec<(f32, f32)>,
    prev_time: Option<f64>,
    size: (usize, usize),
    camera: Option<CameraModel>,
    next_id: u64,
    tracks: Vec<Track>,
    stats: FrameStats,
    resets: Vec<Reset>,
    /// The per-frame work buffers ([`Work`]).
    work: Work,
    /// Stereo: the second camera's side (track/stereo.rs).
    stereo: stereo::StereoSide,
    /// The last frame wanted new corners (the GPU then starts the next frame's corner map
    /// beside LK).
    last_wanted: bool,
    /// The frame begun early and not finished yet, if any.
    begun: Option<Begun>,
    /// LK's GPU time measured (`FrameStats::lk_kernel_ms`; [`Tracker::time_lk_kernel`]).
    time_lk: bool,
}

impl Tracker {
    pub fn new(params: TrackParams) -> Tracker {
        let mut t = Tracker {
            params,
            ..Default::default()
        };
        t.reserve();
        t
    }

    /// Room for `max_features` in every per-track buffer, so that no frame grows one
    /// (the image-sized buffers grow on the first two frames of a size; tests/robustness.rs
    /// counts the allocations of a frame).
    fn reserve(&mut self) {
        let m = self.params.max_features;
        self.prev_pts.reserve(m);
        self.tracks.reserve(m);
        self.work.reserve(m);
        self.stereo.reserve(m);
        self.engine.reserve(m);
    }

    /// Where the LK stage runs.
    pub fn backend(&self) -> BackendKind {
        self.engine.kind()
    }

    /// Why the GPU was given up (the tracker runs on the CPU since), if it was.
    pub fn gpu_failure(&self) -> Option<&str> {
        self.gpu_failure.as_deref()
    }

    pub fn params(&self) -> &TrackParams {
        &self.params
    }

    /// New settings take effect on the next frame; the tracks are kept when the pyramid's
    /// shape stays the same, else they start over.
    pub fn set_params(&mut self, params: TrackParams) {
        if (params.window, params.levels) != (self.params.window, self.params.levels) {
            self.clear();
        }
        self.params = params;
        self.reserve();
    }

    /// The tracks of the last frame (oldest first, then the new ones).
    pub fn tracks(&self) -> &[Track] {
        &self.tracks
    }

    /// Measures LK's GPU time (CUDA events around its launch) into
    /// [`FrameStats::lk_kernel_ms`] from the next frame on (`bench --tracks`); off by
    /// default, as the two event records cost host time on the frame's path.
    pub fn time_lk_kernel(&mut self, on: bool) {
        self.time_lk = on;
    }

    pub fn stats(&self) -> &FrameStats {
        &self.stats
    }

    /// Resets since the tracker was made, in order.
    pub fn resets(&self) -> &[Reset] {
        &self.resets
    }

    /// Drops every track (IDs keep counting up).
    pub fn clear(&mut self) {
        self.prev_pts.clear();
        self.tracks.clear();
        self.stereo.clear();
        self.prev_time = None;
    }

    /// [`Tracker::track`] on a frame in any supported encoding (converted to gray as the
    /// CPU reference's decode does; a copy for mono8).
    pub fn track_view(
        &mut self,
        view: &crate::image::ImageView,
        stamp: f64,
        camera: Option<&CameraModel>,
    ) -> &[Track] {
        self.track_input(TrackInput::View(view), stamp, camera)
    }

    /// One frame taken at `stamp` seconds, with the camera model if known. Returns the
    /// frame's tracks.
    pub fn track(&mut self, img: &GrayImage, stamp: f64, camera: Option<&CameraModel>) -> &[Track] {
        self.track_input(TrackInput::Gray(img), stamp, camera)
    }

    /// [`Tracker::track`] on a frame given as [`TrackInput`]: with the frame's gray image
    /// already on the GPU, the GPU tracker builds its pyramid from it (the same pixels: the
    /// GPU decode equals the CPU's), and the host converts nothing.
    pub fn track_input(
        &mut self,
        input: TrackInput,
        stamp: f64,
        camera: Option<&CameraModel>,
    ) -> &[Track] {
        self.track_step(input, stamp, camera, Step::Full)
    }

    /// Begins `input`'s frame early, on the GPU: its pyramid built from the gray image on
    /// the device and LK queued on the tracker's stream, with no wait, so that they run
    /// while the caller waits for other work of the same frame (the node: the pipeline's
    /// detection, `Pipeline::process_edges_then`). The same frame's
    /// [`Tracker::track_input`] (`full`) or [`Tracker::track_flow_only`] (not `full`),
    /// with the same stamp and camera, then finishes it: the same tracks as without this
    /// call. Does nothing on the CPU, with `equalize`, or for a frame not on the device.
    /// The device image must stay as it is until the frame is finished or dropped
    /// ([`Tracker::drop_begun`]); any other frame drops a begun one first.
    pub fn begin(
        &mut self,
        input: TrackInput,
        stamp: f64,
        camera: Option<&CameraModel>,
        full: bool,
    ) {
        self.drop_begun();
        let mut frame = HostFrame::new(input, std::mem::take(&mut self.work.gray));
        #[cfg(feature = "cuda")]
        let on_device = frame.device().is_some();
        #[cfg(not(feature = "cuda"))]
        let on_device = false;
        if on_device && !self.params.equalize && self.backend() == BackendKind::Cuda {
            let step = if full { Step::Full } else { Step::FlowOnly };
            let camera = camera.map(|c| c.clone().lifted(self.params.lifting));
            let t0 = std::time::Instant::now();
            self.begin_frame(&mut frame, stamp, camera, step);
            self.stats.begin_ms = t0.elapsed().as_secs_f64() * 1e3;
            let size = frame.input.size();
            self.begun = Some(Begun { stamp, size, step });
        }
        self.work.gray = frame.buf;
    }

    /// A begun frame ([`Tracker::begin`]) that will not be finished (its pipeline failed):
    /// its GPU work waited for (the device image is free again) and its pyramid given
    /// back, so that the next frame is tracked from the one before it. Nothing without one.
    pub fn drop_begun(&mut self) {
        if self.begun.take().is_some() {
            if let Err(e) = self.engine.undo_frame() {
                self.fall_back(e);
            }
        }
    }

    /// VINS-Mono's frames without a `feature` message: the tracks followed into the frame
    /// (flow, border) and lifted, but no F test, no mask and no new corners.
    pub fn track_flow_only(
        &mut self,
        input: TrackInput,
        stamp: f64,
        camera: Option<&CameraModel>,
    ) -> &[Track] {
        self.track_step(input, stamp, camera, Step::FlowOnly)
    }

    fn track_step(
        &mut self,
        input: TrackInput,
        stamp: f64,
        camera: Option<&CameraModel>,
        step: Step,
    ) -> &[Track] {
        let mut frame = HostFrame::new(input, std::mem::take(&mut self.work.gray));
        if self.params.equalize {
            // CLAHE on the host pixels; the tracker then sees only the equalised frame.
            let mut eq = std::mem::take(&mut self.work.equalized);
            clahe(frame.pixels(), 3.0, 8, &mut eq, &mut self.work.clahe);
            self.work.gray = frame.buf;
            let mut frame = HostFrame::new(TrackInput::Gray(&eq), GrayImage::default());
            self.track_frame(&mut frame, stamp, camera, step);
            self.work.equalized = eq;
        } else {
            self.track_frame(&mut frame, stamp, camera, step);
            self.work.gray = frame.buf;
        }
        self.release_inputs();
        &self.tracks
    }

    fn track_frame(
        &mut self,
        frame: &mut HostFrame,
        stamp: f64,
        camera: Option<&CameraModel>,
        step: Step,
    ) {
        let size = frame.input.size();
        // The camera lifted as `track.lifting` asks (a camodocal file's MEI always is).
        let camera = camera.map(|c| c.clone().lifted(self.params.lifting));
        let t0 = std::time::Instant::now();
        // This very frame begun early (`Tracker::begin`): its pyramid and LK are queued.
        let this = Begun { stamp, size, step };
        if self.begun == Some(this) && camera == self.camera {
            self.begun = None;
        } else {
            self.drop_begun();
            self.begin_frame(frame, stamp, camera, step);
            self.stats.begin_ms = f64::NAN;
        }
        self.finish_frame(frame, stamp, step);
        self.stats.total_ms = t0.elapsed().as_secs_f64() * 1e3;
    }

    /// The frame's first part: the resets its stamp, size and camera call for, its
    /// pyramid (step 1), the corner map marked, LK launched (step 2; on the GPU it runs
    /// while the caller goes on).
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    fn begin_frame(
        &mut self,
        frame: &mut HostFrame,
        stamp: f64,
        camera: Option<CameraModel>,
        step: Step,
    ) {
        let p = self.params;
        let size = frame.input.size();
        if self.prev_time.is_some_and(|t| stamp < t) {
            self.reset(Reset::TimeWentBack);
        }
        if !self.prev_pts.is_empty() && size != self.size {
            self.reset(Reset::Resolution);
        }
        if !self.prev_pts.is_empty() && camera != self.camera {
            self.reset(Reset::Camera);
        }
        self.size = size;
        self.camera = camera;
        self.stats = FrameStats::default();
        self.stereo.start_frame();
        let t0 = std::time::Instant::now();
        let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;

        if let Err(e) = self.engine.next_frame(frame, p.window, p.levels) {
            self.fall_back(e);
            let _ = self.engine.next_frame(frame, p.window, p.levels);
        }
        // goodFeaturesToTrack's map needs no mask: on the GPU it starts now, beside LK,
        // when new corners are likely to be wanted (fewer tracks than the budget, or the
        // last frame wanted some: tracks lost on one frame are mostly lost on the next
        // too); else it starts only if the flow loses some, and LK has the GPU to itself.
        #[cfg(feature = "cuda")]
        if let (FlowEngine::Gpu(gf), TopUp::Gftt, Step::Full) = (&mut self.engine, p.top_up, step) {
            if self.prev_pts.len() < p.max_features || self.last_wanted {
                if let Err(e) = gf.mark_corner_map(size) {
                    self.fall_back(e);
                }
            }
        }
        self.stats.pyramid_ms = ms(t0);
        let t1 = std::time::Instant::now();
        if !self.prev_pts.is_empty() {
            let (lk, back) = self.lk_params();
            self.engine.time_lk(self.time_lk);
            if let Err(e) = self.engine.launch_flow(&self.prev_pts, &lk, back.as_ref()) {
                self.fall_back(e);
            }
        }
        self.stats.flow_ms = ms(t1);
    }

    /// The frame's second part, after [`Tracker::begin_frame`]: steps 2 (the flows
    /// collected) to 6.
    fn finish_frame(&mut self, frame: &mut HostFrame, stamp: f64, step: Step) {
        let p = self.params;
        let full = step == Step::Full;
        let size = frame.input.size();
        let t1 = std::time::Instant::now();

        // 1-2. Flow forward, flow back, border.
        let mut kept = std::mem::take(&mut self.work.kept);
        kept.clear();
        if !self.prev_pts.is_empty() {
            self.flow(size, &mut kept);
        }
        self.stats.flow_ms += t1.elapsed().as_secs_f64() * 1e3;
        self.stats.lk_kernel_ms = if self.prev_pts.is_empty() {
            f64::NAN
        } else {
            self.engine.lk_kernel_ms()
        };

        // 3. Fundamental-matrix test (OpenCV's RANSAC from 15 pairs; below, where OpenCV
        // would switch to LMeDS, the tracks are kept).
        if full && p.ransac_threshold > 0.0 && kept.len() >= 15 {
            self.f_test(&mut kept);
        }

        // 4. Mask: oldest first (VINS's order among one age, or stable), each claims its
        // disc. Stable: Tracks of one age were born
        // in one frame, in the order of their IDs, and every step since kept their order:
        // so the ID breaks the ties as a stable sort would, and the unstable sort needs no
        // scratch memory (the stable one allocates beyond a few dozen tracks).
        if full {
            self.mask_and_top_up(frame, &mut kept);
        } else {
            self.work.corners.clear();
        }

        // 6. Normalised coordinates and velocities.
        self.lift(&kept, stamp);
        self.work.kept = kept;
    }

    /// A GPU failure: the CPU engine from now on; the tracks start over (their previous
    /// pyramid was on the GPU).
    /// The device images of this call given back to their owners
    /// ([`FlowEngine::release_inputs`]); a GPU that fails here moves the tracker to the
    /// CPU, as any GPU failure.
    fn release_inputs(&mut self) {
        if let Err(e) = self.engine.release_inputs() {
            self.fall_back(e);
        }
    }

    fn fall_back(&mut self, e: crate::error::Error) {
        if self.gpu_failure.is_none() {
            self.gpu_failure = Some(e.to_string());
        }
        self.engine = FlowEngine::default();
        self.prev_pts.clear();
        self.tracks.clear();
        self.work.fwd.clear();
        self.work.back.clear();
    }

    fn reset(&mut self, why: Reset) {
        self.resets.push(why);
        self.clear();
    }
}

#[cfg(test)]
mod tests;
