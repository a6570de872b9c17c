//! Per-frame measures of the replay ([`FrameStats`], [`Heatmap`]) and their aggregation
//! into the [`Report`] (distributions, tracking summaries).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Report, ReportInput};
use crate::eval::{MatchTrackStats, TrackStats, TRACK_MIN_ZNCC, TRACK_RADIUS};
use crate::features::Features;
use crate::report::Dist;

/// Side of the square cells of the coverage measure, level-0 pixels.
pub const COVERAGE_CELL: usize = 32;

/// Keypoints counted per `cell`-pixel square of level 0 over all frames (all topics, in pixel
/// coordinates: frames of different sizes share the top-left corner).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Heatmap {
    /// Cell side, level-0 pixels.
    pub cell: usize,
    pub cols: usize,
    pub rows: usize,
    /// Frames added.
    pub frames: usize,
    /// `counts[row * cols + col]`: keypoints in that cell, summed over the frames.
    pub counts: Vec<u64>,
}

impl Heatmap {
    pub fn new(cell: usize) -> Heatmap {
        Heatmap {
            cell: cell.max(1),
            ..Default::default()
        }
    }

    /// Adds one frame of `width` x `height` pixels and its keypoints.
    pub fn add(
        &mut self,
        keypoints: &[crate::features::Keypoint],
        (width, height): (usize, usize),
    ) {
        let (cols, rows) = (
            self.cols.max(width.div_ceil(self.cell)),
            self.rows.max(height.div_ceil(self.cell)),
        );
        if (cols, rows) != (self.cols, self.rows) {
            let mut grown = vec![0; cols * rows];
            for r in 0..self.rows {
                grown[r * cols..r * cols + self.cols]
                    .copy_from_slice(&self.counts[r * self.cols..(r + 1) * self.cols]);
            }
            (self.cols, self.rows, self.counts) = (cols, rows, grown);
        }
        if self.counts.is_empty() {
            return;
        }
        for k in keypoints {
            let cx = ((k.x.max(0.0) as usize) / self.cell).min(self.cols - 1);
            let cy = ((k.y.max(0.0) as usize) / self.cell).min(self.rows - 1);
            self.counts[cy * self.cols + cx] += 1;
        }
        self.frames += 1;
    }

    /// Mean keypoints per frame in each cell.
    pub fn per_frame(&self) -> Vec<f64> {
        let n = self.frames.max(1) as f64;
        self.counts.iter().map(|&c| c as f64 / n).collect()
    }
}

/// The feature tracker's measures of one frame (`track.enabled`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FeatureTrackFrame {
    /// Tracks published for the frame.
    pub alive: usize,
    /// Tracks carried from the previous frame, and how many each check dropped.
    pub tried: usize,
    pub flow_back_rejected: usize,
    pub ransac_rejected: usize,
    pub mask_dropped: usize,
    pub added: usize,
    /// Mean forward-backward distance (px) of the points the check ran on.
    pub flow_back_error: f64,
    /// Lengths (frames) of the tracks that ended at this frame.
    pub ended: Vec<u32>,
    /// The tracker's wall time for the frame (`Tracker::track`, its `total_ms`).
    pub tracker_ms: f64,
}

/// Measures of one replayed frame.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FrameStats {
    pub topic: String,
    /// Bag receive time, ns.
    pub log_time: u64,
    /// Header stamp, ns.
    pub stamp: u64,
    pub width: usize,
    pub height: usize,
    pub keypoints: usize,
    /// Keypoints on each pyramid level.
    pub per_level: Vec<usize>,
    /// Share of `COVERAGE_CELL`-pixel cells holding at least one keypoint.
    pub coverage: f64,
    /// Share of edge pixels in the Canny map (None when Canny is off).
    pub edge_density: Option<f64>,
    /// `Pipeline::process` wall time, ms.
    pub frame_ms: f64,
    /// Per-stage times reported by the backend, ms.
    pub stages: Vec<(String, f64)>,
    /// Tracking from the previous frame of the same topic.
    pub track: Option<TrackStats>,
    /// Descriptor matching against the previous frame of the same topic (when the config
    /// computes descriptors).
    #[serde(default)]
    pub match_track: Option<MatchTrackStats>,
    /// The feature tracker's measures (`track.enabled`).
    #[serde(default)]
    pub feature_tracks: Option<FeatureTrackFrame>,
}

impl FrameStats {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        topic: &str,
        log_time: u64,
        stamp: u64,
        f: &Features,
        (width, height): (usize, usize),
        cell: usize,
        frame_ms: f64,
        track: Option<TrackStats>,
    ) -> FrameStats {
        let levels = f.level_sizes.len().max(
            f.keypoints
                .iter()
                .map(|k| k.octave as usize + 1)
                .max()
                .unwrap_or(0),
        );
        let mut per_level = vec![0; levels];
        for k in &f.keypoints {
            per_level[k.octave.max(0) as usize] += 1;
        }
        let (cols, rows) = (width.div_ceil(cell), height.div_ceil(cell));
        let mut hit = vec![false; cols * rows];
        for k in &f.keypoints {
            let cx = ((k.x.max(0.0) as usize) / cell).min(cols - 1);
            let cy = ((k.y.max(0.0) as usize) / cell).min(rows - 1);
            hit[cy * cols + cx] = true;
        }
        let coverage = hit.iter().filter(|&&h| h).count() as f64 / hit.len() as f64;
        let edge_density = f.edges.as_ref().map(|e| {
            e.data.iter().filter(|&&v| v != 0).count() as f64 / e.data.len().max(1) as f64
        });
        FrameStats {
            topic: topic.to_string(),
            log_time,
            stamp,
            width,
            height,
            keypoints: f.keypoints.len(),
            per_level,
            coverage,
            edge_density,
            frame_ms,
            stages: f
                .timings
                .iter()
                .map(|t| (t.stage.to_string(), t.ms))
                .collect(),
            track,
            match_track: None,
            feature_tracks: None,
        }
    }

    /// The same stats with the feature tracker's measures of this frame.
    pub fn with_feature_tracks(mut self, t: Option<FeatureTrackFrame>) -> FrameStats {
        self.feature_tracks = t;
        self
    }

    /// The same stats with the descriptor tracking of this frame pair.
    pub fn with_match_track(mut self, m: Option<MatchTrackStats>) -> FrameStats {
        self.match_track = m;
        self
    }
}

/// The feature tracker over the replay (`track.enabled`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FeatureTracks {
    pub frames: usize,
    pub alive_per_frame: Dist,
    /// Lengths (frames) of the tracks that ended during the replay.
    pub ended_length: Dist,
    pub flow_back_error_px: Dist,
    /// Of the tracks carried into a frame: the share the flow (status, border, flow back)
    /// kept, and of those the share the fundamental-matrix test kept.
    pub flow_kept_share: f64,
    pub ransac_inlier_share: f64,
    pub mask_dropped_share: f64,
    /// The tracker's time per frame, ms (front-end cost beside the estimator's tables).
    pub tracker_ms: Dist,
}

impl FeatureTracks {
    pub fn of(fr: &[FrameStats]) -> Option<FeatureTracks> {
        let t: Vec<&FeatureTrackFrame> = fr
            .iter()
            .filter_map(|f| f.feature_tracks.as_ref())
            .collect();
        if t.is_empty() {
            return None;
        }
        // Carried into a frame -> kept by the flow (status, flow back, border) -> kept by the
        // F test -> kept by the mask; the rest of `alive` is new.
        let after_flow = |x: &FeatureTrackFrame| {
            (x.alive + x.mask_dropped + x.ransac_rejected).saturating_sub(x.added)
        };
        let tried: usize = t.iter().map(|x| x.tried).sum();
        let flowed: usize = t.iter().map(|x| after_flow(x)).sum();
        let ransac: usize = t.iter().map(|x| x.ransac_rejected).sum();
        let mask: usize = t.iter().map(|x| x.mask_dropped).sum();
        let ended: Vec<f64> = t
            .iter()
            .flat_map(|x| x.ended.iter().map(|&l| l as f64))
            .collect();
        let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        Some(FeatureTracks {
            frames: t.len(),
            alive_per_frame: Dist::of(t.iter().map(|x| x.alive as f64)),
            ended_length: Dist::of(ended),
            flow_back_error_px: Dist::of(
                t.iter().filter(|x| x.tried > 0).map(|x| x.flow_back_error),
            ),
            flow_kept_share: share(flowed, tried),
            ransac_inlier_share: share(flowed.saturating_sub(ransac), flowed),
            mask_dropped_share: share(mask, flowed.saturating_sub(ransac)),
            tracker_ms: Dist::of(t.iter().map(|x| x.tracker_ms)),
        })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Tracking {
    pub method: String,
    pub frame_pairs: usize,
    pub tried: usize,
    pub refound: usize,
    pub refound_position: usize,
    /// refound / tried over all pairs.
    pub ratio: f64,
    pub ratio_position: f64,
    /// Per-pair ratio distribution.
    pub per_pair: Dist,
}

/// Frame-to-frame descriptor matching (`src/eval/tracking.rs`, `track_descriptors`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DescriptorTracking {
    pub method: String,
    /// Matcher backend: `cpu` or `cuda`.
    pub matcher: String,
    /// The matcher's tests (`MatchParams`).
    pub ratio: Option<f32>,
    pub cross_check: bool,
    pub max_distance: Option<u32>,
    pub frame_pairs: usize,
    /// Sums over all pairs.
    pub query_keypoints: usize,
    pub matches: usize,
    pub inliers: usize,
    /// inliers / matches over all pairs.
    pub inlier_share: f64,
    /// Matches per frame pair (mean, p50 = median, ...).
    pub matches_per_pair: Dist,
    /// Inlier share per frame pair, over the pairs with at least one match.
    pub inlier_share_per_pair: Dist,
}

impl Tracking {
    /// Keypoints re-found frame to frame (by patch), over the frames that were checked.
    fn of(fr: &[FrameStats]) -> Option<Tracking> {
        let tracks: Vec<TrackStats> = fr.iter().filter_map(|f| f.track).collect();
        (!tracks.is_empty()).then(|| {
            let tried: usize = tracks.iter().map(|t| t.tried).sum();
            let refound: usize = tracks.iter().map(|t| t.refound).sum();
            let refound_position: usize = tracks.iter().map(|t| t.refound_position).sum();
            let r = |a: usize| {
                if tried == 0 {
                    0.0
                } else {
                    a as f64 / tried as f64
                }
            };
            Tracking {
                method: format!(
                    "keypoint re-found in the next frame within {TRACK_RADIUS} px, octave +-1, \
                 15x15-sample patch ZNCC >= {TRACK_MIN_ZNCC}"
                ),
                frame_pairs: tracks.len(),
                tried,
                refound,
                refound_position,
                ratio: r(refound),
                ratio_position: r(refound_position),
                per_pair: Dist::of(
                    tracks
                        .iter()
                        .filter(|t| t.tried > 0)
                        .map(|t| t.refound as f64 / t.tried as f64),
                ),
            }
        })
    }
}

impl DescriptorTracking {
    /// Descriptor matches frame to frame, when a matcher ran.
    fn of(fr: &[FrameStats], inp: &ReportInput) -> Option<DescriptorTracking> {
        let matched: Vec<MatchTrackStats> = fr.iter().filter_map(|f| f.match_track).collect();
        inp.matcher.filter(|_| !matched.is_empty()).map(|m| {
            let matches: usize = matched.iter().map(|t| t.matches).sum();
            let inliers: usize = matched.iter().map(|t| t.inliers).sum();
            DescriptorTracking {
                method: format!(
                    "descriptors of frame t matched to frame t+1; inlier = both keypoints \
                     within {TRACK_RADIUS} px in x and y, octave +-1; inlier share = \
                     inliers / matches"
                ),
                matcher: m.backend.to_string(),
                ratio: m.params.ratio,
                cross_check: m.params.cross_check,
                max_distance: m.params.max_distance,
                frame_pairs: matched.len(),
                query_keypoints: matched.iter().map(|t| t.query).sum(),
                matches,
                inliers,
                inlier_share: if matches == 0 {
                    0.0
                } else {
                    inliers as f64 / matches as f64
                },
                matches_per_pair: Dist::of(matched.iter().map(|t| t.matches as f64)),
                inlier_share_per_pair: Dist::of(
                    matched.iter().filter_map(MatchTrackStats::inlier_share),
                ),
            }
        })
    }
}

impl Report {
    pub fn build(inp: &ReportInput) -> Report {
        let fr = &inp.frames;
        let n = fr.len();
        let mut stage_order: Vec<String> = Vec::new();
        let mut by_stage: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for f in fr {
            for (s, ms) in &f.stages {
                if !stage_order.contains(s) {
                    stage_order.push(s.clone());
                }
                by_stage.entry(s.clone()).or_default().push(*ms);
            }
        }
        let mut latency_ms: BTreeMap<String, Dist> = by_stage
            .into_iter()
            .map(|(k, v)| (k, Dist::of(v)))
            .collect();
        latency_ms.insert("frame".into(), Dist::of(fr.iter().map(|f| f.frame_ms)));
        stage_order.push("frame".into());
        let levels = fr.iter().map(|f| f.per_level.len()).max().unwrap_or(0);
        let keypoints_per_level_mean = (0..levels)
            .map(|l| {
                fr.iter()
                    .map(|f| f.per_level.get(l).copied().unwrap_or(0) as f64)
                    .sum::<f64>()
                    / n.max(1) as f64
            })
            .collect();
        let edge_density = fr
            .iter()
            .any(|f| f.edge_density.is_some())
            .then(|| Dist::of(fr.iter().filter_map(|f| f.edge_density)));
        let tracking = Tracking::of(fr);
        let descriptor_tracking = DescriptorTracking::of(fr, inp);
        Report {
            bag: inp.bag.display().to_string(),
            storage: inp.storage.to_string(),
            backend: inp.backend.to_string(),
            frames: n,
            per_topic: inp.per_topic.clone(),
            skipped: inp.skipped,
            skip_reasons: inp.skip_reasons.clone(),
            wall_s: inp.wall_s,
            fps_pipeline: if inp.processing_s > 0.0 {
                n as f64 / inp.processing_s
            } else {
                0.0
            },
            fps_overall: if inp.wall_s > 0.0 {
                n as f64 / inp.wall_s
            } else {
                0.0
            },
            latency_ms,
            stage_order,
            keypoints_per_frame: Dist::of(fr.iter().map(|f| f.keypoints as f64)),
            keypoints_per_level_mean,
            coverage_cell_px: COVERAGE_CELL,
            coverage: Dist::of(fr.iter().map(|f| f.coverage)),
            keypoint_heatmap: inp.heatmap.clone(),
            edge_density,
            tracking,
            descriptor_tracking,
            feature_tracks: FeatureTracks::of(fr),
            homography: inp.homography.clone(),
            opencv: inp.opencv.clone(),
            config: inp.config.clone(),
            per_frame: fr.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_counts_cells() {
        use crate::features::Keypoint;
        let kp = |x, y| Keypoint {
            x,
            y,
            response: 1.0,
            size: 31.0,
            angle: 0.0,
            octave: 0,
        };
        let f = Features {
            keypoints: vec![kp(1.0, 1.0), kp(2.0, 2.0), kp(63.9, 0.0)],
            level_sizes: vec![(64, 64)],
            ..Default::default()
        };
        // 64x64 image, 32 px cells: 4 cells, 2 hit.
        let s = FrameStats::new("/t", 0, 0, &f, (64, 64), 32, 1.0, None);
        assert_eq!(s.coverage, 0.5);
        assert_eq!(s.per_level, vec![3]);
        assert_eq!(s.edge_density, None);
    }

    #[test]
    fn heatmap_grows_and_counts() {
        use crate::features::Keypoint;
        let kp = |x, y| Keypoint {
            x,
            y,
            response: 1.0,
            size: 31.0,
            angle: 0.0,
            octave: 0,
        };
        let mut h = Heatmap::new(32);
        h.add(&[kp(1.0, 1.0), kp(40.0, 5.0)], (64, 32));
        assert_eq!((h.cols, h.rows, h.frames), (2, 1, 1));
        assert_eq!(h.counts, vec![1, 1]);
        // A taller and wider frame: the grid grows, earlier counts stay in their cells.
        h.add(&[kp(70.0, 40.0), kp(-3.0, 500.0)], (96, 64));
        assert_eq!((h.cols, h.rows, h.frames), (3, 2, 2));
        assert_eq!(h.counts, vec![1, 1, 0, 1, 0, 1]);
        assert_eq!(h.per_frame(), vec![0.5, 0.5, 0.0, 0.5, 0.0, 0.5]);
    }
}
