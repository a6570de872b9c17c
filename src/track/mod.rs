//! Feature tracks for visual-inertial odometry: the front-end of VINS-Mono / VINS-Fusion's
//! `feature_tracker`, rebuilt on the OpenCV-exact CPU reference (`cpu::lk`, `cpu::gftt`).
//!
//! Per frame ([`Tracker::track`]), in VINS-Fusion's order:
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
//! IDs are `u64`, never reused within a tracker; the state resets (all tracks dropped, IDs
//! continuing) when the time goes backwards (a looping bag), the resolution changes or the
//! camera model changes.
//!
//! Deliberate differences from VINS: the mask's sort is stable (VINS's `std::sort` leaves
//! equal ages in an order that depends on the standard library), and the F test runs on
//! VINS-Fusion's path too (it left it commented out) when configured.

mod engine;
pub mod fundamental;
pub mod mask;
mod types;

use std::collections::HashMap;

use nalgebra::Point2;

use self::engine::FlowEngine;
#[cfg(feature = "cuda")]
use self::engine::GpuFlow;
use self::fundamental::{ransac_mask, RansacParams};
use self::mask::{fill_circle, round_px};
pub use self::types::{FrameStats, Reset, TopUp, Track, TrackParams};
use crate::camera::CameraModel;
use crate::cpu::gftt::{good_features_to_track, keep_spaced, GfttParams, GfttScratch};
use crate::cpu::lk::{Flow, LkParams};
use crate::image::GrayImage;

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
    gftt: GfttScratch,
    fwd: Vec<Flow>,
    back: Vec<Flow>,
    mask: GrayImage,
    corners: Vec<(f32, f32)>,
    grid: Vec<Vec<(f32, f32)>>,
    gray: GrayImage,
    /// Stereo: the second camera's tracks of the last frame, and the previous ones by ID
    /// (pixel and normalised positions, for the velocities).
    right_tracks: Vec<Track>,
    prev_right: HashMap<u64, (f32, f32, f64, f64)>,
    gray_right: GrayImage,
    /// The last `track` call's time step (for the right tracks' velocities).
    stereo_dt: Option<f64>,
    /// `track_right` ran on the last frame (else the previous right positions are stale).
    right_fresh: bool,
    // Per-frame work buffers, kept so that a frame allocates nothing once they have grown.
    kept: Vec<(Track, (f32, f32))>,
    ok: Vec<bool>,
    spare_tracks: Vec<Track>,
    stereo_pts: Vec<(f32, f32)>,
    stereo_fwd: Vec<Flow>,
    stereo_rev: Vec<Flow>,
    cur_right: HashMap<u64, (f32, f32, f64, f64)>,
}

impl Tracker {
    pub fn new(params: TrackParams) -> Tracker {
        Tracker {
            params,
            ..Default::default()
        }
    }

    /// A tracker whose LK stage runs on the GPU (window up to 31); the CPU's when CUDA
    /// cannot start, with the reason.
    #[cfg(feature = "cuda")]
    pub fn with_cuda(params: TrackParams) -> (Tracker, Option<String>) {
        let mut t = Tracker::new(params);
        if params.window > crate::cuda::lk::MAX_WINDOW {
            return (
                t,
                Some(format!(
                    "track.window {} > {}: LK on the CPU",
                    params.window,
                    crate::cuda::lk::MAX_WINDOW
                )),
            );
        }
        match crate::cuda::Gpu::new().and_then(|gpu| {
            let lk = crate::cuda::lk::GpuLk::new(&gpu, params.max_features.max(64))?;
            Ok(GpuFlow {
                gpu,
                prev: Default::default(),
                cur: Default::default(),
                right: Default::default(),
                lk,
                gftt: None,
                map_started: false,
            })
        }) {
            Ok(g) => {
                t.engine = FlowEngine::Gpu(Box::new(g));
                (t, None)
            }
            Err(e) => (t, Some(e.to_string())),
        }
    }

    /// Without the `cuda` feature: the CPU tracker, and why.
    #[cfg(not(feature = "cuda"))]
    pub fn with_cuda(params: TrackParams) -> (Tracker, Option<String>) {
        (
            Tracker::new(params),
            Some("built without the cuda feature".into()),
        )
    }

    /// `cpu` or `cuda`: where the LK stage runs.
    pub fn backend(&self) -> &'static str {
        self.engine.name()
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
    }

    /// The tracks of the last frame (oldest first, then the new ones).
    pub fn tracks(&self) -> &[Track] {
        &self.tracks
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
        self.right_tracks.clear();
        self.prev_right.clear();
        self.prev_time = None;
    }

    /// Stereo: the second camera's tracks of the last [`Tracker::track_stereo`] frame (the
    /// first camera's IDs and ages, the second camera's positions).
    pub fn right_tracks(&self) -> &[Track] {
        &self.right_tracks
    }

    /// [`Tracker::track_stereo`] on frames in any supported encoding.
    pub fn track_stereo_view(
        &mut self,
        left: &crate::image::ImageView,
        right: &crate::image::ImageView,
        stamp: f64,
        cameras: (Option<&CameraModel>, Option<&CameraModel>),
    ) -> std::result::Result<(), String> {
        let mut gray = std::mem::take(&mut self.gray_right);
        crate::cpu::decode::decode(right, &mut gray);
        self.track_view(left, stamp, cameras.0);
        let r = self.track_right(&gray, cameras.1);
        self.gray_right = gray;
        r
    }

    /// VINS-Fusion's stereo mode: the frame pair taken at `stamp`; the first camera is
    /// tracked as by [`Tracker::track`], then its tracks are found in the second camera's
    /// frame by LK (from their left positions, no initial flow) and, with `flow_back`,
    /// tracked back into the left frame and kept when they return within 0.5 px and land
    /// inside the right frame's one-pixel border ([`Tracker::right_tracks`]). Velocities
    /// of the right tracks are against the previous right positions of the same IDs. An
    /// error (a right frame of another size) leaves no right tracks for this frame.
    pub fn track_stereo(
        &mut self,
        left: &GrayImage,
        right: &GrayImage,
        stamp: f64,
        cameras: (Option<&CameraModel>, Option<&CameraModel>),
    ) -> std::result::Result<(), String> {
        self.track(left, stamp, cameras.0);
        self.track_right(right, cameras.1)
    }

    /// The stereo step alone, after [`Tracker::track`] (or `track_view`) on the first
    /// camera's frame: `right` is the second camera's frame of the same instant.
    pub fn track_right(
        &mut self,
        right: &GrayImage,
        camera: Option<&CameraModel>,
    ) -> std::result::Result<(), String> {
        self.right_tracks.clear();
        let dt = self.stereo_dt.take();
        if (right.width, right.height) != self.size {
            self.prev_right.clear();
            return Err(format!(
                "the second camera's frame is {}x{}, the first's {}x{}: no stereo tracks",
                right.width, right.height, self.size.0, self.size.1
            ));
        }
        let p = self.params;
        let lk = LkParams {
            window: p.window,
            max_level: p.levels,
            ..Default::default()
        };
        let back = p.flow_back.then_some(&lk);
        let mut pts = std::mem::take(&mut self.stereo_pts);
        pts.clear();
        pts.extend(self.tracks.iter().map(|t| (t.x, t.y)));
        let (mut fwd, mut rev) = (
            std::mem::take(&mut self.stereo_fwd),
            std::mem::take(&mut self.stereo_rev),
        );
        fwd.clear();
        rev.clear();
        if !pts.is_empty() {
            if let Err(e) = self
                .engine
                .stereo(right, &pts, &lk, back, &mut fwd, &mut rev)
            {
                self.fall_back(e);
                return Err("the GPU failed: the tracks start over on the CPU".into());
            }
        }
        let (w, h) = (right.width as i32, right.height as i32);
        let mut cur = std::mem::take(&mut self.cur_right);
        cur.clear();
        for (i, f) in fwd.iter().enumerate() {
            let keep = if p.flow_back {
                let b = &rev[i];
                let (dx, dy) = (pts[i].0 - b.x, pts[i].1 - b.y);
                let d = ((dx * dx + dy * dy) as f64).sqrt();
                let (rx, ry) = (round_px(f.x), round_px(f.y));
                let inside = 1 <= rx && rx < w - 1 && 1 <= ry && ry < h - 1;
                f.status && b.status && inside && d <= 0.5
            } else {
                f.status
            };
            if !keep {
                continue;
            }
            let left = &self.tracks[i];
            let (x_n, y_n) = camera
                .and_then(|c| c.undistort(Point2::new(f.x as f64, f.y as f64)))
                .map_or((f64::NAN, f64::NAN), |q| (q.x, q.y));
            let mut t = Track {
                x: f.x,
                y: f.y,
                x_n,
                y_n,
                vx: 0.0,
                vy: 0.0,
                px_vx: 0.0,
                px_vy: 0.0,
                ..*left
            };
            if let (Some(dt), Some(&(px, py, pxn, pyn))) = (dt, self.prev_right.get(&t.id)) {
                (t.vx, t.vy) = ((t.x_n - pxn) / dt, (t.y_n - pyn) / dt);
                (t.px_vx, t.px_vy) = ((t.x - px) as f64 / dt, (t.y - py) as f64 / dt);
            }
            if camera.is_none() {
                (t.vx, t.vy) = (f64::NAN, f64::NAN);
            }
            cur.insert(t.id, (t.x, t.y, t.x_n, t.y_n));
            self.right_tracks.push(t);
        }
        self.cur_right = std::mem::replace(&mut self.prev_right, cur);
        (self.stereo_pts, self.stereo_fwd, self.stereo_rev) = (pts, fwd, rev);
        self.right_fresh = true;
        Ok(())
    }

    /// [`Tracker::track`] on a frame in any supported encoding (converted to gray as the
    /// CPU reference's decode does; a copy for mono8).
    pub fn track_view(
        &mut self,
        view: &crate::image::ImageView,
        stamp: f64,
        camera: Option<&CameraModel>,
    ) -> &[Track] {
        let mut gray = std::mem::take(&mut self.gray);
        crate::cpu::decode::decode(view, &mut gray);
        self.track(&gray, stamp, camera);
        self.gray = gray;
        &self.tracks
    }

    /// One frame taken at `stamp` seconds, with the camera model if known. Returns the
    /// frame's tracks.
    pub fn track(&mut self, img: &GrayImage, stamp: f64, camera: Option<&CameraModel>) -> &[Track] {
        let p = self.params;
        let size = (img.width, img.height);
        if self.prev_time.is_some_and(|t| stamp < t) {
            self.reset(Reset::TimeWentBack);
        }
        if !self.prev_pts.is_empty() && size != self.size {
            self.reset(Reset::Resolution);
        }
        if !self.prev_pts.is_empty() && camera != self.camera.as_ref() {
            self.reset(Reset::Camera);
        }
        self.size = size;
        self.camera = camera.cloned();
        self.stats = FrameStats::default();
        if !std::mem::take(&mut self.right_fresh) {
            self.prev_right.clear();
        }
        self.right_tracks.clear();
        let t0 = std::time::Instant::now();
        let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;

        if let Err(e) = self.engine.next_frame(img, p.window, p.levels) {
            self.fall_back(e);
            let _ = self.engine.next_frame(img, p.window, p.levels);
        }
        // goodFeaturesToTrack's map needs no mask: on the GPU it starts now, beside LK,
        // when new corners are likely to be wanted (fewer tracks than the budget; else it
        // starts only if the flow loses some, and LK has the GPU to itself).
        #[cfg(feature = "cuda")]
        if let (FlowEngine::Gpu(gf), TopUp::Gftt) = (&mut self.engine, p.top_up) {
            if self.prev_pts.len() < p.max_features {
                if let Err(e) = gf.start_corner_map(img) {
                    self.fall_back(e);
                }
            }
        }
        self.stats.pyramid_ms = ms(t0);
        let t1 = std::time::Instant::now();

        // 1-2. Flow forward, flow back, border.
        let mut kept = std::mem::take(&mut self.kept);
        kept.clear();
        if !self.prev_pts.is_empty() {
            let lk = LkParams {
                window: p.window,
                max_level: p.levels,
                ..Default::default()
            };
            let back = LkParams { max_level: 1, ..lk };
            let back = p.flow_back.then_some(&back);
            let mut ok = std::mem::take(&mut self.ok);
            ok.clear();
            let n = self.prev_pts.len();
            match self
                .engine
                .flow(&self.prev_pts, &lk, back, &mut self.fwd, &mut self.back)
            {
                Ok(()) => ok.extend(self.fwd.iter().map(|f| f.status)),
                Err(e) => {
                    self.fall_back(e);
                    ok.resize(n, false);
                }
            }
            if p.flow_back && ok.iter().any(|&k| k) {
                let (mut sum, mut n) = (0.0, 0);
                for (i, k) in ok.iter_mut().enumerate() {
                    let (a, b) = (self.prev_pts[i], (self.back[i].x, self.back[i].y));
                    // VINS's distance(): f32 differences, the root in f64.
                    let (dx, dy) = (a.0 - b.0, a.1 - b.1);
                    let d = ((dx * dx + dy * dy) as f64).sqrt();
                    if *k && self.back[i].status {
                        sum += d;
                        n += 1;
                    }
                    let pass = *k && self.back[i].status && d <= 0.5;
                    if *k && !pass {
                        self.stats.flow_back_rejected += 1;
                    }
                    *k = pass;
                }
                self.stats.flow_back_error = if n > 0 { sum / n as f64 } else { 0.0 };
            }
            self.stats.tried = self.prev_pts.len();
            let (w, h) = (img.width as i32, img.height as i32);
            for (i, f) in self.fwd.iter().enumerate() {
                let (rx, ry) = (round_px(f.x), round_px(f.y));
                let inside = 1 <= rx && rx < w - 1 && 1 <= ry && ry < h - 1;
                if ok[i] && inside {
                    let mut t = self.tracks[i];
                    (t.x, t.y) = (f.x, f.y);
                    t.age += 1;
                    kept.push((t, self.prev_pts[i]));
                }
            }
            self.stats.flow_ok = kept.len() + self.stats.flow_back_rejected;
            self.ok = ok;
        }
        self.stats.flow_ms = ms(t1);
        self.stats.lk_kernel_ms = if self.prev_pts.is_empty() {
            f64::NAN
        } else {
            self.engine.lk_kernel_ms()
        };

        // 3. Fundamental-matrix test (OpenCV's RANSAC from 15 pairs; below, where OpenCV
        // would switch to LMeDS, the tracks are kept).
        if p.ransac_threshold > 0.0 && kept.len() >= 15 {
            let project = |pt: (f32, f32)| self.ransac_point(pt);
            let a: Vec<(f32, f32)> = kept.iter().map(|(_, prev)| project(*prev)).collect();
            let b: Vec<(f32, f32)> = kept.iter().map(|(t, _)| project((t.x, t.y))).collect();
            let rp = RansacParams {
                threshold: p.ransac_threshold,
                ..Default::default()
            };
            let m = ransac_mask(&a, &b, &rp);
            let before = kept.len();
            let mut it = m.iter();
            kept.retain(|_| *it.next().unwrap_or(&true));
            self.stats.ransac_rejected = before - kept.len();
        }

        // 4. Mask: oldest first (stable), each claims its disc. Tracks of one age were born
        // in one frame, in the order of their IDs, and every step since kept their order:
        // so the ID breaks the ties as a stable sort would, and the unstable sort needs no
        // scratch memory (the stable one allocates beyond a few dozen tracks).
        kept.sort_unstable_by_key(|(t, _)| (std::cmp::Reverse(t.age), t.id));
        self.mask.reshape(img.width, img.height);
        self.mask.data.fill(255);
        let before = kept.len();
        let r = p.min_distance.round() as i32;
        let mask = &mut self.mask;
        kept.retain(|(t, _)| {
            let (x, y) = (round_px(t.x), round_px(t.y));
            let free = mask.get(x as usize, y as usize) == 255;
            if free {
                fill_circle(mask, x, y, r, 0);
            }
            free
        });
        self.stats.mask_dropped = before - kept.len();

        // 5. New corners.
        let want = p.max_features.saturating_sub(kept.len());
        self.corners.clear();
        let t2 = std::time::Instant::now();
        if want > 0 {
            self.detect(img, want);
        }
        self.stats.detect_ms = ms(t2);
        self.stats.added = self.corners.len();

        // 6. Normalised coordinates and velocities.
        let dt = self.prev_time.map(|t| stamp - t).filter(|&d| d > 0.0);
        self.stereo_dt = dt;
        let cam = self.camera.clone();
        let norm = |x: f32, y: f32| -> (f64, f64) {
            cam.as_ref()
                .and_then(|c| c.undistort(Point2::new(x as f64, y as f64)))
                .map_or((f64::NAN, f64::NAN), |q| (q.x, q.y))
        };
        let mut out = std::mem::take(&mut self.spare_tracks);
        out.clear();
        for &(mut t, prev) in &kept {
            let prev_n = (t.x_n, t.y_n);
            (t.x_n, t.y_n) = norm(t.x, t.y);
            match dt {
                Some(dt) => {
                    t.vx = (t.x_n - prev_n.0) / dt;
                    t.vy = (t.y_n - prev_n.1) / dt;
                    t.px_vx = (t.x - prev.0) as f64 / dt;
                    t.px_vy = (t.y - prev.1) as f64 / dt;
                }
                None => (t.vx, t.vy, t.px_vx, t.px_vy) = (0.0, 0.0, 0.0, 0.0),
            }
            if cam.is_none() {
                (t.vx, t.vy) = (f64::NAN, f64::NAN);
            }
            out.push(t);
        }
        for &(x, y) in &self.corners {
            let (x_n, y_n) = norm(x, y);
            let zero = if cam.is_some() { 0.0 } else { f64::NAN };
            out.push(Track {
                id: self.next_id,
                x,
                y,
                x_n,
                y_n,
                vx: zero,
                vy: zero,
                px_vx: 0.0,
                px_vy: 0.0,
                age: 1,
            });
            self.next_id += 1;
        }
        self.kept = kept;
        self.prev_pts.clear();
        self.prev_pts.extend(out.iter().map(|t| (t.x, t.y)));
        self.spare_tracks = std::mem::replace(&mut self.tracks, out);
        self.prev_time = Some(stamp);
        self.stats.total_ms = ms(t0);
        &self.tracks
    }

    /// A GPU failure: the CPU engine from now on; the tracks start over (their previous
    /// pyramid was on the GPU).
    fn fall_back(&mut self, e: crate::error::Error) {
        if self.gpu_failure.is_none() {
            self.gpu_failure = Some(e.to_string());
        }
        self.engine = FlowEngine::default();
        self.prev_pts.clear();
        self.tracks.clear();
        self.fwd.clear();
        self.back.clear();
    }

    fn reset(&mut self, why: Reset) {
        self.resets.push(why);
        self.clear();
    }

    /// VINS-Mono's `rejectWithF` coordinates: undistorted and put on a virtual 460 px camera
    /// centred in the image; pixels as they are without a camera model.
    fn ransac_point(&self, pt: (f32, f32)) -> (f32, f32) {
        const FOCAL: f64 = 460.0;
        let (w, h) = (self.size.0 as f64, self.size.1 as f64);
        match self
            .camera
            .as_ref()
            .and_then(|c| c.undistort(Point2::new(pt.0 as f64, pt.1 as f64)))
        {
            Some(q) => (
                (FOCAL * q.x + w / 2.0) as f32,
                (FOCAL * q.y + h / 2.0) as f32,
            ),
            None => pt,
        }
    }

    /// New corners where the mask allows, into `self.corners`.
    fn detect(&mut self, img: &GrayImage, want: usize) {
        let p = self.params;
        match p.top_up {
            TopUp::Gftt => {
                let g = GfttParams {
                    max_corners: want,
                    quality: p.quality,
                    min_distance: p.min_distance,
                    ..Default::default()
                };
                #[cfg(feature = "cuda")]
                if let FlowEngine::Gpu(gf) = &mut self.engine {
                    match gf.corners(img, &g, &self.mask, &mut self.corners) {
                        Ok(()) => return,
                        Err(e) => self.fall_back(e),
                    }
                }
                good_features_to_track(
                    img,
                    &g,
                    Some(&self.mask),
                    &mut self.gftt,
                    &mut self.corners,
                );
            }
            TopUp::Fast(threshold) => {
                let mut c = crate::cpu::fast::detect(img, threshold, true);
                let (w, h) = (img.width, img.height);
                c.retain(|c| {
                    let (x, y) = (c.x as usize, c.y as usize);
                    x >= 3 && y >= 3 && x + 4 <= w && y + 4 <= h && self.mask.get(x, y) != 0
                });
                for k in c.iter_mut() {
                    k.response = crate::cpu::harris::orb_score(img, k.x, k.y, 7, 0.04);
                }
                c.sort_by(|a, b| {
                    b.response
                        .total_cmp(&a.response)
                        .then((a.y, a.x).cmp(&(b.y, b.x)))
                });
                keep_spaced(
                    c.iter().map(|c| (c.x, c.y)),
                    w,
                    h,
                    p.min_distance,
                    want,
                    &mut self.grid,
                    &mut self.corners,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random 6x6-pixel blocks of gray (a fixed generator), smoothed by a 3x3 box so that
    /// sub-pixel shifts are trackable, shifted right by `dx` pixels (bilinear).
    fn scene(w: usize, h: usize, dx: f32) -> GrayImage {
        let mut s = 0x1234_5678u32;
        let (bw, bh) = (w / 6 + 2, h / 6 + 2);
        let blocks: Vec<f32> = (0..bw * bh)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                40.0 + (s >> 24) as f32 * 0.7
            })
            .collect();
        let at = |x: f32, y: usize| blocks[(y / 6) * bw + ((x.max(0.0) as usize) / 6).min(bw - 1)];
        let mut img = GrayImage::new(w, h);
        for y in 0..h {
            for x in 0..w {
                let fx = x as f32 - dx;
                let (x0, t) = (fx.floor(), fx - fx.floor());
                let mut v = 0.0;
                for yy in y.saturating_sub(1)..=(y + 1).min(h - 1) {
                    for k in -1..=1 {
                        let xs = x0 + k as f32;
                        v += at(xs, yy) * (1.0 - t) + at(xs + 1.0, yy) * t;
                    }
                }
                img.data[y * w + x] = (v / 9.0) as u8;
            }
        }
        img
    }

    #[test]
    fn ids_persist_age_grows_and_a_time_jump_resets() {
        let mut t = Tracker::new(TrackParams::default());
        let first: Vec<u64> = t
            .track(&scene(320, 240, 0.0), 0.0, None)
            .iter()
            .map(|t| t.id)
            .collect();
        assert!(first.len() > 20, "{}", first.len());
        let second = t.track(&scene(320, 240, 1.5), 0.05, None).to_vec();
        let kept: Vec<&Track> = second.iter().filter(|t| first.contains(&t.id)).collect();
        assert!(
            kept.len() * 10 >= first.len() * 7,
            "{} of {}",
            kept.len(),
            first.len()
        );
        assert!(kept.iter().all(|t| t.age == 2));
        let near = kept
            .iter()
            .filter(|t| (t.px_vx - 30.0).abs() < 3.0 && t.px_vy.abs() < 3.0)
            .count();
        assert!(
            near * 10 >= kept.len() * 9,
            "{near} of {} move at 30 px/s",
            kept.len()
        );
        assert!(
            second.iter().all(|t| t.x_n.is_nan()),
            "no camera, no normalised coordinates"
        );
        let max_id = second.iter().map(|t| t.id).max().unwrap();
        let third = t.track(&scene(320, 240, 3.0), 0.01, None).to_vec();
        assert_eq!(t.resets(), &[Reset::TimeWentBack]);
        assert!(
            third.iter().all(|t| t.age == 1 && t.id > max_id),
            "new IDs after a reset"
        );
    }

    #[test]
    fn a_resolution_change_resets_and_the_budget_holds() {
        let p = TrackParams {
            max_features: 40,
            ..Default::default()
        };
        let mut t = Tracker::new(p);
        assert!(t.track(&scene(320, 240, 0.0), 0.0, None).len() <= 40);
        t.track(&scene(300, 200, 0.0), 0.1, None);
        assert_eq!(t.resets(), &[Reset::Resolution]);
        let fast = TrackParams {
            top_up: TopUp::Fast(20),
            ..p
        };
        let mut t = Tracker::new(fast);
        let n = t.track(&scene(320, 240, 0.0), 0.0, None).len();
        assert!(n > 10 && n <= 40, "{n}");
    }

    #[test]
    fn stereo_finds_the_left_tracks_at_the_disparity_and_checks_the_size() {
        let mut t = Tracker::new(TrackParams::default());
        let (l0, r0) = (scene(320, 240, 0.0), scene(320, 240, -4.0));
        t.track_stereo(&l0, &r0, 0.0, (None, None)).unwrap();
        let n = t.tracks().len();
        let right = t.right_tracks().to_vec();
        assert!(right.len() * 10 >= n * 7, "{} of {n}", right.len());
        for r in &right {
            let l = t.tracks().iter().find(|l| l.id == r.id).unwrap();
            assert!(
                (l.x - r.x - 4.0).abs() < 0.5 && (l.y - r.y).abs() < 0.5,
                "{l:?} {r:?}"
            );
            assert_eq!(l.age, r.age);
        }
        // The pair moves 1.5 px right: the right tracks' pixel velocity follows.
        let (l1, r1) = (scene(320, 240, 1.5), scene(320, 240, -2.5));
        t.track_stereo(&l1, &r1, 0.05, (None, None)).unwrap();
        let moved = t
            .right_tracks()
            .iter()
            .filter(|r| right.iter().any(|p| p.id == r.id));
        let v: Vec<f64> = moved.map(|r| r.px_vx).collect();
        assert!(!v.is_empty());
        let near = v.iter().filter(|&&vx| (vx - 30.0).abs() < 3.0).count();
        assert!(near * 10 >= v.len() * 9, "{near} of {} at 30 px/s", v.len());
        // A right frame of another size: an error, no right tracks, the left goes on.
        let e = t.track_stereo(&l1, &scene(300, 240, 0.0), 0.1, (None, None));
        assert!(e.unwrap_err().contains("300x240"));
        assert!(t.right_tracks().is_empty() && !t.tracks().is_empty());
    }
}
