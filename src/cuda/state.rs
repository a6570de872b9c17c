//! What the CUDA pipeline keeps per resolution and config: every stage's buffers
//! ([`State`]), sized once when the [`StateKey`] changes, and the CUDA graphs recorded for it.

use super::driver::graph;
use super::Gpu;
use super::{canny, describe, fast_harris, harris, pyramid, select};
use crate::config::{Config, DescriptorBlur, DetectorMethod, Interpolation, Scales};
use crate::error::Result;
use crate::image::{Encoding, FrameLayout};

/// Everything that decides buffer sizes; a change reallocates (rare).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct StateKey {
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) step: usize,
    pub(super) encoding: Encoding,
    pub(super) levels: usize,
    pub(super) scale_bits: u32,
    pub(super) interpolation: Interpolation,
    pub(super) scales: Scales,
    pub(super) detect: bool,
    pub(super) dense: bool,
    /// Slots per detection tile (`fast_harris::slot_cap`: NMS, per-cell detection).
    pub(super) cap: usize,
    pub(super) patch_size: u32,
    pub(super) canny: bool,
    pub(super) blur: (u32, u64),
    pub(super) describe: bool,
    /// `describe.blur` and `describe.fma` (the descriptor stage keeps them).
    pub(super) describe_blur: (DescriptorBlur, bool),
}

impl StateKey {
    pub(super) fn new(cfg: &Config, frame: FrameLayout) -> Self {
        let detect = cfg.detector.method != DetectorMethod::None;
        StateKey {
            width: frame.width,
            height: frame.height,
            step: frame.step,
            encoding: frame.encoding,
            levels: if detect {
                cfg.pyramid.levels as usize
            } else {
                1
            },
            scale_bits: cfg.pyramid.scale_factor.to_bits(),
            interpolation: cfg.pyramid.interpolation,
            scales: cfg.pyramid.scales,
            detect,
            dense: cfg.detector.method == DetectorMethod::Harris,
            cap: fast_harris::slot_cap(
                cfg.detector.nonmax_suppression,
                cells(cfg).then_some(cfg.select.cell_size),
            ),
            patch_size: cfg.orient.patch_size,
            canny: cfg.canny.enabled,
            blur: (cfg.canny.blur_ksize, cfg.canny.blur_sigma.to_bits()),
            describe: detect && cfg.describe.enabled,
            describe_blur: (cfg.describe.blur, cfg.describe.fma),
        }
    }
}

pub(super) struct State {
    /// First, so that the graphs go before the buffers they name.
    pub(super) graphs: Option<Graphs>,
    pub(super) key: StateKey,
    pub(super) pyr: pyramid::Pyramid,
    pub(super) det: Option<fast_harris::Detector>,
    pub(super) sel: Option<select::Selector>,
    pub(super) dense: Option<harris::Dense>,
    /// ORB's scale of every level (`cpu::pyramid::level_scale`).
    pub(super) scales: Vec<f32>,
    pub(super) canny: Option<canny::Canny>,
    pub(super) describe: Option<describe::Describer>,
}

/// The frame's launches after the decode as CUDA graphs (`cuda.graphs`), recorded for `cfg`
/// (its values are in the kernels' arguments): recorded again when the config changes.
pub(super) struct Graphs {
    pub(super) cfg: Config,
    /// The main stream's graphs, `main[prioritized][timed]`: with the pyramid's launches at
    /// their own priority or at the stream's ([`InFlight`]), without and with the stage
    /// events (`cuda.stage_timings`); each recorded on its first use.
    pub(super) main: [[Option<graph::Graph>; 2]; 2],
    pub(super) canny: Option<graph::Graph>,
}

impl State {
    /// Every buffer of a resolution and config, allocated once.
    pub(super) fn new(g: &Gpu, cfg: &Config, frame: FrameLayout, key: StateKey) -> Result<State> {
        let (w, h) = (frame.width, frame.height);
        let pyr = pyramid::Pyramid::new(
            g,
            w,
            h,
            key.levels,
            cfg.pyramid.scales,
            cfg.pyramid.scale_factor,
            cfg.pyramid.interpolation,
        )?;
        let det = if key.detect {
            Some(fast_harris::Detector::new(
                g,
                &pyr,
                key.cap,
                key.patch_size,
            )?)
        } else {
            None
        };
        let sel = match &det {
            Some(d) => Some(select::Selector::new(g, d)?),
            None => None,
        };
        let dense = if key.dense {
            Some(harris::Dense::new(g, &pyr)?)
        } else {
            None
        };
        let scales = (0..pyr.levels.len())
            .map(|l| {
                crate::cpu::pyramid::level_scale(cfg.pyramid.scales, cfg.pyramid.scale_factor, l)
            })
            .collect();
        let canny = if key.canny {
            Some(canny::Canny::new(g, w, h, &cfg.canny)?)
        } else {
            None
        };
        let describe = match (&det, key.describe) {
            (Some(d), true) => Some(describe::Describer::new(
                g,
                &pyr,
                d.out_cap(),
                crate::cpu::describe::DescribeSettings::from_config(cfg),
            )?),
            _ => None,
        };
        Ok(State {
            graphs: None,
            key,
            pyr,
            det,
            sel,
            dense,
            scales,
            canny,
            describe,
        })
    }
}

/// ORB-SLAM3's per-cell FAST with the low-threshold retry (`cpu::cells::fast_in_cells`).
pub(super) fn cells(cfg: &Config) -> bool {
    cfg.detector.method == DetectorMethod::Fast && cfg.detector.low_threshold_retry
}
