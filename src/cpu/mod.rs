//! CPU reference: plain Rust, OpenCV-exact, the oracle for the GPU backend's tests and the
//! fallback when no GPU is present. One module per stage; `kernels/<stage>.cu` and
//! `src/cuda/<stage>.rs` are its GPU twins.

pub mod blur;
pub mod canny;
pub mod decode;
pub mod describe;
pub mod fast;
pub mod harris;
pub mod orb_pattern;
pub mod orient;
pub mod pyramid;
pub mod select;
#[cfg(test)]
mod test_util;

use std::time::Instant;

use crate::config::{Config, DetectorMethod, ScoreType, Spread};
use crate::image::{GrayImage, ImageView};
use crate::pipeline::{Features, Keypoint, StageTiming};

/// A corner on one pyramid level, in that level's pixel coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Corner {
    pub x: u32,
    pub y: u32,
    /// The FAST score (0 for dense Harris corners).
    pub fast_score: u8,
    /// The ranking response: Harris score, FAST score or dense Harris response.
    pub response: f32,
}

/// Buffers of the CPU path, reused from frame to frame.
#[derive(Default)]
pub struct CpuPipeline {
    /// levels[0] is the decoded gray input.
    levels: Vec<GrayImage>,
    canny: canny::CannyScratch,
    describe: describe::DescribeScratch,
}

impl CpuPipeline {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn levels(&self) -> &[GrayImage] {
        &self.levels
    }

    pub fn process(&mut self, cfg: &Config, frame: &ImageView) -> Features {
        let mut out = Features::default();
        self.process_into(cfg, frame, &mut out);
        out
    }

    /// Runs every stage into `out`, reusing its keypoint and edge buffers.
    pub fn process_into(&mut self, cfg: &Config, frame: &ImageView, out: &mut Features) {
        out.timings.clear();
        let mut t = Instant::now();
        let mut lap = |stage: &'static str, timings: &mut Vec<StageTiming>| {
            let now = Instant::now();
            timings.push(StageTiming {
                stage,
                ms: (now - t).as_secs_f64() * 1e3,
            });
            t = now;
        };
        if self.levels.is_empty() {
            self.levels.push(GrayImage::default());
        }
        decode::decode(frame, &mut self.levels[0]);
        lap("decode", &mut out.timings);

        let levels = if cfg.detector.method == DetectorMethod::None {
            1
        } else {
            cfg.pyramid.levels as usize
        };
        pyramid::build(
            &mut self.levels,
            levels,
            cfg.pyramid.scale_factor,
            cfg.pyramid.interpolation,
        );
        lap("pyramid", &mut out.timings);

        detect_keypoints_into(cfg, &self.levels[..levels], &mut out.keypoints);
        lap("detect", &mut out.timings);

        if cfg.describe.enabled {
            describe::describe_into(
                &self.levels[..levels],
                cfg.pyramid.scale_factor,
                &out.keypoints,
                &mut self.describe,
                &mut out.descriptors,
            );
            lap("describe", &mut out.timings);
        } else {
            out.descriptors.clear();
        }

        if cfg.canny.enabled {
            let edges = out.edges.get_or_insert_with(GrayImage::default);
            canny::canny(&self.levels[0], &cfg.canny, edges, &mut self.canny);
        } else {
            out.edges = None;
        }
        lap("canny", &mut out.timings);

        out.level_sizes.clear();
        out.level_sizes
            .extend(self.levels[..levels].iter().map(|l| (l.width, l.height)));
    }
}

/// Corners of one level, before selection: FAST (with the optional per-cell low-threshold
/// retry) or dense Harris, border-filtered, with their ranking response.
pub fn level_candidates(cfg: &Config, img: &GrayImage) -> Vec<Corner> {
    let d = &cfg.detector;
    let mut corners = match d.method {
        DetectorMethod::None => return Vec::new(),
        DetectorMethod::Harris => harris::dense_corners(
            img,
            d.dense_block_size,
            d.dense_ksize,
            d.harris_k,
            d.dense_quality,
        ),
        DetectorMethod::Fast if d.low_threshold_retry => select::fast_in_cells(
            img,
            d.fast_threshold as u8,
            d.min_fast_threshold as u8,
            d.nonmax_suppression,
            cfg.select.cell_size,
            d.border,
        ),
        DetectorMethod::Fast => fast::detect(img, d.fast_threshold as u8, d.nonmax_suppression),
    };
    let b = d.border;
    let (w, h) = (img.width as u32, img.height as u32);
    corners.retain(|c| c.x >= b && c.y >= b && c.x + b < w && c.y + b < h);
    corners
}

/// ORB's level loop: candidates, budget, Harris score, spread, orientation, level-0 coords.
pub fn detect_keypoints(cfg: &Config, levels: &[GrayImage]) -> Vec<Keypoint> {
    let mut out = Vec::new();
    detect_keypoints_into(cfg, levels, &mut out);
    out
}

/// [`detect_keypoints`] into `out` (cleared first, capacity kept).
pub fn detect_keypoints_into(cfg: &Config, levels: &[GrayImage], out: &mut Vec<Keypoint>) {
    out.clear();
    let budget = cfg.select.max_keypoints as usize;
    let per_level = select::features_per_level(budget, levels.len(), cfg.pyramid.scale_factor);
    let umax = orient::circle_extents(cfg.orient.patch_size / 2);
    for (level, img) in levels.iter().enumerate() {
        let mut corners = level_candidates(cfg, img);
        let n = (budget > 0).then_some(per_level[level]);
        let (bs, k) = (cfg.detector.harris_block_size, cfg.detector.harris_k);
        select_level(cfg, &mut corners, n, img.width, img.height, |c| {
            harris::orb_score(img, c.x, c.y, bs, k)
        });
        for c in corners {
            let angle = if cfg.orient.enabled {
                orient::ic_angle(img, c.x, c.y, &umax)
            } else {
                -1.0
            };
            out.push(to_keypoint(cfg, level, &c, angle));
        }
    }
}

/// A level corner as a level-0 keypoint, with ORB's scale: its `(float)pow((double)scale,
/// level)`, not an f32 `powi` (which differs from level 3 on).
pub fn to_keypoint(cfg: &Config, level: usize, c: &Corner, angle: f32) -> Keypoint {
    let scale = pyramid::level_scale(cfg.pyramid.scale_factor, level);
    // Without orientation the keypoint is cv::FAST's, whose size is 7.
    let diameter = if cfg.orient.enabled {
        cfg.orient.patch_size as f32
    } else {
        7.0
    };
    Keypoint {
        x: c.x as f32 * scale,
        y: c.y as f32 * scale,
        response: c.response,
        size: diameter * scale,
        angle,
        octave: level as i32,
    }
}

/// ORB's selection on one level's candidates, shared by every backend: with the Harris
/// score, a first cut to 2n by FAST score, then `harris(c)` as the response; then the budget
/// `n` with the configured spread; leaves the kept corners in (y, x) order.
pub fn select_level(
    cfg: &Config,
    corners: &mut Vec<Corner>,
    n: Option<usize>,
    width: usize,
    height: usize,
    mut harris: impl FnMut(&Corner) -> f32,
) {
    if cfg.detector.method == DetectorMethod::Fast && cfg.detector.score == ScoreType::Harris {
        // ORB ranks by FAST score first and keeps 2n before paying for Harris. OpenCV's
        // retainBest keeps every tie of the 2n-th FAST score; so do we (a set, hence still
        // deterministic), or the Harris ranking would see other candidates.
        if let (Some(n), Spread::None) = (n, cfg.select.spread) {
            select::retain_best_with_ties(corners, 2 * n);
        }
        for c in corners.iter_mut() {
            c.response = harris(c);
        }
    }
    if let Some(n) = n {
        select::select(corners, n, &cfg.select, width, height);
    }
    corners.sort_by_key(|c| (c.y, c.x));
}
