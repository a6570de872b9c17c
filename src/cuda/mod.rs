//! CUDA backend (cudarc with dynamic loading; kernels compiled by NVRTC at start-up and cached
//! on disk), in three layers, each importing only the ones below it (`tests/architecture.rs`):
//!
//! 1. [`driver`]: the device, context, streams and module, device and pinned buffers
//!    (`DevBuf<T>`, `HostBuf`), the one raw launch (an `unsafe fn` with its contract), graphs,
//!    the frame staging;
//! 2. `kernels`: a typed wrapper per kernel, grouped by stage, and the `#[repr(C)]` mirrors
//!    of the kernels' structs; a test checks every wrapper against its `__global__`
//!    signature in kernels/*.cu;
//! 3. the stages, which own their buffers and call the wrappers ([`Gpu`] is the session:
//!    the device with its kernels).
//!
//! Each stage mirrors `src/cpu/<stage>.rs`:
//!
//! | stage | kernels | host side |
//! |---|---|---|
//! | decode | `decode.cu` | [`decode`] |
//! | pyramid | `pyramid.cu` | `pyramid` |
//! | fast + nms + harris score | `fast_harris.cu` (fused) | `fast_harris` |
//! | per-cell fast with the low-threshold retry (ORB-SLAM3) | `fast_harris.cu` (`fast_cells`, `cell_filter`) | `fast_harris` |
//! | dense harris + nms + quality | `harris.cu` | `harris` |
//! | ordered compaction | `compact.cu` | `fast_harris` |
//! | orientation | `orient.cu` (fused into the gather), `select.cu`, `describe.cu` (kept corners, with descriptors) | `fast_harris`, `select`, `describe` |
//! | budget (spread none) | `select.cu` | `select` |
//! | spread grid / quadtree | — (host, CPU reference functions) | `select` |
//! | canny (+ blur, hysteresis) | `canny.cu` | [`canny`] |
//! | ORB descriptors (patch blur + rBRIEF of the kept keypoints, one kernel) | `describe.cu` | `describe` |
//! | LK flow pyramid, Scharr derivatives, pyramidal LK (the tracker) | `lk.cu` | [`lk`] |
//! | goodFeaturesToTrack (min-eigenvalue map in `harris.cu` mode 1, selection) | `gftt.cu` | [`gftt`] |
//!
//! Per frame: one pinned upload (of the caller's frame copied in pieces, or of a frame
//! written into [`CudaPipeline::input_buffer`]; with `cuda.zero_copy` no upload: the decode
//! kernel reads the mapped input buffer in place), kernels on the pipeline's stream, and one
//! final download (the selected keypoints and their per-level header: one host sync). With
//! `cuda.graphs` and the GPU selection, everything after the decode is replayed from two
//! CUDA graphs ([`driver::graph`]), recorded on the first frame of a resolution and config.
//! Canny runs on a second stream ([`driver::Device::side`]) right after the decode, beside the pyramid
//! and the detection; its blocks go before the detection's, and while a frame is the only
//! one in flight its pyramid's before both ([`driver::Device::pyramid_priority`]). Its edge map
//! (packed to 1 bit per pixel) is downloaded at once: the host waits on that download's
//! event and unpacks the map into `Features::edges` (with the threads of [`driver::crew`]) while the
//! GPU still runs the detection and the selection. Buffers are sized once per
//! resolution/config and reused; no allocation and no compile happens per frame. Without
//! the GPU selection (no budget, or a spread mode) the candidate count is not known in
//! advance: the header is downloaded first (one more sync), then the candidates.
//!
//! ORB-SLAM3's per-cell FAST with the low-threshold retry (`detector.low_threshold_retry`,
//! `cpu::cells::fast_in_cells`) runs on the GPU too (`fast_harris::Detector::run_cells`):
//! one scoring pass at the lower threshold, NMS within each cell, per-cell flags and a
//! per-tile filter; only its candidates are downloaded, never the pyramid.
//!
//! Still on the host: the grid and quadtree spreads (from the downloaded candidates, with the
//! CPU reference's own functions).
//!
//! May import: `config`, `cpu`, `error`, `features`, `image`, `levels`, `matching`, `select`
//! (`cpu` for reference tables and the fallback; `matching::keys`, the neighbour keys the GPU
//! matcher shares).

pub mod canny;
mod cells;
pub mod decode;
mod describe;
pub mod driver;
mod fast_harris;
mod frame;
pub mod gftt;
mod gpu;
mod harris;
mod in_flight;
mod kept;
mod kernels;
pub mod lk;
pub mod matcher;
mod pyramid;
mod queue;
mod select;
mod state;
#[cfg(test)]
mod test_images;

use cudarc::driver::{sys, CudaEvent};

pub use self::driver::{device, device_count, set_device, ModuleInfo};
pub use self::gpu::Gpu;
pub use self::kept::{AfterDecode, DeviceGray, KeptGray};
use self::state::{State, StateKey};
use crate::config::{Config, ZeroCopy};
use crate::error::Result;
use crate::features::Features;
use crate::image::{FrameLayout, GrayImage, ImageView};

/// Stage boundaries, recorded as CUDA events: on the pipeline's stream, but "canny" (the
/// end of Canny and of its edge-map download) on the side stream.
const MARKS: [&str; 8] = [
    "start", "decode", "canny", "pyramid", "detect", "select", "describe", "download",
];

/// Each stage of `MARKS[1..]` as (start mark, end mark): Canny and the pyramid both start
/// at the decode's end, and the pyramid's time is its own (the main stream does not wait
/// for Canny).
const STAGE_SPANS: [(usize, usize); 7] = [(0, 1), (1, 2), (1, 3), (3, 4), (4, 5), (5, 6), (6, 7)];

/// The event after the main graph on the frames that time the GPU's work after the decode
/// as a whole ([`crate::features::AFTER_DECODE_STAGE`]), after the stage marks.
const SPAN_END: usize = MARKS.len();

pub struct CudaPipeline {
    /// The pipeline's GPU session (context, streams, kernels), shared with the feature
    /// tracker of the same frames ([`CudaPipeline::session`]).
    gpu: std::sync::Arc<Gpu>,
    /// The input's staging and upload buffers, per frame layout (not per config: a frame
    /// written into [`CudaPipeline::input_buffer`] survives a config change).
    decoder: Option<decode::Decoder>,
    state: Option<State>,
    events: Vec<CudaEvent>,
    /// Canny was queued on the side stream and the host has not waited for it yet.
    side_pending: bool,
    /// Frames run so far (which of them time their stages: `cuda.stage_timings`).
    frames: u64,
    /// The last frame ran to its end: its gray image is on the device ([`CudaPipeline::gray_on_device`]).
    gray_ready: bool,
    /// Four bytes that [`CudaPipeline::warm`] sets.
    warm_buf: driver::DevBuf<u8>,
}

impl CudaPipeline {
    /// Opens the GPU and compiles (or loads) the kernels; a clear `Error::Cuda` when there
    /// is no driver, no device, no libnvrtc, or the kernels do not compile.
    pub fn new() -> Result<Self> {
        let gpu = std::sync::Arc::new(Gpu::new()?);
        let mut events = Vec::new();
        for _ in 0..=SPAN_END {
            events.push(
                gpu.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| driver::cuda_err("creating an event", e))?,
            );
        }
        let warm_buf = driver::DevBuf::new(&gpu.ctx, 4)?;
        Ok(CudaPipeline {
            gpu,
            warm_buf,
            decoder: None,
            state: None,
            events,
            side_pending: false,
            frames: 0,
            gray_ready: false,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The pipeline's GPU session, for the stages that run on the same frames outside it
    /// (the feature tracker: `Tracker::for_pipeline`): one context, one set of compiled
    /// kernels, and its work queued on the same streams, after the frame's.
    pub fn session(&self) -> std::sync::Arc<Gpu> {
        self.gpu.clone()
    }

    /// One small round trip to the GPU: a 4-byte memset on the pipeline's stream, and the
    /// wait for it. Made shortly before a frame is due (`cuda.warm_ahead_us`), it wakes the
    /// driver and the GPU from the idle spell between a camera's frames, so that the frame's
    /// own calls run nearer their back-to-back speed (examples/paced_floor.rs;
    /// docs/performance.md, change 79). Between frames only: it waits for the stream.
    pub fn warm(&mut self) -> Result<()> {
        self.gpu.bind()?;
        self.warm_buf.fill_async(&self.gpu.stream, 0..4, 0)?;
        self.gpu.sync()
    }

    /// Whether `cfg` maps the input buffer (`cuda.zero_copy`) on this GPU.
    fn zero_copy(&self, cfg: &Config) -> Result<bool> {
        let g = &self.gpu;
        match cfg.cuda.zero_copy {
            ZeroCopy::Off => Ok(false),
            ZeroCopy::Auto => Ok(g.integrated && g.can_map_host),
            ZeroCopy::On if g.can_map_host => Ok(true),
            ZeroCopy::On => Err(crate::Error::Config(format!(
                "cuda.zero_copy: on, but the {} cannot map host memory (use auto or off)",
                g.name
            ))),
        }
    }

    /// A decoder for `layout`, mapped or not as `cfg` says. A staged frame moves into the
    /// new buffer when only the mapping changes (a config change keeps the input buffer).
    fn ensure_decoder(&mut self, cfg: &Config, layout: FrameLayout) -> Result<()> {
        let mapped = self.zero_copy(cfg)?;
        match &self.decoder {
            Some(d) if d.layout() == layout && d.mapped() == mapped => return Ok(()),
            Some(d) if d.layout() == layout => {
                let mut new = decode::Decoder::new(&self.gpu, layout, mapped)?;
                if let Some(frame) = d.staged() {
                    new.staging().copy_from_slice(frame);
                }
                self.decoder = Some(new);
                return Ok(());
            }
            _ => {}
        }
        self.decoder = None; // free the old buffers first
        self.decoder = Some(decode::Decoder::new(&self.gpu, layout, mapped)?);
        Ok(())
    }

    fn ensure_state(&mut self, cfg: &Config, frame: FrameLayout) -> Result<()> {
        let key = StateKey::new(cfg, frame);
        if self.state.as_ref().is_some_and(|s| s.key == key) {
            return Ok(());
        }
        self.state = None; // free the old buffers first
        self.state = Some(State::new(&self.gpu, cfg, frame, key)?);
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
            st.pyr.buf.copy_to_sync(l.off, &mut img.data)?;
            out.push(img);
        }
        Ok(out)
    }

    /// Runs every enabled stage on one frame.
    pub fn process(&mut self, cfg: &Config, frame: &ImageView) -> Result<Features> {
        let mut out = Features::default();
        self.process_into(cfg, frame, &mut out)?;
        Ok(out)
    }

    /// [`CudaPipeline::process`] into `out`, reusing its buffers (keypoints, edge map, level
    /// sizes, timings): after the first frame of a resolution nothing is allocated, on the
    /// host or the device, for the ORB path (FAST + Harris score, `spread: none`).
    pub fn process_into(
        &mut self,
        cfg: &Config,
        frame: &ImageView,
        out: &mut Features,
    ) -> Result<()> {
        self.process_edges_into(cfg, frame, out, None).map(|_| ())
    }

    /// [`CudaPipeline::process_into`], the edge map unpacked into `edges` (the frame's
    /// `width * height` bytes) when given, `out.edges` then None; Ok(true) when a map was
    /// written there (Canny ran). See `Pipeline::process_into_edges`.
    pub fn process_edges_into(
        &mut self,
        cfg: &Config,
        frame: &ImageView,
        out: &mut Features,
        edges: Option<&mut [u8]>,
    ) -> Result<bool> {
        self.process_edges_then(cfg, frame, out, edges, None)
    }

    /// [`CudaPipeline::process_edges_into`], calling `after_decode` with the frame's gray
    /// image on the device once the decode and the detection are queued: what it queues on
    /// the tracker's stream (`gpu.track`, which waits for the decode) runs beside the
    /// detection, and the image stays as it is until this pipeline's next frame.
    pub fn process_edges_then(
        &mut self,
        cfg: &Config,
        frame: &ImageView,
        out: &mut Features,
        edges: Option<&mut [u8]>,
        after_decode: Option<AfterDecode>,
    ) -> Result<bool> {
        self.gpu.bind()?;
        self.ensure_decoder(cfg, frame.layout())?;
        let source = decode::Source::Copy(frame.data());
        self.run(cfg, source, out, edges, after_decode)
    }

    /// The pinned staging buffer for a frame of `layout` (`layout.bytes()` long, allocated
    /// when the layout changes): a frame written here is processed by
    /// [`CudaPipeline::process_staged_into`] without the copy that `process_into` makes.
    pub fn input_buffer(&mut self, cfg: &Config, layout: FrameLayout) -> Result<&mut [u8]> {
        self.gpu.bind()?;
        self.ensure_decoder(cfg, layout)?;
        Ok(self.decoder.as_mut().expect("decoder").staging())
    }

    /// The frame in the input buffer ([`CudaPipeline::input_buffer`]), if one was asked for.
    pub fn staged_frame(&self) -> Option<ImageView<'_>> {
        let d = self.decoder.as_ref()?;
        let l = d.layout();
        ImageView::with_encoding(
            d.staged()?,
            l.width,
            l.height,
            l.step,
            l.encoding,
            l.big_endian,
        )
        .ok()
    }

    /// [`CudaPipeline::process_into`] on the frame in the input buffer.
    pub fn process_staged_into(&mut self, cfg: &Config, out: &mut Features) -> Result<()> {
        self.gpu.bind()?;
        // `cuda.zero_copy` may have changed since the frame was written: the frame moves.
        if let Some(layout) = self.decoder.as_ref().map(|d| d.layout()) {
            self.ensure_decoder(cfg, layout)?;
        }
        self.run(cfg, decode::Source::Staged, out, None, None)
            .map(|_| ())
    }

    /// [`CudaPipeline::run_frame`], noting whether its gray image is on the device after.
    fn run(
        &mut self,
        cfg: &Config,
        source: decode::Source,
        out: &mut Features,
        edges: Option<&mut [u8]>,
        after_decode: Option<AfterDecode>,
    ) -> Result<bool> {
        self.gray_ready = false;
        let r = self.run_frame(cfg, source, out, edges, after_decode);
        self.gray_ready = r.is_ok();
        r
    }
}
