//! Budget + spatial spread for the CUDA backend (host side of `kernels/select.cu`).
//!
//! - `select.spread: none` with a budget (ORB's path): on the GPU, [`Selector`]. Per level
//!   the 2n pre-cut by FAST score keeping every tie (Harris score only), the top n by
//!   response with ties broken by (y, x), an ordered compaction, then the orientation of the
//!   kept corners only; the host downloads the final records (at most the budget) and turns
//!   them into keypoints ([`push_keypoints`]). Equal to `select::select_level` by construction
//!   (same sets, same order); tests/gpu_vs_cpu.rs checks it bit for bit.
//! - No budget (`max_keypoints: 0`): every candidate is kept; the GPU orients all of them and
//!   the host converts them ([`push_keypoints`]).
//! - `select.spread: grid | quadtree` with a budget (also ORB-SLAM3's per-cell detection,
//!   whose candidates come from `Detector::run_cells`): still on the host. Both are sequential,
//!   data-dependent procedures (round-robin over cells; ORB-SLAM3's quadtree splitting) that
//!   need every candidate with its response, so every candidate is downloaded (with its angle,
//!   computed on the GPU, to avoid a second round trip) and the CPU reference's own
//!   `select::select_level` runs on them ([`Selector::assemble`]).

use super::driver::buffers::DevBuf;
use super::driver::{DevPtr, Launch};
use super::fast_harris::{Candidate, Detector, Records};
use super::kernels::params::{SelParams, SEL_MAX_LEVELS};
use super::pyramid::Pyramid;
use super::Gpu;
use crate::config::{Config, DetectorMethod, ScoreType};
use crate::error::{Error, Result};
use crate::features::Keypoint;
use crate::select::{self, Corner};

/// Device buffers of the GPU selection, sized once per resolution.
pub struct Selector {
    sel_idx: DevBuf<u32>,
    kept: DevBuf<u32>,
    /// The kept records (four words each, as the candidates').
    kp: DevBuf<[u32; 4]>,
    kp_header: DevBuf<u32>,
    /// `features_per_level` of the last config.
    budgets: select::LevelBudgets,
    /// The host selection's buffers ([`Selector::assemble`]).
    host: HostScratch,
}

impl Selector {
    pub fn new(gpu: &Gpu, det: &Detector) -> Result<Self> {
        let c = &gpu.ctx;
        let (nlev, cap) = (det.nlev(), det.out_cap().max(1));
        if nlev > SEL_MAX_LEVELS {
            return Err(Error::Cuda(format!(
                "{nlev} pyramid levels (at most {SEL_MAX_LEVELS})"
            )));
        }
        Ok(Selector {
            sel_idx: DevBuf::new(c, cap)?,
            kept: DevBuf::new(c, nlev.max(1))?,
            kp: DevBuf::new(c, cap)?,
            kp_header: DevBuf::new(c, 1 + 2 * nlev)?,
            budgets: select::LevelBudgets::default(),
            host: HostScratch::default(),
        })
    }

    /// ORB's per-level budget for `cfg` (cached: recomputed only when the config changes).
    pub fn per_level(&mut self, cfg: &Config, nlev: usize) -> &[usize] {
        self.budgets.get(cfg, nlev)
    }

    /// The most records the selection can produce (the sum of the per-level budgets).
    pub fn max_kept(&self) -> usize {
        self.budgets.last().iter().sum()
    }

    pub fn header_ptr(&self) -> DevPtr<u32> {
        self.kp_header.ptr()
    }
    pub fn kp_ptr(&self) -> DevPtr<[u32; 4]> {
        self.kp.ptr()
    }

    /// Queues `select_level` and `orient_kept` after the detector (no sync). Call
    /// [`Selector::per_level`] for this config first. `orient`: compute the kept corners'
    /// angles here (else -1, or the descriptor kernel computes them: `describe::Angles`).
    pub fn run(
        &self,
        gpu: &Gpu,
        pyr: &Pyramid,
        det: &Detector,
        cfg: &Config,
        orient: bool,
    ) -> Result<()> {
        let nlev = det.nlev();
        let mut p = SelParams {
            n: [0; SEL_MAX_LEVELS],
        };
        for (d, &n) in p.n.iter_mut().zip(self.budgets.last()) {
            *d = n.min(u32::MAX as usize / 2) as u32;
        }
        let precut = (cfg.detector.method == DetectorMethod::Fast
            && cfg.detector.score == ScoreType::Harris) as i32;
        let (header, cand) = (det.header_ptr(), det.out_ptr());
        let (sel_idx, kept) = (self.sel_idx.ptr(), self.kept.ptr());
        let nlev_i = nlev as i32;
        // SAFETY: `select_level`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.select.select_level(
                gpu,
                Launch::new((nlev as u32, 1, 1), (1024, 1, 1)),
                header,
                nlev_i,
                p,
                precut,
                cand,
                sel_idx,
                kept,
            )
        }?;
        // One warp per kept corner (its orientation), 8 per block.
        let warps = 8usize;
        let most = self.budgets.last().iter().copied().max().unwrap_or(0);
        let blocks_y = most.div_ceil(warps).clamp(1, 65535) as u32;
        let (pyr_p, descs) = (pyr.buf.ptr(), det.descs_ptr());
        let orient = orient as i32;
        let half = det.half();
        let umax = det.umax_ptr();
        let atan = super::fast_harris::atan_coefficients();
        let eps = f64::EPSILON as f32;
        let (kp, kp_header) = (self.kp.ptr(), self.kp_header.ptr());
        // SAFETY: `orient_kept`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.select.orient_kept(
                gpu,
                Launch::new((nlev as u32, blocks_y, 1), (32 * warps as u32, 1, 1)),
                pyr_p,
                descs,
                nlev_i,
                header,
                kept,
                sel_idx,
                cand,
                orient,
                half,
                umax,
                atan,
                eps,
                kp,
                kp_header,
            )
        }
    }

    /// Queues `copy_results` (kernels/select.cu, [`Detector::copy_to_host`]): the header and
    /// the kept records (at most `records`) and, with `desc` (the device's descriptors and
    /// the device address of their pinned host copy), their descriptors, straight into the
    /// pinned buffers that the host reads after its sync. `false`, nothing queued, where
    /// those buffers are not mapped: the caller downloads them.
    pub fn copy_results(
        &self,
        gpu: &Gpu,
        det: &Detector,
        records: usize,
        desc: Option<(Records, Option<Records>)>,
    ) -> Result<bool> {
        let desc = match desc {
            None => None,
            Some((d, Some(h))) => Some((d, h)),
            Some((_, None)) => return Ok(false),
        };
        let (header, kp) = (self.kp_header.ptr(), self.kp.ptr());
        det.copy_to_host(gpu, header, kp, records, desc)
    }
}

/// Appends the downloaded records (`records` of them, levels one after the other, (y, x)
/// order inside a level) to `out` as level-0 keypoints, exactly as `select::to_keypoint`.
pub fn push_keypoints(
    cfg: &Config,
    det: &Detector,
    scales: &[f32],
    records: usize,
    out: &mut Vec<Keypoint>,
) {
    for (level, &scale) in scales.iter().enumerate().take(det.nlev()) {
        let (count, base) = det.level_range(level, records);
        out.reserve(count);
        for i in base..base + count {
            let c = det.record(i);
            out.push(Keypoint {
                x: c.x() as f32 * scale,
                y: c.y() as f32 * scale,
                response: c.response,
                size: select::keypoint_size(cfg, scale),
                angle: if cfg.orient.enabled { c.angle } else { -1.0 },
                octave: level as i32,
            });
        }
    }
}

/// The host selection's buffers (one level's downloaded candidates and their corners), kept
/// by [`Selector`] from frame to frame.
#[derive(Default)]
pub struct HostScratch {
    candidates: Vec<Candidate>,
    corners: Vec<Corner>,
}

impl Selector {
    /// The host selection for the spread modes: every candidate was downloaded (raster
    /// order, FAST score, response, angle); runs the CPU reference's `select_level` on them,
    /// in the CPU's level loop order, so the selected set is the CPU's by construction. In
    /// the selector's buffers: no allocation once they have grown.
    pub fn assemble(
        &mut self,
        cfg: &Config,
        det: &Detector,
        levels: &[(usize, usize)],
        records: usize,
        out: &mut Vec<Keypoint>,
    ) {
        let budget = cfg.select.max_keypoints as usize;
        let per_level = self.budgets.get(cfg, levels.len());
        let HostScratch {
            candidates: lc,
            corners,
        } = &mut self.host;
        for (level, &(w, h)) in levels.iter().enumerate() {
            let (count, base) = det.level_range(level, records);
            lc.clear();
            lc.extend((base..base + count).map(|i| det.record(i)));
            corners.clear();
            corners.extend(lc.iter().map(|c| Corner {
                x: c.x(),
                y: c.y(),
                fast_score: c.fast_score as u8,
                response: c.fast_score as f32,
            }));
            // Candidates are in raster order, so (y, x) keys are sorted: binary search.
            let find = |c: &Corner| {
                let key = c.x | c.y << 16;
                &lc[lc.binary_search_by_key(&key, |k| k.xy).expect("candidate")]
            };
            let n = (budget > 0).then_some(per_level[level]);
            select::select_level(cfg, corners, n, w, h, |c| find(c).response);
            for c in corners.iter() {
                let angle = if cfg.orient.enabled {
                    find(c).angle
                } else {
                    -1.0
                };
                out.push(select::to_keypoint(cfg, level, c, angle));
            }
        }
    }
}
