//! CPU reference: plain Rust, OpenCV-exact, the oracle for the GPU backend's tests and the
//! fallback when no GPU is present. One module per stage; `kernels/<stage>.cu` and
//! `src/cuda/<stage>.rs` are its GPU twins.
//!
//! May import: `config`, `error`, `features`, `image`, `levels`, `select` (the CPU reference
//! of every stage).

pub mod blur;
pub mod canny;
pub mod cells;
pub mod clahe;
pub mod decode;
pub mod describe;
pub mod fast;
pub mod fma;
pub mod gftt;
pub mod harris;
pub mod lk;
pub mod orb_blur;
pub mod orb_pattern;
pub mod orient;
pub mod pyramid;
pub mod rgb_gray;
pub mod simd;
#[cfg(test)]
mod test_util;

use std::time::Instant;

use crate::config::{Config, DetectorMethod};
use crate::features::{Features, Keypoint, StageTiming};
use crate::image::{AsGray, Gray, GrayImage, ImageView};
use crate::select::{self, select_level, to_keypoint, Corner};

/// Buffers of the CPU path, reused from frame to frame.
#[derive(Default)]
pub struct CpuPipeline {
    /// Level 0 when the frame is not a packed mono8 image: its decode. A packed mono8 frame
    /// is read in place (no copy).
    decoded: GrayImage,
    /// The pyramid's levels above level 0 (level i in `above[i - 1]`).
    above: Vec<GrayImage>,
    /// Their resize tables (per resolution).
    tables: pyramid::TableCache,
    detect: DetectScratch,
    canny: canny::CannyScratch,
    describe: describe::DescribeScratch,
    /// `cpu.threads` > 1: the pool and its size (made on the first such frame).
    pool: Option<(usize, rayon::ThreadPool)>,
    /// Each level's keypoints while the levels run in parallel.
    per_level: Vec<Vec<Keypoint>>,
}

impl CpuPipeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// The last frame's pyramid levels above level 0 (level 0 is the frame, or its decode).
    pub fn above(&self) -> &[GrayImage] {
        &self.above
    }

    pub fn process(&mut self, cfg: &Config, frame: &ImageView) -> Features {
        let mut out = Features::default();
        self.process_into(cfg, frame, &mut out);
        out
    }

    /// Runs every stage into `out`, reusing its keypoint and edge buffers. A packed mono8
    /// frame is level 0 as it lies (the stages read the caller's bytes); other encodings are
    /// decoded into a buffer first.
    pub fn process_into(&mut self, cfg: &Config, frame: &ImageView, out: &mut Features) {
        out.timings.clear();
        let mut t = Instant::now();
        let mut lap = |stage: &'static str, timings: &mut Vec<StageTiming>| {
            let now = Instant::now();
            timings.push(StageTiming {
                stage,
                ms: (now - t).as_secs_f64() * 1e3,
                overlapped: false,
            });
            t = now;
        };
        let threads = cfg.cpu.threads_for(false);
        if threads > 1 {
            self.pool(threads);
        }
        let CpuPipeline {
            decoded,
            above,
            tables,
            detect: detect_scratch,
            canny: canny_scratch,
            describe: describe_scratch,
            pool,
            per_level,
        } = self;
        let pool = pool.as_ref().filter(|_| threads > 1).map(|p| &p.1);
        let in_pool = |f: &mut (dyn FnMut() + Send)| match pool {
            Some(p) => p.install(f),
            None => f(),
        };
        let base = match frame.packed_mono8() {
            Some(gray) => gray,
            None => {
                let bands = threads.min(frame.height() / 32).max(1);
                in_pool(&mut || decode::decode_banded(frame, decoded, bands));
                decoded.view()
            }
        };
        lap("decode", &mut out.timings);

        let n = if cfg.detector.method == DetectorMethod::None {
            1
        } else {
            cfg.pyramid.levels as usize
        };
        above.resize_with(n - 1, GrayImage::default);
        in_pool(&mut || {
            pyramid::build_above(
                base,
                above,
                cfg.pyramid.scales,
                cfg.pyramid.scale_factor,
                cfg.pyramid.interpolation,
                threads,
                tables,
            )
        });
        lap("pyramid", &mut out.timings);
        let mut views = [Gray::EMPTY; crate::levels::MAX_LEVELS];
        views[0] = base;
        for (v, l) in views[1..].iter_mut().zip(above.iter()) {
            *v = l.view();
        }
        let levels = &views[..n];

        if let Some(pool) = pool {
            let scratch = (canny_scratch, describe_scratch, per_level);
            stages_threaded(cfg, levels, threads, pool, scratch, out);
        } else {
            detect_keypoints_with(cfg, levels, detect_scratch, &mut out.keypoints);
            lap("detect", &mut out.timings);

            if cfg.describe.enabled {
                describe::describe_into(
                    levels,
                    describe::DescribeSettings::from_config(cfg),
                    &out.keypoints,
                    describe_scratch,
                    &mut out.descriptors,
                );
                lap("describe", &mut out.timings);
            } else {
                out.descriptors.clear();
            }

            if cfg.canny.enabled {
                let edges = out.edges.get_or_insert_with(GrayImage::default);
                canny::canny(base, &cfg.canny, edges, canny_scratch);
            } else {
                out.edges = None;
            }
            lap("canny", &mut out.timings);
        }

        out.level_sizes.clear();
        out.level_sizes
            .extend(levels.iter().map(|l| (l.width, l.height)));
    }

    /// The pool of `threads` threads (made on first use, remade when the count changes).
    fn pool(&mut self, threads: usize) -> &rayon::ThreadPool {
        if self.pool.as_ref().map(|p| p.0) != Some(threads) {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("gf-cpu-{i}"))
                .build()
                .expect("the CPU stages' thread pool");
            self.pool = Some((threads, pool));
        }
        &self.pool.as_ref().expect("made above").1
    }
}

/// The buffers [`stages_threaded`] works in: Canny's, the descriptors', each level's
/// keypoints.
type ThreadedScratch<'s> = (
    &'s mut canny::CannyScratch,
    &'s mut describe::DescribeScratch,
    &'s mut Vec<Vec<Keypoint>>,
);

/// Detection, descriptors and Canny on `threads` threads of `pool`, the same outputs as one
/// thread: the levels' keypoints found in parallel (FAST in bands of rows) and joined in
/// level order, each used level blurred in parallel and the descriptors computed in chunks
/// of keypoints, Canny on level 0 in bands of rows beside all of it. Stage times: `detect`
/// and `describe` on their path, `canny` beside them (`overlapped`).
fn stages_threaded(
    cfg: &Config,
    levels: &[Gray<'_>],
    threads: usize,
    pool: &rayon::ThreadPool,
    (canny_scratch, describe_scratch, per_level): ThreadedScratch,
    out: &mut Features,
) {
    let Features {
        keypoints,
        descriptors,
        edges,
        timings,
        ..
    } = out;
    let ((t_detect, t_describe), t_canny) = pool.install(|| {
        rayon::join(
            || {
                let t0 = Instant::now();
                detect_levels_parallel(cfg, levels, per_level, keypoints);
                let t1 = Instant::now();
                if cfg.describe.enabled {
                    describe::describe_into_threaded(
                        levels,
                        describe::DescribeSettings::from_config(cfg),
                        keypoints,
                        describe_scratch,
                        descriptors,
                    );
                } else {
                    descriptors.clear();
                }
                (t1 - t0, t1.elapsed())
            },
            || {
                let t0 = Instant::now();
                if cfg.canny.enabled {
                    let e = edges.get_or_insert_with(GrayImage::default);
                    let bands = threads.min(levels[0].height / 32).max(1);
                    canny::canny_banded(levels[0], &cfg.canny, e, canny_scratch, bands);
                } else {
                    *edges = None;
                }
                t0.elapsed()
            },
        )
    });
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    timings.push(StageTiming {
        stage: "detect",
        ms: ms(t_detect),
        overlapped: false,
    });
    if cfg.describe.enabled {
        timings.push(StageTiming {
            stage: "describe",
            ms: ms(t_describe),
            overlapped: false,
        });
    }
    timings.push(StageTiming {
        stage: "canny",
        ms: ms(t_canny),
        overlapped: true,
    });
}

/// Corners of one level, before selection: FAST (with the optional per-cell low-threshold
/// retry) or dense Harris, border-filtered, with their ranking response. With `cpu.threads`
/// above 1, FAST runs in bands of rows on the current rayon pool (the same corners).
pub fn level_candidates(cfg: &Config, img: Gray<'_>) -> Vec<Corner> {
    let mut corners = Vec::new();
    level_candidates_into(cfg, img, &mut fast::FastScratch::default(), &mut corners);
    corners
}

/// [`level_candidates`] into `corners` (replaced). One-thread FAST reuses `fast` and
/// `corners` (no allocation once they have grown); dense Harris, the per-cell retry and FAST
/// in bands make new vectors.
fn level_candidates_into(
    cfg: &Config,
    img: Gray<'_>,
    fast: &mut fast::FastScratch,
    corners: &mut Vec<Corner>,
) {
    let d = &cfg.detector;
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
            *corners = cells::fast_in_cells(
                img,
                d.fast_threshold as u8,
                d.min_fast_threshold as u8,
                d.nonmax_suppression,
                cfg.select.cell_size,
                d.border,
            )
        }
        DetectorMethod::Fast => {
            let (t, nms) = (d.fast_threshold as u8, d.nonmax_suppression);
            match cfg.cpu.threads_for(false) {
                // Bands of at least ~64 rows; on the pool this runs in (the pipeline's).
                n if n > 1 && img.height >= 128 => {
                    *corners = fast::detect_banded(img, t, nms, n.min(img.height / 64))
                }
                _ => fast::detect_into(img, t, nms, fast, corners),
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

/// The buffers of [`detect_keypoints_with`], kept from frame to frame: FAST's
/// suppression rows, a level's candidates, and the per-level budgets and ORB's `umax`
/// for the settings they were made for.
#[derive(Default)]
pub struct DetectScratch {
    fast: fast::FastScratch,
    corners: Vec<Corner>,
    budgets: select::LevelBudgets,
    umax_for: Option<u32>,
    umax: Vec<i32>,
}

/// [`detect_keypoints_into`] in `scratch`'s buffers: with the FAST detector on one thread
/// a frame allocates nothing once they have grown.
pub fn detect_keypoints_with(
    cfg: &Config,
    levels: &[Gray<'_>],
    scratch: &mut DetectScratch,
    out: &mut Vec<Keypoint>,
) {
    out.clear();
    let budget = cfg.select.max_keypoints as usize;
    let half = cfg.orient.patch_size / 2;
    if scratch.umax_for != Some(half) {
        scratch.umax = orient::circle_extents(half);
        scratch.umax_for = Some(half);
    }
    let DetectScratch {
        fast,
        corners,
        budgets,
        umax,
        ..
    } = scratch;
    let budgets = budgets.get(cfg, levels.len());
    for (level, img) in levels.iter().enumerate() {
        let work = (&mut *fast, &mut *corners);
        level_keypoints(cfg, level, *img, budget, budgets, umax, work, out);
    }
}

/// One level of [`detect_keypoints_into`]: its keypoints appended to `out`; `work`: FAST's
/// rows and the candidates' vector.
#[allow(clippy::too_many_arguments)]
fn level_keypoints(
    cfg: &Config,
    level: usize,
    img: Gray<'_>,
    budget: usize,
    per_level: &[usize],
    umax: &[i32],
    (fast, corners): (&mut fast::FastScratch, &mut Vec<Corner>),
    out: &mut Vec<Keypoint>,
) {
    level_candidates_into(cfg, img, fast, corners);
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

/// [`detect_keypoints_into`] with the levels on the current rayon pool: each level's
/// keypoints into `per_level[level]` (buffers reused), then joined in level order.
fn detect_levels_parallel(
    cfg: &Config,
    levels: &[Gray<'_>],
    per_level: &mut Vec<Vec<Keypoint>>,
    out: &mut Vec<Keypoint>,
) {
    use rayon::prelude::*;
    let budget = cfg.select.max_keypoints as usize;
    let budgets = select::features_per_level(budget, levels.len(), cfg.pyramid.scale_factor);
    let umax = orient::circle_extents(cfg.orient.patch_size / 2);
    per_level.resize_with(levels.len(), Vec::new);
    per_level[..levels.len()]
        .par_iter_mut()
        .enumerate()
        .for_each(|(level, kps)| {
            kps.clear();
            let work = (&mut fast::FastScratch::default(), &mut Vec::new());
            level_keypoints(
                cfg,
                level,
                levels[level],
                budget,
                &budgets,
                &umax,
                work,
                kps,
            );
        });
    out.clear();
    for kps in &per_level[..levels.len()] {
        out.extend_from_slice(kps);
    }
}

#[cfg(test)]
mod tests;
