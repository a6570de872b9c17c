//! CUDA backend (cudarc with dynamic loading; kernels compiled by NVRTC at start-up and cached
//! on disk). Each stage mirrors `src/cpu/<stage>.rs`:
//!
//! | stage | kernels | host side |
//! |---|---|---|
//! | decode | `decode.cu` | [`decode`] |
//! | pyramid | `pyramid.cu` | [`pyramid`] |
//! | fast + nms + harris score | `fast_harris.cu` (fused) | [`fast_harris`] |
//! | per-cell fast with the low-threshold retry (ORB-SLAM3) | `fast_harris.cu` (`fast_cells`, `cell_filter`) | [`fast_harris`] |
//! | dense harris + nms + quality | `harris.cu` | [`harris`] |
//! | ordered compaction | `compact.cu` | [`fast_harris`] |
//! | orientation | `orient.cu` (fused into the gather), `select.cu`, `describe.cu` (kept corners, with descriptors) | [`fast_harris`], [`select`], [`describe`] |
//! | budget (spread none) | `select.cu` | [`select`] |
//! | spread grid / quadtree | — (host, CPU reference functions) | [`select`] |
//! | canny (+ blur, hysteresis) | `canny.cu` | [`canny`] |
//! | ORB descriptors (patch blur + rBRIEF of the kept keypoints, one kernel) | `describe.cu` | [`describe`] |
//! | LK flow pyramid, Scharr derivatives, pyramidal LK (the tracker) | `lk.cu` | [`lk`] |
//! | goodFeaturesToTrack (min-eigenvalue map in `harris.cu` mode 1, selection) | `gftt.cu` | [`gftt`] |
//!
//! Per frame: one pinned upload (of the caller's frame copied in pieces, or of a frame
//! written into [`CudaPipeline::input_buffer`]; with `cuda.zero_copy` no upload: the decode
//! kernel reads the mapped input buffer in place), kernels on the pipeline's stream, and one
//! final download (the selected keypoints and their per-level header: one host sync). With
//! `cuda.graphs` and the GPU selection, everything after the decode is replayed from two
//! CUDA graphs ([`graph`]), recorded on the first frame of a resolution and config.
//! Canny runs on a second stream ([`Gpu::side`]) right after the decode, beside the pyramid
//! and the detection; its blocks go before the detection's, and while a frame is the only
//! one in flight its pyramid's before both ([`Gpu::pyramid_priority`]). Its edge map
//! (packed to 1 bit per pixel) is downloaded at once: the host waits on that download's
//! event and unpacks the map into `Features::edges` (with the threads of [`crew`]) while the
//! GPU still runs the detection and the selection. Buffers are sized once per
//! resolution/config and reused; no allocation and no compile happens per frame. Without
//! the GPU selection (no budget, or a spread mode) the candidate count is not known in
//! advance: the header is downloaded first (one more sync), then the candidates.
//!
//! ORB-SLAM3's per-cell FAST with the low-threshold retry (`detector.low_threshold_retry`,
//! `cpu::cells::fast_in_cells`) runs on the GPU too ([`fast_harris::Detector::run_cells`]):
//! one scoring pass at the lower threshold, NMS within each cell, per-cell flags and a
//! per-tile filter; only its candidates are downloaded, never the pyramid.
//!
//! Still on the host: the grid and quadtree spreads (from the downloaded candidates, with the
//! CPU reference's own functions).
//!
//! May import: `config`, `cpu`, `error`, `features`, `image`, `levels`, `matching`, `select`
//! (`cpu` for reference tables and the fallback; `matching::keys`, the neighbour keys the GPU
//! matcher shares).

/// Kernel argument list: `kargs![a, b, c]` -> `[*mut c_void; 3]` pointing at the variables
/// (locals only, so that they outlive the launch call). Only the `unsafe` launches
/// ([`Gpu::launch`]) take it: whether the locals' types are the kernel's parameters is the
/// caller's promise, written beside each launch.
macro_rules! kargs {
    ($($a:ident),* $(,)?) => {
        [$( &$a as *const _ as *mut ::std::ffi::c_void ),*]
    };
}

pub mod buffers;
pub mod canny;
pub mod cells;
pub mod compile;
pub mod context;
pub mod crew;
pub mod decode;
pub mod describe;
pub mod fast_harris;
pub mod gftt;
pub mod graph;
pub mod harris;
mod in_flight;
mod kept;
pub mod lk;
pub mod matcher;
pub mod pyramid;
mod queue;
pub mod select;
pub mod sources;
pub mod staging;
mod state;
#[cfg(test)]
mod test_images;

use std::sync::atomic::Ordering;
use std::time::Instant;

use cudarc::driver::{result, sys, CudaEvent};

pub use self::context::{device, device_count, set_device, Gpu, ModuleInfo};
use self::in_flight::{InFlight, FRAMES_IN_FLIGHT};
pub use self::kept::KeptGray;
use self::queue::{mark, queue_canny, queue_main, Marks};
use self::state::{Graphs, State, StateKey};
use crate::config::{Config, Spread, ZeroCopy};
use crate::error::Result;
use crate::features::{Features, StageTiming};
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
}

/// A gray image on the device: `height` rows of `width` bytes, `pitch` bytes apart,
/// borrowed from its owner (a pipeline's last frame, valid until its next one, or a
/// [`KeptGray`]) for `'a`: the owner cannot run its next frame, or be dropped, while the
/// tracker reads it. Its address stays inside this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceGray<'a> {
    ptr: u64,
    width: usize,
    height: usize,
    pitch: usize,
    owner: std::marker::PhantomData<&'a ()>,
}

impl DeviceGray<'_> {
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn height(&self) -> usize {
        self.height
    }

    /// The device address (this module's kernels and copies only).
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }

    pub(crate) fn pitch(&self) -> usize {
        self.pitch
    }

    /// A handle to gray bytes at `ptr`, owned by nobody.
    ///
    /// # Safety
    /// Whoever reads through it must find `height` rows of `width` bytes, `pitch` apart, at
    /// `ptr` in this context for as long as it is used (tests hand a CPU tracker one that
    /// is never read).
    #[cfg(test)]
    pub(crate) unsafe fn from_raw(
        ptr: u64,
        width: usize,
        height: usize,
        pitch: usize,
    ) -> DeviceGray<'static> {
        DeviceGray {
            ptr,
            width,
            height,
            pitch,
            owner: std::marker::PhantomData,
        }
    }
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
                    .map_err(|e| context::cuda_err("creating an event", e))?,
            );
        }
        Ok(CudaPipeline {
            gpu,
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
        self.gpu.bind()?;
        self.ensure_decoder(cfg, frame.layout())?;
        self.run(cfg, decode::Source::Copy(frame.data()), out, edges)
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
        self.run(cfg, decode::Source::Staged, out, None).map(|_| ())
    }

    /// The last frame's gray image on the device (the pyramid's level 0, what the decode
    /// wrote), after a frame that ran to its end; valid until the next frame, which
    /// overwrites it. The feature tracker builds its pyramid from it instead of uploading
    /// the frame again (`Tracker::track_input`).
    pub fn gray_on_device(&self) -> Option<DeviceGray<'_>> {
        let st = self.state.as_ref().filter(|_| self.gray_ready)?;
        let l = st.pyr.levels.first()?;
        Some(DeviceGray {
            ptr: st.pyr.level_ptr(0),
            width: l.w,
            height: l.h,
            pitch: l.w,
            owner: std::marker::PhantomData,
        })
    }

    /// [`CudaPipeline::run_frame`], noting whether its gray image is on the device after.
    fn run(
        &mut self,
        cfg: &Config,
        source: decode::Source,
        out: &mut Features,
        edges: Option<&mut [u8]>,
    ) -> Result<bool> {
        self.gray_ready = false;
        let r = self.run_frame(cfg, source, out, edges);
        self.gray_ready = r.is_ok();
        r
    }

    /// Every stage on the frame from `source`; the decoder exists for its layout. The edge
    /// map goes into `edges` when given (Ok(true) when one was written), else `out.edges`.
    fn run_frame(
        &mut self,
        cfg: &Config,
        source: decode::Source,
        out: &mut Features,
        edges: Option<&mut [u8]>,
    ) -> Result<bool> {
        let in_flight = InFlight::enter();
        let layout = match &self.decoder {
            Some(d) => d.layout(),
            None => {
                return Err(crate::Error::Config(
                    "no frame in the input buffer: call input_buffer first".into(),
                ))
            }
        };
        if let Some(dst) = &edges {
            crate::features::check_edges_len(dst.len(), layout.width, layout.height)?;
        }
        self.ensure_state(cfg, layout)?;
        let gpu = &self.gpu;
        let ev = &self.events;
        let st = self.state.as_mut().expect("state");
        let budget = cfg.select.max_keypoints as usize;
        // The budget selection runs on the GPU for spread none; the spread modes on the host.
        let gpu_select = st.key.detect && budget > 0 && cfg.select.spread == Spread::None;

        // Canny runs first, right after the decode, and its packed edge map reaches the host
        // at once (uf_final writes it into mapped pinned memory, else a download follows):
        // the host unpacks it while the GPU runs the pyramid, the detection and the selection.
        ev[0]
            .record(&gpu.stream)
            .map_err(|e| context::cuda_err("recording an event", e))?;
        // A frame that failed after queueing Canny left the side stream running: the decode
        // must not overwrite level 0 under it.
        if self.side_pending {
            gpu.stream
                .wait(&ev[2])
                .map_err(|e| context::cuda_err("waiting for the side stream", e))?;
            self.side_pending = false;
        }
        gpu.set_programmatic_launch(cfg.cuda.programmatic_launch);
        let gray = st.pyr.level_ptr(0);
        let decoder = self.decoder.as_mut().expect("decoder");
        decoder.run(gpu, source, gray, cfg.cuda.host_gray)?;
        mark(&ev[1], gpu)?;
        // The graphs hold no host sync: only the GPU selection's path (the others size their
        // download from a first one).
        let use_graphs = cfg.cuda.graphs && gpu_select;
        // Only every N-th frame reads its stage events (seven reads took ~20 us of a frame,
        // run 57) and, with the graphs, replays the graph that holds the event nodes.
        let every = cfg.cuda.stage_timings as u64;
        let timed = every != 0 && self.frames % every == 0;
        // Halfway between two such frames, one of the graphs without event nodes times the
        // GPU's work after the decode as a whole, by events around the graphs: the stage
        // events' nodes cost GPU time themselves (docs/performance.md, changes 22 and 44).
        let span_timed = use_graphs && every >= 2 && self.frames % every == every / 2;
        self.frames += 1;
        if use_graphs && !st.graphs.as_ref().is_some_and(|g| g.cfg == *cfg) {
            st.graphs = None;
            let canny = match st.canny.as_mut() {
                Some(c) => Some(graph::Graph::record(gpu, &gpu.side, || {
                    queue_canny(gpu, c, gray, cfg)
                })?),
                None => None,
            };
            st.graphs = Some(Graphs {
                cfg: cfg.clone(),
                main: Default::default(),
                canny,
            });
        }
        // Derived once: on a device without the levels for it, both choices are the same
        // launches, so one graph serves both.
        let pyramid_priority = gpu.pyramid_priority.filter(|_| in_flight.pyramid_first);
        let (fi, ti) = (pyramid_priority.is_some() as usize, timed as usize);
        if use_graphs && st.graphs.as_ref().is_some_and(|g| g.main[fi][ti].is_none()) {
            let recorded = graph::Graph::record(gpu, &gpu.stream, || {
                queue_main(
                    gpu,
                    ev,
                    st,
                    cfg,
                    gpu_select,
                    pyramid_priority,
                    Marks::InGraph(timed),
                )
            })?;
            if let Some(g) = st.graphs.as_mut() {
                g.main[fi][ti] = Some(recorded);
            }
        }
        let mut graphs = st.graphs.as_mut().filter(|_| use_graphs);
        if let Some(c) = st.canny.as_mut() {
            // Canny and its edge-map download on the side stream, beside the pyramid and the
            // detection: both only read level 0.
            gpu.side
                .wait(&ev[1])
                .map_err(|e| context::cuda_err("ordering the side stream", e))?;
            self.side_pending = true;
            match graphs.as_mut().and_then(|g| g.canny.as_mut()) {
                Some(graph) => graph.launch(gpu, "the Canny graph")?,
                None => queue_canny(gpu, c, gray, cfg)?,
            }
            ev[2]
                .record(&gpu.side)
                .map_err(|e| context::cuda_err("recording an event", e))?;
        } else {
            mark(&ev[2], gpu)?; // an empty "canny" stage
        }
        let mut span_recorded = false;
        match graphs.and_then(|g| g.main[fi][ti].as_mut()) {
            Some(main) => {
                main.launch(gpu, "the main graph")?;
                if span_timed {
                    mark(&ev[SPAN_END], gpu)?;
                    span_recorded = true;
                }
            }
            None => queue_main(gpu, ev, st, cfg, gpu_select, pyramid_priority, Marks::Plain)?,
        }

        // Without the GPU selection one kernel brings the candidate header and the
        // candidates it counts where the pinned buffers are mapped; else the count is only
        // known after a first sync on the header, then the candidates' download. Either way
        // the header is on the host after the frame's sync.
        if let (false, Some(det)) = (gpu_select, st.det.as_mut()) {
            if !det.copy_candidates(gpu)? {
                det.queue_candidate_header(gpu)?;
                gpu.sync()?;
                det.queue_candidates(gpu)?;
            }
        }
        if !gpu_select {
            mark(&ev[7], gpu)?;
        }

        // The edge map, as soon as its download is done (the rest of the frame still runs).
        let edges_written = st.canny.is_some();
        if let Some(c) = &st.canny {
            // The crew's threads wait for the edge map themselves only when no other
            // pipeline of the process is inside a frame (four pipelines lost 8 % of their
            // frames/s that way, run 37).
            let early = FRAMES_IN_FLIGHT.load(Ordering::Relaxed) == 1;
            c.edges_out_when(&ev[2], early, edges, &mut out.edges)?;
            self.side_pending = false;
        } else {
            out.edges = None;
        }
        gpu.sync()?;
        let records = match (&st.det, &st.sel) {
            (Some(det), Some(sel)) if gpu_select => sel.max_kept().min(det.out_cap()),
            (Some(det), _) => (det.header_word(0) as usize).min(det.out_cap()),
            (None, _) => 0,
        };

        let t_host = Instant::now();
        out.level_sizes.clear();
        out.level_sizes
            .extend(st.pyr.levels.iter().map(|l| (l.w, l.h)));
        out.keypoints.clear();
        out.descriptors.clear();
        if let Some(det) = &st.det {
            if gpu_select || budget == 0 {
                select::push_keypoints(cfg, det, &st.scales, records, &mut out.keypoints);
            } else {
                select::assemble(cfg, det, &out.level_sizes, records, &mut out.keypoints);
            }
        }
        if let Some(d) = st.describe.as_mut() {
            if gpu_select {
                // Keypoints were pushed in record order (levels by base, then index).
                out.descriptors
                    .extend((0..out.keypoints.len()).map(|i| d.descriptor(i)));
            } else {
                let use_angle = true; // host keypoints carry their final angle (-1 if off)
                d.describe_keypoints(
                    gpu,
                    &st.pyr,
                    &out.keypoints,
                    cfg.pyramid.scale_factor,
                    use_angle,
                )?;
                out.descriptors
                    .extend((0..out.keypoints.len()).map(|i| d.descriptor(i)));
            }
        }
        let host_ms = t_host.elapsed().as_secs_f64() * 1e3;

        out.timings.clear();
        let canny = st.canny.is_some();
        // Raw: cudarc's `elapsed_ms` binds the context and waits on both events first, which
        // cost ~50 us per frame over the seven stages (run 36); both streams are synchronized
        // above.
        let elapsed = |from: usize, to: usize| {
            // SAFETY: both events are alive; the callers read only events recorded in this
            // frame.
            unsafe { result::event::elapsed(ev[from].cu_event(), ev[to].cu_event()) }
                .map_err(|e| context::cuda_err("reading an event", e))
        };
        for (stage, (from, to)) in MARKS[1..].iter().zip(STAGE_SPANS).filter(|_| timed) {
            let overlapped = *stage == "canny" && canny;
            let ms = elapsed(from, to)?;
            out.timings.push(StageTiming {
                stage,
                ms: ms as f64,
                overlapped,
            });
        }
        if span_recorded {
            let main = elapsed(1, SPAN_END)?;
            let side = if canny { elapsed(1, 2)? } else { 0.0 };
            out.timings.push(StageTiming {
                stage: crate::features::AFTER_DECODE_STAGE,
                ms: main.max(side) as f64,
                overlapped: true,
            });
        }
        out.timings.push(StageTiming {
            stage: if gpu_select || budget == 0 {
                "keypoints (host)"
            } else {
                "select (host)"
            },
            ms: host_ms,
            overlapped: false,
        });
        Ok(edges_written)
    }
}
