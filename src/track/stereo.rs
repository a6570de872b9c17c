//! VINS-Fusion's stereo mode on top of the mono [`Tracker`]: after the first camera's frame,
//! its tracks are found in the second camera's frame of the same instant (LK left -> right,
//! no initial flow; with `flow_back` the same check right -> left, within 0.5 px and inside
//! the right frame's one-pixel border), with the left's IDs and ages, the second camera's
//! normalised coordinates and velocities against the previous right positions of the same
//! IDs.

use std::collections::HashMap;

use super::input::RightInput;
use super::mask::round_px;
use super::{Track, Tracker};
use crate::camera::CameraModel;
use crate::cpu::lk::{Flow, LkParams};
use crate::image::GrayImage;
#[cfg(feature = "cuda")]
use crate::pipeline::BackendKind;

/// Stamps of the two cameras closer than this make a stereo pair (VINS-Fusion's
/// `sync_process` takes 3 ms); what the node and the replay pair frames by.
pub const STEREO_PAIR_TOLERANCE_NS: i64 = 3_000_000;

/// The second camera's side of a [`Tracker`]: its tracks of the last frame, the previous
/// ones by ID (pixel and normalised positions, for the velocities) and its work buffers
/// (kept from frame to frame: nothing allocated once they have grown).
#[derive(Default)]
pub(super) struct StereoSide {
    pub(super) tracks: Vec<Track>,
    pub(super) prev: HashMap<u64, (f32, f32, f64, f64)>,
    pub(super) cur: HashMap<u64, (f32, f32, f64, f64)>,
    /// The last `track` call's time step (for the right tracks' velocities).
    pub(super) dt: Option<f64>,
    /// `track_right` ran on the last frame (else the previous right positions are stale).
    pub(super) fresh: bool,
    pub(super) pts: Vec<(f32, f32)>,
    pub(super) fwd: Vec<Flow>,
    pub(super) rev: Vec<Flow>,
}

impl StereoSide {
    /// Room for `m` tracks in every buffer.
    pub(super) fn reserve(&mut self, m: usize) {
        self.tracks.reserve(m);
        self.prev.reserve(m);
        self.cur.reserve(m);
        self.pts.reserve(m);
        self.fwd.reserve(m);
        self.rev.reserve(m);
    }

    /// A new first-camera frame: last frame's right tracks are gone, and the previous right
    /// positions too unless the last frame had a right step.
    pub(super) fn start_frame(&mut self) {
        if !std::mem::take(&mut self.fresh) {
            self.prev.clear();
        }
        self.tracks.clear();
    }

    /// Every track dropped.
    pub(super) fn clear(&mut self) {
        self.tracks.clear();
        self.prev.clear();
    }
}

impl Tracker {
    /// Stereo: the second camera's tracks of the last [`Tracker::track_stereo`] frame (the
    /// first camera's IDs and ages, the second camera's positions).
    pub fn right_tracks(&self) -> &[Track] {
        &self.stereo.tracks
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
        self.track_right_input(RightInput::Gray(right), camera)
    }

    /// [`Tracker::track_right`] on the second camera's frame as [`RightInput`]: on the GPU
    /// too, where the GPU tracker builds the right pyramid from a device copy (no upload).
    /// A frame on the GPU for a tracker on the CPU (after a GPU failure) is an error for
    /// that frame: no right tracks.
    pub fn track_right_input(
        &mut self,
        right: RightInput,
        camera: Option<&CameraModel>,
    ) -> std::result::Result<(), String> {
        self.stereo.tracks.clear();
        let dt = self.stereo.dt.take();
        let camera = camera.map(|c| c.clone().lifted(self.params.lifting));
        let camera = camera.as_ref();
        let f32_lift = camera.is_some_and(|c| c.lifts_as_camodocal());
        let (rw, rh) = right.size();
        if (rw, rh) != self.size {
            self.stereo.prev.clear();
            return Err(format!(
                "the second camera's frame is {rw}x{rh}, the first's {}x{}: no stereo tracks",
                self.size.0, self.size.1
            ));
        }
        #[cfg(feature = "cuda")]
        if let (RightInput::Device(_), BackendKind::Cpu) = (right, self.engine.kind()) {
            self.stereo.prev.clear();
            return Err(
                "the second camera's frame is on the GPU, the tracker on the CPU: no stereo \
                 tracks for this frame"
                    .into(),
            );
        }
        let p = self.params;
        let lk = LkParams {
            window: p.window,
            max_level: p.levels,
            ..Default::default()
        };
        let back = p.flow_back.then_some(&lk);
        let mut pts = std::mem::take(&mut self.stereo.pts);
        pts.clear();
        pts.extend(self.tracks.iter().map(|t| (t.x, t.y)));
        let (mut fwd, mut rev) = (
            std::mem::take(&mut self.stereo.fwd),
            std::mem::take(&mut self.stereo.rev),
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
        let (w, h) = (rw as i32, rh as i32);
        let mut cur = std::mem::take(&mut self.stereo.cur);
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
            let (x_n, y_n) = super::lift::normalised(camera, (f.x, f.y));
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
            if let (Some(dt), Some(&(px, py, pxn, pyn))) = (dt, self.stereo.prev.get(&t.id)) {
                (t.vx, t.vy) = super::lift::velocity((t.x_n, t.y_n), (pxn, pyn), dt, f32_lift);
                (t.px_vx, t.px_vy) = ((t.x - px) as f64 / dt, (t.y - py) as f64 / dt);
            }
            if camera.is_none() {
                (t.vx, t.vy) = (f64::NAN, f64::NAN);
            }
            cur.insert(t.id, (t.x, t.y, t.x_n, t.y_n));
            self.stereo.tracks.push(t);
        }
        self.stereo.cur = std::mem::replace(&mut self.stereo.prev, cur);
        (self.stereo.pts, self.stereo.fwd, self.stereo.rev) = (pts, fwd, rev);
        self.stereo.fresh = true;
        self.release_inputs();
        Ok(())
    }
}
