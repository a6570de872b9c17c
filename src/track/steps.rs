//! The tracker's per-frame steps after the pyramid ([`super::Tracker`]'s `track_frame`
//! runs them in order): the flow (1-2), the F test (3), the mask and the new corners (4-5),
//! the lifting and velocities (6).
//!
//! May import: as `track`.

use nalgebra::Point2;

use super::fundamental::RansacParams;
use super::input::HostFrame;
use super::lift::{normalised, velocity};
use super::mask::round_px;
use super::{TopUp, Track, Tracker};
use crate::config::MaskOrder;
use crate::cpu::gftt::{good_features_to_track, keep_spaced, GfttParams};
use crate::cpu::lk::LkParams;
use crate::std_sort;

#[cfg(feature = "cuda")]
use super::engine::FlowEngine;

impl Tracker {
    /// LK's parameters for the flow forward and, with `flow_back`, back.
    pub(super) fn lk_params(&self) -> (LkParams, Option<LkParams>) {
        let p = self.params;
        let lk = LkParams {
            window: p.window,
            max_level: p.levels,
            ..Default::default()
        };
        let back = LkParams { max_level: 1, ..lk };
        (lk, p.flow_back.then_some(back))
    }

    /// Steps 1-2 on the carried tracks: LK forward (and back with `flow_back`; launched by
    /// `begin_frame`, collected here), the border; the survivors, one frame older, into
    /// `kept` with their previous positions.
    pub(super) fn flow(&mut self, size: (usize, usize), kept: &mut Vec<(Track, (f32, f32))>) {
        let p = self.params;
        let (lk, back) = self.lk_params();
        let mut ok = std::mem::take(&mut self.work.ok);
        ok.clear();
        let n = self.prev_pts.len();
        let out = (&mut self.work.fwd, &mut self.work.back);
        match self
            .engine
            .collect_flow(&self.prev_pts, &lk, back.as_ref(), out)
        {
            Ok(()) => ok.extend(self.work.fwd.iter().map(|f| f.status)),
            Err(e) => {
                self.fall_back(e);
                ok.resize(n, false);
            }
        }
        if p.flow_back && ok.iter().any(|&k| k) {
            let (mut sum, mut n) = (0.0, 0);
            for (i, k) in ok.iter_mut().enumerate() {
                let (a, b) = (self.prev_pts[i], (self.work.back[i].x, self.work.back[i].y));
                // VINS's distance(): f32 differences, the root in f64.
                let (dx, dy) = (a.0 - b.0, a.1 - b.1);
                let d = ((dx * dx + dy * dy) as f64).sqrt();
                if *k && self.work.back[i].status {
                    sum += d;
                    n += 1;
                }
                let pass = *k && self.work.back[i].status && d <= 0.5;
                if *k && !pass {
                    self.stats.flow_back_rejected += 1;
                }
                *k = pass;
            }
            self.stats.flow_back_error = if n > 0 { sum / n as f64 } else { 0.0 };
        }
        self.stats.tried = self.prev_pts.len();
        let (w, h) = (size.0 as i32, size.1 as i32);
        for (i, f) in self.work.fwd.iter().enumerate() {
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
        self.work.ok = ok;
    }

    /// Step 3: VINS-Mono's `rejectWithF` over `kept` (OpenCV's RANSAC, [`fundamental`]).
    pub(super) fn f_test(&mut self, kept: &mut Vec<(Track, (f32, f32))>) {
        // The kept point buffers taken out for the calls on `self`, put back below.
        let (mut a, mut b) = (
            std::mem::take(&mut self.work.ransac_a),
            std::mem::take(&mut self.work.ransac_b),
        );
        a.clear();
        b.clear();
        for (t, prev) in kept.iter() {
            a.push(self.ransac_point(*prev));
            b.push(self.ransac_point((t.x, t.y)));
        }
        let rp = RansacParams {
            threshold: self.params.ransac_threshold,
            ..Default::default()
        };
        let m = self.work.ransac.mask(&a, &b, &rp);
        let before = kept.len();
        let mut it = m.iter();
        kept.retain(|_| *it.next().unwrap_or(&true));
        self.stats.ransac_rejected = before - kept.len();
        (self.work.ransac_a, self.work.ransac_b) = (a, b);
    }

    /// Steps 4 and 5: the mask over `kept` and the new corners (into `self.work.corners`).
    pub(super) fn mask_and_top_up(
        &mut self,
        frame: &mut HostFrame,
        kept: &mut Vec<(Track, (f32, f32))>,
    ) {
        let p = self.params;
        let size = frame.input.size();
        match p.mask_order {
            MaskOrder::Stable => {
                kept.sort_unstable_by_key(|(t, _)| (std::cmp::Reverse(t.age), t.id))
            }
            // VINS's std::sort by count, `a.first > b.first`, from the tracks' current order
            // (last frame's mask order, then its new corners, as VINS's vectors).
            MaskOrder::Vins => std_sort::sort_by(kept, |a, b| a.0.age > b.0.age),
        }
        let before = kept.len();
        self.work.discs.start(size, p.min_distance.round() as i32);
        let discs = &mut self.work.discs;
        kept.retain(|(t, _)| discs.claim(round_px(t.x), round_px(t.y)));
        self.stats.mask_dropped = before - kept.len();

        // 5. New corners.
        let want = p.max_features.saturating_sub(kept.len());
        self.last_wanted = want > 0;
        self.work.corners.clear();
        (self.stats.corner_parts_ms, self.stats.corner_candidates) = ([0.0; 4], 0);
        let t2 = std::time::Instant::now();
        if want > 0 {
            self.detect(frame, want);
        }
        self.stats.detect_ms = t2.elapsed().as_secs_f64() * 1e3;
        self.stats.added = self.work.corners.len();
    }

    /// Step 6: the kept tracks and the new corners lifted to the normalised plane, with
    /// their velocities; they become the frame's tracks.
    pub(super) fn lift(&mut self, kept: &[(Track, (f32, f32))], stamp: f64) {
        // VINS-Mono lifts a new point before it has an ID, so on its second frame the
        // previous position is not found by ID and its velocity is 0.
        let mono = self.params.frontend == crate::config::Frontend::VinsMono;
        let dt = self.prev_time.map(|t| stamp - t).filter(|&d| d > 0.0);
        self.stereo.dt = dt;
        let cam = self.camera.clone();
        let f32_lift = cam.as_ref().is_some_and(|c| c.lifts_as_camodocal());
        let norm = |x: f32, y: f32| normalised(cam.as_ref(), (x, y));
        let mut out = std::mem::take(&mut self.work.spare_tracks);
        out.clear();
        for &(mut t, prev) in kept {
            let prev_n = (t.x_n, t.y_n);
            (t.x_n, t.y_n) = norm(t.x, t.y);
            match dt {
                Some(dt) => {
                    (t.vx, t.vy) = if mono && t.age == 2 {
                        (0.0, 0.0)
                    } else {
                        velocity((t.x_n, t.y_n), prev_n, dt, f32_lift)
                    };
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
        for &(x, y) in &self.work.corners {
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
        self.prev_pts.clear();
        self.prev_pts.extend(out.iter().map(|t| (t.x, t.y)));
        self.work.spare_tracks = std::mem::replace(&mut self.tracks, out);
        self.prev_time = Some(stamp);
    }

    /// VINS-Mono's `rejectWithF` coordinates: undistorted and put on a virtual 460 px camera
    /// centred in the image; pixels as they are without a camera model. With camodocal's
    /// lifting, as VINS-Mono computes them: `460 * x / z + width / 2` from the ray
    /// `liftProjective` returns, in f64, then f32.
    fn ransac_point(&self, pt: (f32, f32)) -> (f32, f32) {
        const FOCAL: f64 = 460.0;
        let (w, h) = (self.size.0 as f64, self.size.1 as f64);
        let p = Point2::new(pt.0 as f64, pt.1 as f64);
        if let Some(c) = self.camera.as_ref().filter(|c| c.lifts_as_camodocal()) {
            let (x, y, z) = crate::camera::camodocal::lift_ray(c, p);
            return (
                (FOCAL * x / z + w / 2.0) as f32,
                (FOCAL * y / z + h / 2.0) as f32,
            );
        }
        match self.camera.as_ref().and_then(|c| c.undistort(p)) {
            Some(q) => (
                (FOCAL * q.x + w / 2.0) as f32,
                (FOCAL * q.y + h / 2.0) as f32,
            ),
            None => pt,
        }
    }

    /// New corners where the mask allows, into `self.work.corners`.
    fn detect(&mut self, frame: &mut HostFrame, want: usize) {
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
                    match gf.corners(
                        frame.input.size(),
                        &g,
                        &self.work.discs,
                        &mut self.work.corners,
                    ) {
                        Ok(parts) => {
                            self.stats.corner_parts_ms = parts.ms;
                            self.stats.corner_candidates = parts.candidates;
                            return;
                        }
                        Err(e) => self.fall_back(e),
                    }
                }
                self.work.discs.paint(&mut self.work.mask);
                good_features_to_track(
                    frame.pixels(),
                    &g,
                    Some(&self.work.mask),
                    &mut self.work.gftt,
                    &mut self.work.corners,
                );
            }
            TopUp::Fast(threshold) => {
                let img = frame.pixels();
                let mut c = crate::cpu::fast::detect(img, threshold, true);
                let (w, h) = (img.width, img.height);
                let discs = &self.work.discs;
                c.retain(|c| {
                    let (x, y) = (c.x as usize, c.y as usize);
                    x >= 3
                        && y >= 3
                        && x + 4 <= w
                        && y + 4 <= h
                        && !discs.covers(x as i32, y as i32)
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
                    &mut self.work.grid,
                    &mut self.work.corners,
                );
            }
        }
    }
}
