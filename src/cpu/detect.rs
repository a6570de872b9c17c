//! ORB's detection on the CPU, level by level: each level's candidates (FAST, the per-cell
//! FAST of ORB-SLAM3, or dense Harris), the per-level budget and spread, the Harris score,
//! the orientation, then level-0 coordinates; on one thread or with the levels (and FAST's
//! bands) on the current rayon pool. [`DetectScratch`] keeps every buffer from frame to
//! frame.

use super::{cells, fast, harris, orient};
use crate::config::{Config, DetectorMethod};
use crate::features::Keypoint;
use crate::image::{AsGray, Gray};
use crate::select::{self, select_level, to_keypoint, Corner};

/// Corners of one level, before selection: FAST (with the optional per-cell low-threshold
/// retry) or dense Harris, border-filtered, with their ranking response. With `cpu.threads`
/// above 1, FAST runs in bands of rows on the current rayon pool (the same corners).
pub fn level_candidates(cfg: &Config, img: Gray<'_>) -> Vec<Corner> {
    let mut work = LevelScratch::default();
    level_candidates_into(cfg, img, &mut work);
    work.corners
}

/// The buffers of one level's detection: FAST's suppression rows (one pass, or one per
/// band), the per-cell detector's, the candidates and (levels in parallel) the level's
/// keypoints.
#[derive(Default)]
struct LevelScratch {
    fast: fast::FastScratch,
    bands: fast::BandScratch,
    cells: cells::CellScratch,
    corners: Vec<Corner>,
    keypoints: Vec<Keypoint>,
}

/// [`level_candidates`] into `work.corners` (replaced). FAST (in one pass or in bands) and
/// the per-cell detector allocate nothing once `work` has grown; dense Harris makes its
/// vectors.
fn level_candidates_into(cfg: &Config, img: Gray<'_>, work: &mut LevelScratch) {
    let d = &cfg.detector;
    let corners = &mut work.corners;
    match d.method {
        DetectorMethod::None => return corners.clear(),
        DetectorMethod::Harris => {
            *corners = harris::dense_corners(
                img,
                d.dense_block_size,
                d.dense_ksize,
                d.harris_k,
                d.dense_quality,
            )
        }
        DetectorMethod::Fast if d.low_threshold_retry => {
            let settings = cells::CellSettings {
                threshold: d.fast_threshold as u8,
                min_threshold: d.min_fast_threshold as u8,
                nonmax_suppression: d.nonmax_suppression,
                cell_size: cfg.select.cell_size,
                border: d.border,
            };
            cells::fast_in_cells_into(img, settings, &mut work.cells, corners)
        }
        DetectorMethod::Fast => {
            let (t, nms) = (d.fast_threshold as u8, d.nonmax_suppression);
            match cfg.cpu.threads_for(false) {
                // Bands of at least ~64 rows; on the pool this runs in (the pipeline's).
                n if n > 1 && img.height >= 128 => {
                    let bands = n.min(img.height / 64);
                    fast::detect_banded_into(img, t, nms, bands, &mut work.bands, corners)
                }
                _ => fast::detect_into(img, t, nms, &mut work.fast, corners),
            }
        }
    }
    let b = d.border;
    let (w, h) = (img.width as u32, img.height as u32);
    corners.retain(|c| c.x >= b && c.y >= b && c.x + b < w && c.y + b < h);
}

/// ORB's level loop: candidates, budget, Harris score, spread, orientation, level-0 coords.
/// Allocates; takes owned levels or views.
pub fn detect_keypoints(cfg: &Config, levels: &[impl AsGray]) -> Vec<Keypoint> {
    let views: Vec<Gray> = levels.iter().map(AsGray::gray).collect();
    let mut out = Vec::new();
    detect_keypoints_into(cfg, &views, &mut out);
    out
}

/// [`detect_keypoints`] into `out` (cleared first, capacity kept).
pub fn detect_keypoints_into(cfg: &Config, levels: &[Gray<'_>], out: &mut Vec<Keypoint>) {
    detect_keypoints_with(cfg, levels, &mut DetectScratch::default(), out)
}

/// The buffers of [`detect_keypoints_with`] and [`detect_keypoints_parallel`], kept from
/// frame to frame: each level's, and the per-level budgets and
/// ORB's `umax` for the settings they were made for.
#[derive(Default)]
pub struct DetectScratch {
    levels: Vec<LevelScratch>,
    budgets: select::LevelBudgets,
    umax_for: Option<u32>,
    umax: Vec<i32>,
}

impl DetectScratch {
    /// The budgets of `levels` levels, `umax`, and each level's buffers.
    fn prepare(&mut self, cfg: &Config, levels: usize) -> (&[usize], &[i32], &mut [LevelScratch]) {
        let half = cfg.orient.patch_size / 2;
        if self.umax_for != Some(half) {
            self.umax = orient::circle_extents(half);
            self.umax_for = Some(half);
        }
        if self.levels.len() < levels {
            self.levels.resize_with(levels, LevelScratch::default);
        }
        let budgets = self.budgets.get(cfg, levels);
        (budgets, &self.umax, &mut self.levels[..levels])
    }
}

/// [`detect_keypoints_into`] in `scratch`'s buffers: with the FAST detectors a frame
/// allocates nothing once they have grown.
pub fn detect_keypoints_with(
    cfg: &Config,
    levels: &[Gray<'_>],
    scratch: &mut DetectScratch,
    out: &mut Vec<Keypoint>,
) {
    out.clear();
    let budget = cfg.select.max_keypoints as usize;
    // One work buffer per level: the per-cell detector's grid is made per level size.
    let (budgets, umax, work) = scratch.prepare(cfg, levels.len());
    for (level, (img, w)) in levels.iter().zip(work).enumerate() {
        level_keypoints(cfg, level, *img, budget, budgets, umax, w, out);
    }
}

/// One level of [`detect_keypoints_into`]: its keypoints appended to `out`, its candidates
/// in `work`.
#[allow(clippy::too_many_arguments)]
fn level_keypoints(
    cfg: &Config,
    level: usize,
    img: Gray<'_>,
    budget: usize,
    per_level: &[usize],
    umax: &[i32],
    work: &mut LevelScratch,
    out: &mut Vec<Keypoint>,
) {
    level_candidates_into(cfg, img, work);
    let corners = &mut work.corners;
    let n = (budget > 0).then_some(per_level[level]);
    let (bs, k) = (cfg.detector.harris_block_size, cfg.detector.harris_k);
    select_level(cfg, corners, n, img.width, img.height, |c| {
        harris::orb_score(img, c.x, c.y, bs, k)
    });
    for c in corners.iter() {
        let angle = if cfg.orient.enabled {
            orient::ic_angle(img, c.x, c.y, umax)
        } else {
            -1.0
        };
        out.push(to_keypoint(cfg, level, c, angle));
    }
}

/// [`detect_keypoints_with`] with the levels on the current rayon pool: each level's
/// keypoints into its own buffer, then joined in level order (the same keypoints).
pub fn detect_keypoints_parallel(
    cfg: &Config,
    levels: &[Gray<'_>],
    scratch: &mut DetectScratch,
    out: &mut Vec<Keypoint>,
) {
    use rayon::prelude::*;
    let budget = cfg.select.max_keypoints as usize;
    let (budgets, umax, work) = scratch.prepare(cfg, levels.len());
    work.par_iter_mut().enumerate().for_each(|(level, w)| {
        let mut kps = std::mem::take(&mut w.keypoints);
        kps.clear();
        level_keypoints(
            cfg,
            level,
            levels[level],
            budget,
            budgets,
            umax,
            w,
            &mut kps,
        );
        w.keypoints = kps;
    });
    out.clear();
    for w in work.iter() {
        out.extend_from_slice(&w.keypoints);
    }
}
