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
mod detect;
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
use crate::features::{Features, StageTiming};
use crate::image::{Gray, GrayImage, ImageView};
pub use detect::{
    detect_keypoints, detect_keypoints_into, detect_keypoints_parallel, detect_keypoints_with,
    level_candidates, DetectScratch,
};

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
            let scratch = (canny_scratch, describe_scratch, detect_scratch);
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
            // Every worker has started (and made its thread's own allocations) before the
            // first frame's work: not during a later frame, however late the OS runs it.
            pool.broadcast(|_| ());
            self.pool = Some((threads, pool));
        }
        &self.pool.as_ref().expect("made above").1
    }
}

/// The buffers [`stages_threaded`] works in: Canny's, the descriptors', the detection's.
type ThreadedScratch<'s> = (
    &'s mut canny::CannyScratch,
    &'s mut describe::DescribeScratch,
    &'s mut DetectScratch,
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
    (canny_scratch, describe_scratch, detect_scratch): ThreadedScratch,
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
                detect_keypoints_parallel(cfg, levels, detect_scratch, keypoints);
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

#[cfg(test)]
mod tests;
