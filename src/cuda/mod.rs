//! CUDA backend (cudarc with dynamic loading; kernels compiled by NVRTC at start-up and cached
//! on disk). Each stage mirrors `src/cpu/<stage>.rs`:
//!
//! | stage | kernels | host side |
//! |---|---|---|
//! | decode | `decode.cu` | [`decode`] |
//! | pyramid | `pyramid.cu` | [`pyramid`] |
//! | fast + nms + harris score | `fast_harris.cu` (fused) | [`fast_harris`] |
//! | ordered compaction | `compact.cu` | [`fast_harris`] |
//! | orientation | `orient.cu` (fused into the gather) | [`fast_harris`] |
//! | budget + spread | — (host, CPU reference functions) | [`select`] |
//! | canny (+ blur, hysteresis) | `canny.cu` | [`canny`] |
//!
//! Per frame: one pinned upload, kernels on one stream, and one final download (edges,
//! candidate header, then the candidates). Buffers are sized once per resolution/config
//! and reused; no allocation, no compile and no other host sync happens per frame (the
//! pinned candidate buffer grows, once, if a frame has more candidates than any before).
//!
//! Not on the GPU yet: dense Harris (`detector.method: harris`) and the ORB-SLAM3 per-cell
//! low-threshold retry (`detector.low_threshold_retry`). For those configs the pyramid is
//! downloaded with the other results and the CPU reference detects on it, so every valid
//! config gives the CPU's answer on this backend too.

/// Kernel argument list: `kargs![a, b, c]` -> `[*mut c_void; 3]` pointing at the variables
/// (locals only, so that they outlive the launch call).
macro_rules! kargs {
    ($($a:ident),* $(,)?) => {
        [$( &$a as *const _ as *mut ::std::ffi::c_void ),*]
    };
}

pub mod buffers;
pub mod canny;
pub mod context;
pub mod decode;
pub mod fast_harris;
pub mod pyramid;
pub mod select;

use std::time::Instant;

use cudarc::driver::{sys, CudaEvent};

use self::buffers::{download, HostBuf};
pub use self::context::{Gpu, ModuleInfo};
use crate::config::{Config, DetectorMethod, Interpolation};
use crate::error::Result;
use crate::image::{Encoding, GrayImage, ImageView};
use crate::pipeline::{Features, StageTiming};

/// Everything that decides buffer sizes; a change reallocates (rare).
#[derive(Clone, Debug, PartialEq)]
struct StateKey {
    width: usize,
    height: usize,
    step: usize,
    encoding: Encoding,
    levels: usize,
    scale_bits: u32,
    interpolation: Interpolation,
    detect: bool,
    nms: bool,
    patch_size: u32,
    canny: bool,
    blur: (u32, u64),
}

impl StateKey {
    fn new(cfg: &Config, frame: &ImageView) -> Self {
        let detect = cfg.detector.method != DetectorMethod::None;
        StateKey {
            width: frame.width(),
            height: frame.height(),
            step: frame.step(),
            encoding: frame.encoding(),
            levels: if detect {
                cfg.pyramid.levels as usize
            } else {
                1
            },
            scale_bits: cfg.pyramid.scale_factor.to_bits(),
            interpolation: cfg.pyramid.interpolation,
            detect,
            nms: cfg.detector.nonmax_suppression,
            patch_size: cfg.orient.patch_size,
            canny: cfg.canny.enabled,
            blur: (cfg.canny.blur_ksize, cfg.canny.blur_sigma.to_bits()),
        }
    }
}

struct State {
    key: StateKey,
    decoder: decode::Decoder,
    pyr: pyramid::Pyramid,
    det: Option<fast_harris::Detector>,
    canny: Option<canny::Canny>,
    /// Pinned copy of the whole pyramid, for the configs detected on the host.
    host_pyr: Option<HostBuf>,
}

/// Stage boundaries, recorded as CUDA events on the stream.
const MARKS: [&str; 6] = ["start", "decode", "pyramid", "detect", "canny", "download"];

pub struct CudaPipeline {
    gpu: Gpu,
    state: Option<State>,
    events: Vec<CudaEvent>,
}

impl CudaPipeline {
    /// Opens the GPU and compiles (or loads) the kernels; a clear `Error::Cuda` when there
    /// is no driver, no device, no libnvrtc, or the kernels do not compile.
    pub fn new() -> Result<Self> {
        let gpu = Gpu::new()?;
        let mut events = Vec::new();
        for _ in MARKS {
            events.push(
                gpu.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| context::cuda_err("creating an event", e))?,
            );
        }
        Ok(CudaPipeline {
            gpu,
            state: None,
            events,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn ensure_state(&mut self, cfg: &Config, frame: &ImageView) -> Result<()> {
        let key = StateKey::new(cfg, frame);
        if self.state.as_ref().is_some_and(|s| s.key == key) {
            return Ok(());
        }
        self.state = None; // free the old buffers first
        let g = &self.gpu;
        let (w, h) = (frame.width(), frame.height());
        let pyr = pyramid::Pyramid::new(
            g,
            w,
            h,
            key.levels,
            cfg.pyramid.scale_factor,
            cfg.pyramid.interpolation,
        )?;
        let det = if key.detect {
            Some(fast_harris::Detector::new(
                g,
                &pyr,
                key.nms,
                key.patch_size,
            )?)
        } else {
            None
        };
        let canny = if key.canny {
            Some(canny::Canny::new(g, w, h, &cfg.canny)?)
        } else {
            None
        };
        let host_pyr = if key.detect {
            Some(HostBuf::new(&g.ctx, pyr.buf.bytes(), false)?)
        } else {
            None
        };
        self.state = Some(State {
            key,
            decoder: decode::Decoder::new(g, frame)?,
            pyr,
            det,
            canny,
            host_pyr,
        });
        Ok(())
    }

    /// Test/debug helper: the pyramid of the last frame, downloaded synchronously (not part
    /// of the per-frame path).
    pub fn download_levels(&mut self) -> Result<Vec<GrayImage>> {
        self.gpu.bind()?;
        let Some(st) = &self.state else {
            return Ok(Vec::new());
        };
        self.gpu.sync()?;
        let mut out = Vec::new();
        for l in &st.pyr.levels {
            let mut img = GrayImage::new(l.w, l.h);
            if !img.data.is_empty() {
                unsafe {
                    cudarc::driver::result::memcpy_dtoh_sync(
                        &mut img.data,
                        st.pyr.buf.ptr() + l.off as u64,
                    )
                }
                .map_err(|e| context::cuda_err("downloading the pyramid", e))?;
            }
            out.push(img);
        }
        Ok(out)
    }

    /// Runs every enabled stage on one frame.
    /// [`CudaPipeline::process`] into `out`.
    // TODO(gpu): reuse `out`'s buffers instead of replacing them.
    pub fn process_into(
        &mut self,
        cfg: &Config,
        frame: &ImageView,
        out: &mut Features,
    ) -> Result<()> {
        *out = self.process(cfg, frame)?;
        Ok(())
    }

    pub fn process(&mut self, cfg: &Config, frame: &ImageView) -> Result<Features> {
        self.gpu.bind()?;
        self.ensure_state(cfg, frame)?;
        let gpu = &self.gpu;
        let st = self.state.as_mut().expect("state");
        // Dense Harris and the per-cell retry run on the host from the GPU's pyramid.
        let host_detect = st.key.detect
            && (cfg.detector.method == DetectorMethod::Harris || cfg.detector.low_threshold_retry);

        self.events[0]
            .record(&gpu.stream)
            .map_err(|e| context::cuda_err("recording an event", e))?;
        let gray = st.pyr.level_ptr(0);
        st.decoder.run(gpu, frame, gray)?;
        mark(&self.events[1], gpu)?;
        st.pyr.run(gpu)?;
        mark(&self.events[2], gpu)?;
        if let (Some(det), false) = (&st.det, host_detect) {
            det.run(gpu, &st.pyr, cfg)?;
        }
        mark(&self.events[3], gpu)?;
        if let Some(c) = st.canny.as_mut() {
            c.run(gpu, gray, &cfg.canny)?;
        }
        mark(&self.events[4], gpu)?;

        // The final download: edges, candidate header (and the pyramid for host detection).
        if let Some(c) = st.canny.as_mut() {
            c.download(gpu)?;
        }
        if host_detect {
            let hp = st.host_pyr.as_mut().expect("host pyramid");
            let n = st.pyr.buf.bytes();
            download(&gpu.stream, st.pyr.buf.ptr(), hp, 0, n)?;
        } else if let Some(det) = st.det.as_mut() {
            det.download_header(gpu)?;
        }
        gpu.sync()?;
        let cands = match (&mut st.det, host_detect) {
            (Some(det), false) => Some(det.download_candidates(gpu)?),
            _ => None,
        };
        mark(&self.events[5], gpu)?;
        gpu.sync()?;

        let t_host = Instant::now();
        let level_sizes: Vec<(usize, usize)> = st.pyr.levels.iter().map(|l| (l.w, l.h)).collect();
        let keypoints = if host_detect {
            let hp = st.host_pyr.as_ref().expect("host pyramid").as_slice();
            let levels: Vec<GrayImage> = st
                .pyr
                .levels
                .iter()
                .map(|l| GrayImage {
                    width: l.w,
                    height: l.h,
                    data: hp[l.off..l.off + l.w * l.h].to_vec(),
                })
                .collect();
            crate::cpu::detect_keypoints(cfg, &levels)
        } else if let (Some(det), Some(cands)) = (&st.det, cands) {
            select::assemble(cfg, &level_sizes, &det.level_ranges(), &cands)
        } else {
            Vec::new()
        };
        let host_ms = t_host.elapsed().as_secs_f64() * 1e3;
        let edges = st.canny.as_ref().map(|c| GrayImage {
            width: st.key.width,
            height: st.key.height,
            data: c.edges_host().to_vec(),
        });

        let mut timings = Vec::with_capacity(MARKS.len());
        for (pair, &stage) in self.events.windows(2).zip(&MARKS[1..]) {
            let ms = pair[0]
                .elapsed_ms(&pair[1])
                .map_err(|e| context::cuda_err("reading an event", e))?;
            timings.push(StageTiming {
                stage,
                ms: ms as f64,
            });
        }
        timings.push(StageTiming {
            stage: "select (host)",
            ms: host_ms,
        });
        Ok(Features {
            keypoints,
            edges,
            level_sizes,
            timings,
        })
    }
}

fn mark(e: &CudaEvent, gpu: &Gpu) -> Result<()> {
    e.record(&gpu.stream)
        .map_err(|e| context::cuda_err("recording an event", e))
}
