//! The replay's evaluation report: `report.json` (everything, machine-readable), `report.md`
//! (tables + the PNG plots), the plots themselves, and `report.html` (the same content in
//! one self-contained file, plots embedded).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::eval::{HomographyResult, MatchTrackStats, TrackStats, TRACK_MIN_ZNCC, TRACK_RADIUS};
use super::plot::{self, BarGroup, BoxStats, Grid, Labels, Scale, Series};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::matching::MatchParams;
use crate::pipeline::Features;

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
        keypoints: &[crate::pipeline::Keypoint],
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
        }
    }

    /// The same stats with the descriptor tracking of this frame pair.
    pub fn with_match_track(mut self, m: Option<MatchTrackStats>) -> FrameStats {
        self.match_track = m;
        self
    }
}

/// Everything the report is made from.
#[derive(Clone, Debug)]
pub struct ReportInput {
    pub bag: PathBuf,
    pub storage: &'static str,
    pub backend: &'static str,
    pub config: Config,
    pub frames: Vec<FrameStats>,
    pub per_topic: BTreeMap<String, usize>,
    pub skipped: usize,
    pub skip_reasons: BTreeMap<String, usize>,
    pub wall_s: f64,
    pub processing_s: f64,
    pub homography: Vec<HomographyResult>,
    pub opencv: Option<OpencvEval>,
    /// The descriptor matcher of the tracking measure, when the config computes descriptors.
    pub matcher: Option<MatcherInfo>,
    /// Where the keypoints fell, over all frames.
    pub heatmap: Heatmap,
}

/// Which matcher the replay's descriptor tracking used.
#[derive(Clone, Copy, Debug)]
pub struct MatcherInfo {
    /// `cpu` or `cuda`.
    pub backend: &'static str,
    pub params: MatchParams,
}

/// What `scripts/eval_homography.py` writes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OpencvEval {
    pub opencv_version: String,
    /// OpenCV ORB keypoints + ORB descriptors.
    pub pairs: Vec<HomographyResult>,
    /// Our keypoints (from `--gpu-features`) with OpenCV's `ORB.compute` descriptors, scored
    /// by the script.
    pub ours_with_orb_descriptor: Vec<HomographyResult>,
    /// Our keypoints with our own descriptors (the `descriptor` column of `detect`'s CSV),
    /// scored by the script: must equal the Rust side's numbers (a cross-check of the two
    /// implementations of the protocol).
    pub ours_with_our_descriptor: Vec<HomographyResult>,
}

pub fn load_opencv_eval(path: &Path) -> Result<OpencvEval> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::ImageFile {
        path: path.to_path_buf(),
        msg: format!("not an eval_homography.py result: {e}"),
    })
}

/// Distribution summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Dist {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Dist {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_by(f64::total_cmp);
        Dist {
            n: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v[0],
            p50: pct(&v, 50.0),
            p90: pct(&v, 90.0),
            p99: pct(&v, 99.0),
            max: v[v.len() - 1],
        }
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

/// Frame-to-frame descriptor matching (`src/bag/eval.rs`, `track_descriptors`).
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

/// `report.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub bag: String,
    pub storage: String,
    pub backend: String,
    pub frames: usize,
    pub per_topic: BTreeMap<String, usize>,
    pub skipped: usize,
    pub skip_reasons: BTreeMap<String, usize>,
    pub wall_s: f64,
    /// Frames / total `Pipeline::process` time.
    pub fps_pipeline: f64,
    /// Frames / wall time of the whole replay (reading, decoding, writing included).
    pub fps_overall: f64,
    /// Per stage (and `frame` = the whole `process` call), ms.
    pub latency_ms: BTreeMap<String, Dist>,
    pub stage_order: Vec<String>,
    pub keypoints_per_frame: Dist,
    pub keypoints_per_level_mean: Vec<f64>,
    pub coverage_cell_px: usize,
    pub coverage: Dist,
    /// Keypoints per `coverage_cell_px` cell over all frames (the heat map plot).
    #[serde(default)]
    pub keypoint_heatmap: Heatmap,
    pub edge_density: Option<Dist>,
    pub tracking: Option<Tracking>,
    pub descriptor_tracking: Option<DescriptorTracking>,
    pub homography: Vec<HomographyResult>,
    pub opencv: Option<OpencvEval>,
    pub config: Config,
    pub per_frame: Vec<FrameStats>,
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
        let tracks: Vec<TrackStats> = fr.iter().filter_map(|f| f.track).collect();
        let tracking = (!tracks.is_empty()).then(|| {
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
        });
        let matched: Vec<MatchTrackStats> = fr.iter().filter_map(|f| f.match_track).collect();
        let descriptor_tracking = inp.matcher.filter(|_| !matched.is_empty()).map(|m| {
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
        });
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
            homography: inp.homography.clone(),
            opencv: inp.opencv.clone(),
            config: inp.config.clone(),
            per_frame: fr.clone(),
        }
    }

    /// The repeatability / matching-score section: ours beside OpenCV ORB's, then every row.
    fn homography_markdown(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "## Repeatability and matching score (homography pairs)\n\nMikolajczyk \
             protocol: overlap error < 40% after normalising the image-1 region to a 30 px \
             radius, one-to-one correspondences, scores over the common part; matching \
             score = correct nearest-neighbour descriptor matches / min(n1, n2). Ours: our \
             keypoints with our ORB descriptors, matched by `gpu_features::matching`. See \
             `docs/evaluation.md`.\n"
        );
        let opencv = self.opencv.as_ref();
        let cv_name = opencv.map_or("OpenCV ORB".to_string(), |o| {
            format!("OpenCV {} ORB", o.opencv_version)
        });
        let find = |list: Option<&Vec<HomographyResult>>, name: &str| {
            list.and_then(|l| l.iter().find(|x| x.name == name))
                .cloned()
        };
        let num = |r: &Option<HomographyResult>, f: fn(&HomographyResult) -> f64| {
            r.as_ref()
                .map_or("-".to_string(), |r| format!("{:.3}", f(r)))
        };
        let _ = writeln!(
            s,
            "| pair | repeatability, ours | repeatability, {cv_name} | matching score, ours | \
             matching score, {cv_name} | matching score, our keypoints + OpenCV's descriptor \
             |\n|---|---|---|---|---|---|"
        );
        for r in &self.homography {
            let cv = find(opencv.map(|o| &o.pairs), &r.name);
            let mixed = find(opencv.map(|o| &o.ours_with_orb_descriptor), &r.name);
            let _ = writeln!(
                s,
                "| {} | {:.3} | {} | {:.3} | {} | {} |",
                r.name,
                r.repeatability,
                num(&cv, |x| x.repeatability),
                r.matching_score,
                num(&cv, |x| x.matching_score),
                num(&mixed, |x| x.matching_score),
            );
        }
        if opencv.is_none() {
            let _ = writeln!(
                s,
                "\nOpenCV ORB columns: run `scripts/eval_homography.py` and pass its JSON with \
                 `--opencv-eval`."
            );
        }
        let _ = writeln!(
            s,
            "\nAll rows:\n\n| pair | detector + descriptor | n1 | n2 | common | \
             correspondences | repeatability | correct matches | matching score |\n\
             |---|---|---|---|---|---|---|---|---|"
        );
        let row = |s: &mut String, who: &str, r: &HomographyResult| {
            let _ = writeln!(
                s,
                "| {} | {who} | {} | {} | {}/{} | {} | {:.3} | {} | {:.3} |",
                r.name,
                r.n1,
                r.n2,
                r.n1_common,
                r.n2_common,
                r.correspondences,
                r.repeatability,
                r.correct_matches,
                r.matching_score
            );
        };
        for r in &self.homography {
            row(s, "gpu_features + our ORB descriptor (ours)", r);
            if let Some(o) = opencv {
                for x in o
                    .ours_with_our_descriptor
                    .iter()
                    .filter(|x| x.name == r.name)
                {
                    row(
                        s,
                        "gpu_features + our ORB descriptor, scored by the script",
                        x,
                    );
                }
                for x in o
                    .ours_with_orb_descriptor
                    .iter()
                    .filter(|x| x.name == r.name)
                {
                    row(s, "gpu_features + OpenCV ORB descriptor", x);
                }
                for x in o.pairs.iter().filter(|x| x.name == r.name) {
                    row(s, &cv_name, x);
                }
            }
        }
        s.push('\n');
    }

    pub fn markdown(&self, plots: &[(String, String)]) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# gpu_features replay report\n");
        let _ = writeln!(
            s,
            "- bag: `{}` ({})\n- backend: {}\n- frames: {} ({} skipped)\n- wall time: {:.2} s",
            self.bag, self.storage, self.backend, self.frames, self.skipped, self.wall_s
        );
        for (t, n) in &self.per_topic {
            let _ = writeln!(s, "- topic `{t}`: {n} frames");
        }
        let _ = writeln!(
            s,
            "- throughput: {:.1} frames/s in the pipeline, {:.1} frames/s overall \
             (bag reading, decoding and writing included)\n",
            self.fps_pipeline, self.fps_overall
        );
        if !self.skip_reasons.is_empty() {
            let _ = writeln!(s, "Skipped frames:\n");
            for (r, n) in &self.skip_reasons {
                let _ = writeln!(s, "- {n} x {r}");
            }
            s.push('\n');
        }
        let _ = writeln!(s, "## Latency per stage (ms)\n");
        let _ = writeln!(
            s,
            "| stage | mean | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|"
        );
        for st in &self.stage_order {
            if let Some(d) = self.latency_ms.get(st) {
                let _ = writeln!(
                    s,
                    "| {st} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    d.mean, d.p50, d.p90, d.p99, d.max
                );
            }
        }
        let _ = writeln!(
            s,
            "\n`frame` is the wall time of one `Pipeline::process` call. Percentiles are \
             nearest-rank.\n"
        );
        let k = &self.keypoints_per_frame;
        let _ = writeln!(s, "## Keypoints\n");
        let _ = writeln!(
            s,
            "Per frame: mean {:.1}, min {:.0}, p50 {:.0}, max {:.0}.\n",
            k.mean, k.min, k.p50, k.max
        );
        let _ = writeln!(s, "| level | mean keypoints |\n|---|---|");
        for (l, m) in self.keypoints_per_level_mean.iter().enumerate() {
            let _ = writeln!(s, "| {l} | {m:.1} |");
        }
        let c = &self.coverage;
        let _ = writeln!(
            s,
            "\nSpatial coverage (share of {px}x{px}-pixel cells of level 0 holding at least one \
             keypoint): mean {:.3}, min {:.3}, p50 {:.3}.\n",
            c.mean,
            c.min,
            c.p50,
            px = self.coverage_cell_px
        );
        if let Some(e) = &self.edge_density {
            let _ = writeln!(
                s,
                "## Edges\n\nEdge density (share of Canny edge pixels): mean {:.4}, min {:.4}, \
                 p50 {:.4}, max {:.4}.\n",
                e.mean, e.min, e.p50, e.max
            );
        }
        if self.tracking.is_some() || self.descriptor_tracking.is_some() {
            let _ = writeln!(s, "## Frame-to-frame tracking\n");
        }
        if let Some(t) = &self.tracking {
            let _ = writeln!(
                s,
                "Over {} consecutive frame pairs: {} of {} keypoints re-found ({:.3}); by \
                 position and octave alone {:.3}. Per pair: p50 {:.3}, min {:.3}.\n",
                t.frame_pairs,
                t.refound,
                t.tried,
                t.ratio,
                t.ratio_position,
                t.per_pair.p50,
                t.per_pair.min
            );
            let _ = writeln!(
                s,
                "Method: a keypoint of frame t is re-found when frame t+1 (same topic) has a \
                 keypoint within {TRACK_RADIUS} px in x and y, on a pyramid level at most one \
                 away, whose 15x15-sample gray patch (sample spacing round(1.2^octave) px) has \
                 a zero-mean normalised cross-correlation of at least {TRACK_MIN_ZNCC} with the \
                 keypoint's patch in frame t. Keypoints whose patch leaves the image are not \
                 counted. See `src/bag/eval.rs`.\n"
            );
        }
        if let Some(d) = &self.descriptor_tracking {
            let m = &d.matches_per_pair;
            let i = &d.inlier_share_per_pair;
            let _ = writeln!(
                s,
                "Descriptor matching over {} consecutive frame pairs ({} matcher): {} matches \
                 of {} keypoints, {} of them inliers (inlier share {:.3}).\n",
                d.frame_pairs, d.matcher, d.matches, d.query_keypoints, d.inliers, d.inlier_share
            );
            let _ = writeln!(
                s,
                "| per frame pair | mean | median | min | max |\n|---|---|---|---|---|\n\
                 | descriptor matches | {:.1} | {:.0} | {:.0} | {:.0} |\n\
                 | inlier share | {:.3} | {:.3} | {:.3} | {:.3} |\n",
                m.mean, m.p50, m.min, m.max, i.mean, i.p50, i.min, i.max
            );
            let tests = [
                d.ratio.map(|r| format!("Lowe ratio {r}")),
                d.cross_check.then(|| "cross-check".to_string()),
                d.max_distance.map(|x| format!("distance <= {x}")),
            ];
            let tests: Vec<String> = tests.into_iter().flatten().collect();
            let _ = writeln!(
                s,
                "Method: the ORB descriptors of frame t are matched to those of frame t+1 \
                 (same topic) by brute-force Hamming distance ({}); a match is an inlier when \
                 its two keypoints lie within {TRACK_RADIUS} px of each other in x and y, on \
                 pyramid levels at most one apart; inlier share = inliers / matches (the median \
                 is over the pairs with at least one match). See `src/bag/eval.rs`.\n",
                if tests.is_empty() {
                    "every nearest neighbour".to_string()
                } else {
                    tests.join(", ")
                }
            );
        }
        if !self.homography.is_empty() {
            self.homography_markdown(&mut s);
        }
        if !plots.is_empty() {
            let _ = writeln!(s, "## Plots\n");
            for (file, caption) in plots {
                let _ = writeln!(s, "{caption}\n\n![{caption}]({file})\n");
            }
        }
        s
    }
}

/// Files the report wrote.
pub struct Written {
    pub markdown: PathBuf,
    pub json: PathBuf,
    /// report.html: report.md as one self-contained page, plots embedded.
    pub html: PathBuf,
    pub plots: Vec<PathBuf>,
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// A plot the report links: file name in the report's directory and its caption.
pub type PlotRef = (String, String);

/// Box of one stage: quartiles, whiskers at p1 and p99 (nearest rank).
fn box_stats(values: &[f64]) -> BoxStats {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    BoxStats {
        whisker_lo: pct(&v, 1.0),
        q1: pct(&v, 25.0),
        median: pct(&v, 50.0),
        q3: pct(&v, 75.0),
        whisker_hi: pct(&v, 99.0),
    }
}

/// Points (frame index, value) of the frames where `f` gives a value.
fn over_frames(fr: &[FrameStats], f: impl Fn(&FrameStats) -> Option<f64>) -> Vec<(f64, f64)> {
    fr.iter()
        .enumerate()
        .filter_map(|(i, s)| f(s).map(|v| (i as f64, v)))
        .collect()
}

fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.to_string(),
        points,
    }
}

fn plots(r: &Report, dir: &Path) -> Result<Vec<PlotRef>> {
    let mut out: Vec<PlotRef> = Vec::new();
    let fr = &r.per_frame;
    if fr.is_empty() {
        return Ok(out);
    }
    let mut add = |file: &str, caption: String| out.push((file.to_string(), caption));
    let idx = "frame index (replay order, all topics)";

    // Latency distribution per stage, `frame` (the whole call) last.
    let stages: Vec<&String> = r
        .stage_order
        .iter()
        .filter(|s| r.latency_ms.contains_key(*s))
        .collect();
    let per_stage: Vec<BoxStats> = stages
        .iter()
        .map(|st| {
            let v: Vec<f64> = if st.as_str() == "frame" {
                fr.iter().map(|f| f.frame_ms).collect()
            } else {
                fr.iter()
                    .flat_map(|f| f.stages.iter().filter(|(s, _)| s == *st).map(|x| x.1))
                    .collect()
            };
            box_stats(&v)
        })
        .collect();
    let names: Vec<String> = stages.iter().map(|s| s.to_string()).collect();
    plot::boxes(
        &dir.join("latency.png"),
        Labels {
            title: &format!(
                "Latency per stage ({} frames, {} backend)",
                fr.len(),
                r.backend
            ),
            x: "pipeline stage (frame = the whole Pipeline::process call)",
            y: "time per frame (ms)",
        },
        &names,
        &per_stage,
        ["p25 to p75", "median", "p1 to p99"],
    )?;
    add(
        "latency.png",
        "Latency distribution per stage (ms): boxes from p25 to p75, median line, whiskers \
         at p1 and p99"
            .into(),
    );

    plot::lines(
        &dir.join("frame_latency.png"),
        Labels {
            title: &format!(
                "Pipeline time per frame ({:.1} frames/s in the pipeline)",
                r.fps_pipeline
            ),
            x: idx,
            y: "Pipeline::process time (ms)",
        },
        &[series("frame time", over_frames(fr, |s| Some(s.frame_ms)))],
        None,
    )?;
    add(
        "frame_latency.png",
        "Pipeline time per frame (ms) against frame index".into(),
    );

    let mut kp = vec![series(
        "keypoints",
        over_frames(fr, |s| Some(s.keypoints as f64)),
    )];
    let matches = over_frames(fr, |s| s.match_track.map(|m| m.matches as f64));
    if !matches.is_empty() {
        kp.push(series("descriptor matches to the previous frame", matches));
    }
    plot::lines(
        &dir.join("keypoints.png"),
        Labels {
            title: "Keypoints per frame",
            x: idx,
            y: "count per frame",
        },
        &kp,
        None,
    )?;
    add(
        "keypoints.png",
        if kp.len() > 1 {
            "Keypoints per frame and descriptor matches to the previous frame".into()
        } else {
            "Keypoints per frame".into()
        },
    );

    let lv = &r.keypoints_per_level_mean;
    if !lv.is_empty() {
        let cats: Vec<String> = (0..lv.len()).map(|l| format!("level {l}")).collect();
        plot::bars(
            &dir.join("levels.png"),
            Labels {
                title: "Mean keypoints per pyramid level",
                x: "pyramid level (0 = full resolution)",
                y: "keypoints per frame (mean)",
            },
            &cats,
            &[BarGroup {
                name: "mean keypoints".into(),
                values: lv.iter().map(|v| Some(*v)).collect(),
            }],
            Scale::Linear,
        )?;
        add("levels.png", "Mean keypoints per pyramid level".into());
    }

    let h = &r.keypoint_heatmap;
    if h.frames > 0 && !h.counts.is_empty() {
        let values = h.per_frame();
        plot::heatmap(
            &dir.join("heatmap.png"),
            Labels {
                title: &format!(
                    "Keypoint density over the image ({0}x{0} px cells, {1} frames)",
                    h.cell, h.frames
                ),
                x: "x (level-0 px)",
                y: "y (level-0 px, from the top)",
            },
            &Grid {
                cols: h.cols,
                rows: h.rows,
                cell: h.cell,
                values: &values,
            },
            "keypoints per cell per frame (mean)",
        )?;
        add(
            "heatmap.png",
            format!(
                "Coverage heat map: mean keypoints per frame in each {0}x{0}-pixel cell",
                h.cell
            ),
        );
    }

    let mut cov = vec![series(
        "coverage (cells with a keypoint)",
        over_frames(fr, |s| Some(s.coverage)),
    )];
    if r.edge_density.is_some() {
        cov.push(series(
            "edge density (Canny edge pixels)",
            over_frames(fr, |s| s.edge_density),
        ));
    }
    plot::lines(
        &dir.join("coverage.png"),
        Labels {
            title: "Spatial coverage and edge density per frame",
            x: idx,
            y: "share (0 to 1)",
        },
        &cov,
        Some((0.0, 1.0)),
    )?;
    add(
        "coverage.png",
        if cov.len() > 1 {
            "Spatial coverage and edge density against frame index".into()
        } else {
            "Spatial coverage against frame index".into()
        },
    );

    let tr = over_frames(fr, |s| {
        s.track
            .filter(|t| t.tried > 0)
            .map(|t| t.refound as f64 / t.tried as f64)
    });
    let inl = over_frames(fr, |s| s.match_track.and_then(|m| m.inlier_share()));
    let mut track = Vec::new();
    if !tr.is_empty() {
        track.push(series("re-found ratio (patch ZNCC)", tr));
    }
    if !inl.is_empty() {
        track.push(series("descriptor-match inlier share", inl));
    }
    if !track.is_empty() {
        plot::lines(
            &dir.join("tracking.png"),
            Labels {
                title: "Frame-to-frame tracking (each frame against the previous one)",
                x: idx,
                y: "share (0 to 1)",
            },
            &track,
            Some((0.0, 1.0)),
        )?;
        add(
            "tracking.png",
            "Tracking against frame index: share of the previous frame's keypoints re-found \
             (patch ZNCC) and inlier share of the descriptor matches"
                .into(),
        );
    }

    if !r.homography.is_empty() {
        let cats: Vec<String> = r.homography.iter().map(|h| h.name.clone()).collect();
        let cv = r.opencv.as_ref();
        let cv_name = cv.map_or("OpenCV ORB".to_string(), |o| {
            format!("OpenCV {} ORB", o.opencv_version)
        });
        let of_cv = |f: fn(&HomographyResult) -> f64| -> Vec<Option<f64>> {
            r.homography
                .iter()
                .map(|h| {
                    cv.and_then(|o| o.pairs.iter().find(|x| x.name == h.name))
                        .map(f)
                })
                .collect()
        };
        let mut groups = vec![BarGroup {
            name: "repeatability, ours".into(),
            values: r.homography.iter().map(|h| Some(h.repeatability)).collect(),
        }];
        if cv.is_some() {
            groups.push(BarGroup {
                name: format!("repeatability, {cv_name}"),
                values: of_cv(|x| x.repeatability),
            });
        }
        groups.push(BarGroup {
            name: "matching score, ours".into(),
            values: r
                .homography
                .iter()
                .map(|h| Some(h.matching_score))
                .collect(),
        });
        if cv.is_some() {
            groups.push(BarGroup {
                name: format!("matching score, {cv_name}"),
                values: of_cv(|x| x.matching_score),
            });
        }
        plot::bars(
            &dir.join("homography.png"),
            Labels {
                title: &format!("Repeatability and matching score: ours vs {cv_name}"),
                x: "image pair (homography)",
                y: "score (0 to 1)",
            },
            &cats,
            &groups,
            Scale::Linear,
        )?;
        add(
            "homography.png",
            if cv.is_some() {
                format!("Repeatability and matching score per image pair, ours beside {cv_name}")
            } else {
                "Repeatability and matching score per image pair (ours; OpenCV's with \
                 `--opencv-eval`)"
                    .into()
            },
        );
    }
    Ok(out)
}

/// Writes report.json, the plots, report.md and report.html into `dir`.
pub fn write(inp: &ReportInput, dir: &Path) -> Result<Written> {
    let report = Report::build(inp);
    let json = dir.join("report.json");
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| Error::Bag(format!("report.json: {e}")))?;
    write_atomic(&json, text.as_bytes())?;
    let plot_list = plots(&report, dir)?;
    let markdown = report.markdown(&plot_list);
    let md = dir.join("report.md");
    write_atomic(&md, markdown.as_bytes())?;
    let html = dir.join("report.html");
    let page = super::html::page("gpu_features replay report", &markdown, dir)?;
    write_atomic(&html, page.as_bytes())?;
    Ok(Written {
        markdown: md,
        json,
        html,
        plots: plot_list.iter().map(|(f, _)| dir.join(f)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let d = Dist::of((1..=100).map(|v| v as f64));
        assert_eq!((d.p50, d.p90, d.p99, d.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(d.mean, 50.5);
        let d = Dist::of([3.0]);
        assert_eq!((d.p50, d.p99), (3.0, 3.0));
        assert_eq!(Dist::of([]), Dist::default());
    }

    #[test]
    fn coverage_counts_cells() {
        use crate::pipeline::Keypoint;
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

    fn input(frames: Vec<FrameStats>, matcher: Option<MatcherInfo>) -> ReportInput {
        ReportInput {
            bag: "b.mcap".into(),
            storage: "mcap",
            backend: "cpu",
            config: Config::default(),
            frames,
            per_topic: BTreeMap::new(),
            skipped: 0,
            skip_reasons: BTreeMap::new(),
            wall_s: 1.0,
            processing_s: 0.5,
            homography: Vec::new(),
            opencv: None,
            matcher,
            heatmap: Heatmap::new(32),
        }
    }

    fn frame(m: Option<MatchTrackStats>) -> FrameStats {
        FrameStats::new("/t", 0, 0, &Features::default(), (64, 64), 32, 1.0, None)
            .with_match_track(m)
    }

    fn mt(matches: usize, inliers: usize) -> Option<MatchTrackStats> {
        Some(MatchTrackStats {
            query: 100,
            train: 100,
            matches,
            inliers,
        })
    }

    #[test]
    fn descriptor_tracking_summary() {
        let info = MatcherInfo {
            backend: "cpu",
            params: MatchParams::default(),
        };
        // First frame: no previous one. Then 3 pairs, one without matches.
        let frames = vec![
            frame(None),
            frame(mt(80, 72)),
            frame(mt(0, 0)),
            frame(mt(20, 2)),
        ];
        let r = Report::build(&input(frames.clone(), Some(info)));
        let d = r.descriptor_tracking.as_ref().unwrap();
        assert_eq!((d.frame_pairs, d.matches, d.inliers), (3, 100, 74));
        assert_eq!(d.query_keypoints, 300);
        assert_eq!(d.inlier_share, 0.74);
        assert_eq!(d.matcher, "cpu");
        assert_eq!((d.ratio, d.cross_check), (Some(0.8), true));
        // Matches per pair: 80, 0, 20. Shares over the pairs with matches: 0.9 and 0.1.
        assert_eq!(
            (d.matches_per_pair.mean, d.matches_per_pair.p50),
            (100.0 / 3.0, 20.0)
        );
        assert_eq!(d.inlier_share_per_pair.n, 2);
        assert!((d.inlier_share_per_pair.mean - 0.5).abs() < 1e-12);
        assert_eq!(d.inlier_share_per_pair.p50, 0.1);
        let md = r.markdown(&[]);
        assert!(md.contains("## Frame-to-frame tracking"), "{md}");
        assert!(
            md.contains("100 matches of 300 keypoints, 74 of them inliers (inlier share 0.740)"),
            "{md}"
        );
        assert!(
            md.contains("| inlier share | 0.500 | 0.100 | 0.100 | 0.900 |"),
            "{md}"
        );
        assert!(md.contains("Lowe ratio 0.8, cross-check"), "{md}");
        // The per-frame series travels in report.json.
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["per_frame"][1]["match_track"]["inliers"], 72);
        assert!(j["per_frame"][0]["match_track"].is_null());
        // No descriptors (describe off): no matcher, no section.
        let r = Report::build(&input(vec![frame(None), frame(None)], None));
        assert!(r.descriptor_tracking.is_none());
        assert!(!r.markdown(&[]).contains("Frame-to-frame"));
    }

    #[test]
    fn matching_scores_side_by_side() {
        let res = |name: &str, rep: f64, ms: f64| HomographyResult {
            name: name.into(),
            n1: 10,
            n2: 10,
            n1_common: 10,
            n2_common: 10,
            correspondences: (rep * 10.0) as usize,
            repeatability: rep,
            correct_matches: (ms * 10.0) as usize,
            matching_score: ms,
        };
        let mut inp = input(vec![frame(None)], None);
        inp.homography = vec![res("p", 0.6, 0.5), res("q", 0.7, 0.4)];
        let md = Report::build(&inp).markdown(&[]);
        assert!(md.contains("| p | 0.600 | - | 0.500 | - | - |"), "{md}");
        assert!(md.contains("run `scripts/eval_homography.py`"), "{md}");
        inp.opencv = Some(OpencvEval {
            opencv_version: "5.0.0".into(),
            pairs: vec![res("p", 0.61, 0.52)],
            ours_with_orb_descriptor: vec![res("p", 0.6, 0.51)],
            ours_with_our_descriptor: vec![res("p", 0.6, 0.5)],
        });
        let md = Report::build(&inp).markdown(&[]);
        assert!(md.contains("matching score, OpenCV 5.0.0 ORB"), "{md}");
        // Ours beside OpenCV's on one row; a pair the script did not run keeps dashes.
        assert!(
            md.contains("| p | 0.600 | 0.610 | 0.500 | 0.520 | 0.510 |"),
            "{md}"
        );
        assert!(md.contains("| q | 0.700 | - | 0.400 | - | - |"), "{md}");
        assert!(
            md.contains("| p | OpenCV 5.0.0 ORB | 10 | 10 | 10/10 | 6 | 0.610 | 5 | 0.520 |"),
            "{md}"
        );
        assert!(
            md.contains("our ORB descriptor, scored by the script"),
            "{md}"
        );
        // The script's JSON without the newer key still loads.
        let old: OpencvEval = serde_json::from_str(
            r#"{"opencv_version": "4.9", "pairs": [], "ours_with_orb_descriptor": []}"#,
        )
        .unwrap();
        assert!(old.ours_with_our_descriptor.is_empty());
    }

    #[test]
    fn heatmap_grows_and_counts() {
        use crate::pipeline::Keypoint;
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

    #[test]
    fn box_stats_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let b = box_stats(&v);
        assert_eq!(
            (b.whisker_lo, b.q1, b.median, b.q3, b.whisker_hi),
            (1.0, 25.0, 50.0, 75.0, 99.0)
        );
    }

    #[test]
    fn writes_every_plot_and_the_html() {
        let dir = std::env::temp_dir().join(format!("gpu_features_report_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let res = |name: &str, rep: f64, ms: f64| HomographyResult {
            name: name.into(),
            n1: 10,
            n2: 10,
            n1_common: 10,
            n2_common: 10,
            correspondences: 5,
            repeatability: rep,
            correct_matches: 4,
            matching_score: ms,
        };
        let mut inp = input(vec![frame(None), frame(mt(80, 72)), frame(mt(20, 2))], None);
        inp.heatmap.add(&[], (64, 64));
        inp.homography = vec![res("p", 0.6, 0.5)];
        inp.opencv = Some(OpencvEval {
            opencv_version: "5.0.0".into(),
            pairs: vec![res("p", 0.61, 0.52)],
            ..Default::default()
        });
        let w = write(&inp, &dir).unwrap();
        let names: Vec<String> = w
            .plots
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for f in [
            "latency.png",
            "heatmap.png",
            "homography.png",
            "tracking.png",
        ] {
            assert!(names.iter().any(|n| n == f), "{f}: {names:?}");
        }
        for p in &w.plots {
            let img = ::image::open(p).unwrap().to_rgb8();
            assert_eq!(img.dimensions(), (plot::W, plot::H));
            assert!(
                plot::ink_pixels(&img, 0..plot::W, 0..plot::H) > 5_000,
                "{p:?}"
            );
        }
        let md = std::fs::read_to_string(&w.markdown).unwrap();
        assert!(md.contains("![Repeatability and matching score per image pair, ours beside OpenCV 5.0.0 ORB](homography.png)"), "{md}");
        let html = std::fs::read_to_string(&w.html).unwrap();
        assert_eq!(
            html.matches("data:image/png;base64,").count(),
            w.plots.len()
        );
        assert!(
            html.contains("<td>p</td><td>0.600</td><td>0.610</td>"),
            "{html:.3000}"
        );
    }
}
