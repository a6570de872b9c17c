//! `Pipeline`: a backend plus its per-resolution state; `process(frame) -> Features`.
//!
//! May import: `config`, `cpu`, `cuda`, `error`, `features`, `image`.

use crate::config::Config;
use crate::cpu::CpuPipeline;
use crate::error::Result;
// The shared types live in `features` (no import circle with the backends); re-exported
// here for the callers that name them through the pipeline.
use crate::features::Features;
use crate::image::{FrameLayout, GrayImage, ImageView};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// CUDA when a usable GPU is present, else CPU (the reason is logged once).
    Auto,
    Cpu,
    Cuda,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "cuda" => Ok(BackendChoice::Cuda),
            o => Err(format!("unknown backend {o:?} (auto, cpu or cuda)")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Cuda,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
        }
    }
}

enum Backend {
    Cpu(Box<CpuPipeline>),
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::cuda::CudaPipeline>),
}

/// The pipeline: holds the config and the backend's buffers (sized on the first frame of
/// each resolution, reused after).
pub struct Pipeline {
    config: Config,
    /// What the backend runs: `config`, with Canny off while the caller wants no edge map
    /// ([`Pipeline::want_edges`]).
    run_config: Config,
    /// [`Pipeline::want_edges`]'s last value (true from the start).
    edges_wanted: bool,
    backend: Backend,
    /// The CPU backend's input buffer ([`Pipeline::input_buffer`]) and its layout; the CUDA
    /// backend's is its pinned staging memory.
    cpu_input: Option<(FrameLayout, Vec<u8>)>,
    /// The CPU backend's edge image between frames whose map goes into the caller's buffer
    /// ([`Pipeline::process_into_edges`]): its memory is reused.
    cpu_edges: Option<GrayImage>,
    /// Why `Auto` fell back to the CPU, if it did.
    fallback_reason: Option<String>,
    /// The CUDA error that made the pipeline switch to the CPU mid-stream, if one did.
    gpu_failure: Option<String>,
}

/// `cuda.warm_ahead_us: -1` (auto) on a discrete GPU: on the H200 machine a round trip 300
/// or 1000 us ahead of a paced frame took the same off it, 3000 us less
/// (examples/paced_floor.rs; docs/performance.md, change 79).
#[cfg(feature = "cuda")]
const WARM_AHEAD_AUTO_US: u64 = 500;

impl Pipeline {
    pub fn new(config: Config, choice: BackendChoice) -> Result<Self> {
        config.validate()?;
        let (backend, fallback_reason) = match choice {
            BackendChoice::Cpu => (Backend::Cpu(Box::default()), None),
            BackendChoice::Cuda => (Self::cuda_backend(&config)?, None),
            BackendChoice::Auto => match Self::cuda_backend(&config) {
                Ok(b) => (b, None),
                Err(e) => (Backend::Cpu(Box::default()), Some(e.to_string())),
            },
        };
        Ok(Pipeline {
            run_config: config.clone(),
            config,
            edges_wanted: true,
            backend,
            cpu_input: None,
            cpu_edges: None,
            fallback_reason,
            gpu_failure: None,
        })
    }

    /// The CUDA backend; the process's copy crew is sized here, before its first use (the
    /// first CUDA frame), from `cuda.crew_threads` and whether the GPU is integrated.
    #[cfg(feature = "cuda")]
    fn cuda_backend(config: &Config) -> Result<Backend> {
        let p = crate::cuda::CudaPipeline::new()?;
        crate::cuda::driver::crew::set_threads(
            config.cuda.crew_threads as usize,
            p.gpu().integrated,
        );
        Ok(Backend::Cuda(Box::new(p)))
    }

    #[cfg(not(feature = "cuda"))]
    fn cuda_backend(_: &Config) -> Result<Backend> {
        Err(crate::Error::Cuda(
            "this build has no CUDA backend (built without the `cuda` feature)".into(),
        ))
    }

    pub fn backend(&self) -> BackendKind {
        match self.backend {
            Backend::Cpu(_) => BackendKind::Cpu,
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => BackendKind::Cuda,
        }
    }

    /// Set when `BackendChoice::Auto` could not use CUDA: the reason, for a one-time log.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// Set once the CUDA backend failed on a frame (a launch failure, an out-of-memory, a
    /// lost device): the error. The pipeline then runs on the CPU backend for good (same
    /// output, bit for bit) and the failed frame was redone there.
    pub fn gpu_failure(&self) -> Option<&str> {
        self.gpu_failure.as_deref()
    }

    /// Test hook: makes the `n`-th CUDA kernel launch from now fail (no-op on the CPU).
    #[doc(hidden)]
    pub fn inject_cuda_fault(&self, n: u64) {
        #[cfg(feature = "cuda")]
        if let Backend::Cuda(p) = &self.backend {
            p.gpu().inject_fault(n);
        }
        let _ = n;
    }

    /// Device memory in use on the pipeline's GPU, bytes (`None` on the CPU backend).
    pub fn gpu_memory_used(&self) -> Option<u64> {
        match &self.backend {
            Backend::Cpu(_) => None,
            #[cfg(feature = "cuda")]
            Backend::Cuda(p) => p.gpu().memory_used().ok(),
        }
    }

    /// A frame is about to come (the node took one from the middleware; the bench's pacer
    /// woke): the CUDA backend's copy crew is woken now and spins for the frame's copy until
    /// `cuda.prewake_us` has passed instead of waking when the copy starts
    /// (`cuda::driver::crew::prewake`; docs/performance.md, change 68). Nothing on the CPU backend
    /// or with `cuda.prewake_us: 0`.
    pub fn prewake(&self) {
        #[cfg(feature = "cuda")]
        if let Backend::Cuda(_) = self.backend {
            crate::cuda::driver::crew::prewake_us(self.config.cuda.prewake_us);
        }
    }

    /// How long before a frame is due [`Pipeline::warm_gpu`] should run
    /// (`cuda.warm_ahead_us`, auto resolved on this GPU); None on the CPU backend or when
    /// off.
    pub fn warm_ahead(&self) -> Option<std::time::Duration> {
        #[cfg(feature = "cuda")]
        if let Backend::Cuda(p) = &self.backend {
            let us = match self.config.cuda.warm_ahead_us {
                // auto: off on an integrated GPU, where it was not measured (docs/jetson.md)
                ..0 if p.gpu().integrated => 0,
                ..0 => WARM_AHEAD_AUTO_US,
                us => us as u64,
            };
            return (us > 0).then(|| std::time::Duration::from_micros(us));
        }
        None
    }

    /// One small round trip to the GPU between frames, shortly before the next is due
    /// (`CudaPipeline::warm`; the node times it: `cuda.warm_ahead_us`). Nothing on the CPU
    /// backend. A failure is left for the next frame to meet (and fall back on).
    pub fn warm_gpu(&mut self) {
        #[cfg(feature = "cuda")]
        if let Backend::Cuda(p) = &mut self.backend {
            let _ = p.warm();
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the config (validated first; the old one stays on error). Buffers that
    /// depend on it are resized on the next frame.
    pub fn set_config(&mut self, config: Config) -> Result<()> {
        config.validate()?;
        self.run_config = config.clone();
        self.run_config.canny.enabled &= self.edges_wanted;
        self.config = config;
        Ok(())
    }

    /// Whether the caller wants the next frames' edge maps (true until told otherwise).
    /// With false, Canny does not run even where `canny.enabled` (the config stays as it
    /// is) and `edges` is None: the node says so while no one subscribes to `edges`
    /// (docs/performance.md, change 70). A change takes effect on the next frame, which
    /// resizes the backend's buffers as a config change does; the same value again costs
    /// nothing.
    pub fn want_edges(&mut self, wanted: bool) {
        if wanted != self.edges_wanted {
            self.edges_wanted = wanted;
            self.run_config.canny.enabled = self.config.canny.enabled && wanted;
        }
    }

    /// Runs every enabled stage on one frame.
    pub fn process(&mut self, frame: &ImageView) -> Result<Features> {
        let mut out = Features::default();
        self.process_into(frame, &mut out)?;
        Ok(out)
    }

    /// [`Pipeline::process`] into `out`, reusing its buffers (keypoints, edge map): a
    /// stream of frames of one resolution stops allocating them after the first frame.
    /// On error `out` holds no stale keypoints or edges.
    pub fn process_into(&mut self, frame: &ImageView, out: &mut Features) -> Result<()> {
        self.process_edges_to(
            frame,
            out,
            None,
            #[cfg(feature = "cuda")]
            None,
        )
        .map(|_| ())
    }

    /// [`Pipeline::process_into`] with the frame's edge map written into `edges` (exactly
    /// `width * height` bytes, 0/255, rows packed) instead of `out.edges`, which is then
    /// None: a caller that sends the map on (the node serializes it into a message) saves
    /// a copy of it. Ok(true) when a map was written (Canny ran: [`Pipeline::want_edges`]
    /// and `canny.enabled`), Ok(false) when `edges` was left as it was. An `edges` of
    /// another length is an error, with nothing computed.
    pub fn process_into_edges(
        &mut self,
        frame: &ImageView,
        out: &mut Features,
        edges: &mut [u8],
    ) -> Result<bool> {
        self.process_edges_to(
            frame,
            out,
            Some(edges),
            #[cfg(feature = "cuda")]
            None,
        )
    }

    /// [`Pipeline::process_into_edges`] (into `edges` when given, else `out.edges`), calling
    /// `after_decode` on the CUDA backend with the frame's gray image on the device once the
    /// decode and the detection are queued: the feature tracker begins the same frame beside the detection
    /// (`Tracker::begin`; `CudaPipeline::process_edges_then`). Not called on the CPU.
    #[cfg(feature = "cuda")]
    pub fn process_edges_then(
        &mut self,
        frame: &ImageView,
        out: &mut Features,
        edges: Option<&mut [u8]>,
        after_decode: crate::cuda::AfterDecode,
    ) -> Result<bool> {
        self.process_edges_to(frame, out, edges, Some(after_decode))
    }

    /// The frame through the backend, its edge map into `edges` when given; on a CUDA error
    /// the frame again on the CPU, and the CPU from then on.
    fn process_edges_to(
        &mut self,
        frame: &ImageView,
        out: &mut Features,
        #[cfg_attr(not(feature = "cuda"), allow(unused_mut))] mut edges: Option<&mut [u8]>,
        #[cfg(feature = "cuda")] after_decode: Option<crate::cuda::AfterDecode>,
    ) -> Result<bool> {
        let spare = &mut self.cpu_edges;
        let r = match &mut self.backend {
            Backend::Cpu(p) => cpu_edges_to(p, &self.run_config, frame, out, edges, spare),
            #[cfg(feature = "cuda")]
            Backend::Cuda(p) => {
                let cfg = &self.run_config;
                let r = p.process_edges_then(cfg, frame, out, edges.as_deref_mut(), after_decode);
                if let Err(crate::Error::Cuda(why)) = &r {
                    // The GPU failed mid-stream: continue on the CPU reference (identical
                    // output) rather than losing this frame and the ones after it.
                    self.gpu_failure = Some(why.clone());
                    let mut cpu = Box::<CpuPipeline>::default();
                    let r = cpu_edges_to(&mut cpu, &self.run_config, frame, out, edges, spare);
                    self.backend = Backend::Cpu(cpu);
                    r
                } else {
                    r
                }
            }
        };
        if r.is_err() {
            out.keypoints.clear();
            out.descriptors.clear();
            out.edges = None;
            out.level_sizes.clear();
            out.timings.clear();
        }
        r
    }

    /// The last frame's gray image on the GPU, after a frame that ran to its end on the
    /// CUDA backend; valid until the next frame (`CudaPipeline::gray_on_device`). None on
    /// the CPU backend.
    #[cfg(feature = "cuda")]
    pub fn gray_on_device(&self) -> Option<crate::cuda::DeviceGray<'_>> {
        match &self.backend {
            Backend::Cuda(p) => p.gray_on_device(),
            Backend::Cpu(_) => None,
        }
    }

    /// The CUDA backend's GPU session (`CudaPipeline::session`), for the feature tracker of
    /// the same frames; None on the CPU backend.
    #[cfg(feature = "cuda")]
    pub fn gpu_session(&self) -> Option<std::sync::Arc<crate::cuda::Gpu>> {
        match &self.backend {
            Backend::Cuda(p) => Some(p.session()),
            Backend::Cpu(_) => None,
        }
    }

    /// [`Pipeline::gray_on_device`] copied into `dst` to outlive the next frame
    /// (`CudaPipeline::keep_gray`); Ok(false) on the CPU backend or without a gray image.
    #[cfg(feature = "cuda")]
    pub fn keep_gray(&self, dst: &mut Option<crate::cuda::KeptGray>) -> Result<bool> {
        match &self.backend {
            Backend::Cuda(p) => p.keep_gray(dst),
            Backend::Cpu(_) => Ok(false),
        }
    }

    /// A buffer for the next frame, of `layout.bytes()` bytes: write the frame's bytes here
    /// (an image decoder, a message reader), then call [`Pipeline::process_input_into`]. On
    /// the CUDA backend this is the pinned memory that the upload reads, so the frame is
    /// written once instead of being copied again by [`Pipeline::process_into`] (0.18-0.24 ms
    /// for a 1080p mono8 frame on the H100 machine; docs/performance.md). The buffer and
    /// its contents stay until the next call with another layout or the next
    /// [`Pipeline::process_into`] on the CUDA backend, which copies its frame through the
    /// same memory (a colour frame converted to gray there, `cuda.host_gray`, leaves no frame
    /// in it: [`Pipeline::process_input_into`] then asks for one); a config change keeps
    /// them. Errors: the layout's own (sizes, step), or no memory for it.
    pub fn input_buffer(&mut self, layout: FrameLayout) -> Result<&mut [u8]> {
        let bytes = layout.bytes()?;
        if bytes > MAX_INPUT_BYTES {
            return Err(crate::Error::Config(format!(
                "input buffer: {bytes} bytes for a {}x{} frame with step {} is more than the \
                 largest frame ({MAX_INPUT_BYTES} bytes)",
                layout.width, layout.height, layout.step
            )));
        }
        match &mut self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(p) => p.input_buffer(&self.run_config, layout),
            Backend::Cpu(_) => {
                if !matches!(&self.cpu_input, Some((l, _)) if *l == layout) {
                    let mut buf = Vec::new();
                    buf.try_reserve_exact(bytes).map_err(|e| {
                        crate::Error::Config(format!("input buffer of {bytes} bytes: {e}"))
                    })?;
                    buf.resize(bytes, 0);
                    self.cpu_input = Some((layout, buf));
                }
                Ok(&mut self.cpu_input.as_mut().expect("input").1)
            }
        }
    }

    /// [`Pipeline::process_into`] on the frame written into [`Pipeline::input_buffer`].
    pub fn process_input_into(&mut self, out: &mut Features) -> Result<()> {
        #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
        let mut r = match &mut self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(p) => p.process_staged_into(&self.run_config, out),
            Backend::Cpu(p) => match &self.cpu_input {
                Some((l, buf)) => {
                    let view = ImageView::with_encoding(
                        buf,
                        l.width,
                        l.height,
                        l.step,
                        l.encoding,
                        l.big_endian,
                    )?;
                    p.process_into(&self.run_config, &view, out);
                    Ok(())
                }
                None => Err(crate::Error::Config(
                    "no frame in the input buffer: call input_buffer first".into(),
                )),
            },
        };
        #[cfg(feature = "cuda")]
        if let (Err(crate::Error::Cuda(why)), Backend::Cuda(p)) = (&r, &self.backend) {
            // As in process_into: the same frame on the CPU, and the CPU from now on (the
            // frame moves into the CPU backend's input buffer).
            if let Some(frame) = p.staged_frame() {
                self.gpu_failure = Some(why.clone());
                let mut cpu = Box::<CpuPipeline>::default();
                cpu.process_into(&self.run_config, &frame, out);
                self.cpu_input = Some((frame.layout(), frame.data().to_vec()));
                self.backend = Backend::Cpu(cpu);
                r = Ok(());
            }
        }
        if r.is_err() {
            out.keypoints.clear();
            out.descriptors.clear();
            out.edges = None;
            out.level_sizes.clear();
            out.timings.clear();
        }
        r
    }
}

/// The CPU backend's frame, its edge map copied into `edges` when given (`out.edges` then
/// None, its image kept in `spare` for the next frame); Ok(true) when a map was made.
fn cpu_edges_to(
    p: &mut CpuPipeline,
    cfg: &Config,
    frame: &ImageView,
    out: &mut Features,
    edges: Option<&mut [u8]>,
    spare: &mut Option<GrayImage>,
) -> Result<bool> {
    let Some(dst) = edges else {
        p.process_into(cfg, frame, out);
        return Ok(out.edges.is_some());
    };
    crate::features::check_edges_len(dst.len(), frame.width(), frame.height())?;
    out.edges = spare.take();
    p.process_into(cfg, frame, out);
    Ok(match out.edges.take() {
        Some(e) => {
            dst.copy_from_slice(&e.data);
            *spare = Some(e);
            true
        }
        None => false,
    })
}

/// Largest input buffer: the largest frame an `ImageView` accepts, 4 bytes per pixel.
pub const MAX_INPUT_BYTES: usize = crate::image::MAX_PIXELS * 4;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::GrayImage;

    /// 160x120 of 8x8 blocks of pseudo-random gray: corners and edges everywhere.
    fn blocks() -> GrayImage {
        let (w, h) = (160, 120);
        let mut img = GrayImage::new(w, h);
        let mut seed = 12345u32;
        let mut level = vec![0u8; (w / 8) * (h / 8)];
        for v in &mut level {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            *v = (seed >> 24) as u8;
        }
        for y in 0..h {
            for x in 0..w {
                img.data[y * w + x] = level[(y / 8) * (w / 8) + x / 8];
            }
        }
        img
    }

    /// Without edge maps wanted Canny does not run (no edges, the config untouched) and the
    /// keypoints stay the same; wanted again, the edges are those of before. A config with
    /// Canny off gives none either way.
    #[test]
    fn edges_only_while_wanted_and_the_config_says_so() {
        let img = blocks();
        let view = ImageView::mono8(&img.data, img.width, img.height).unwrap();
        let mut p = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
        let first = p.process(&view).unwrap();
        let edges = first.edges.clone().expect("edges by default");
        assert!(edges.data.iter().any(|&v| v != 0), "the blocks have edges");
        assert!(!first.keypoints.is_empty());

        p.want_edges(false);
        let off = p.process(&view).unwrap();
        assert!(off.edges.is_none());
        assert!(p.config().canny.enabled, "the config stays as it was");
        assert_eq!(off.keypoints, first.keypoints);
        assert_eq!(off.descriptors, first.descriptors);

        p.want_edges(true);
        let on = p.process(&view).unwrap();
        assert_eq!(on.edges.as_ref().map(|e| &e.data), Some(&edges.data));

        // A config set while edges are not wanted keeps them off; the config decides once
        // they are.
        p.want_edges(false);
        let mut no_canny = Config::default();
        no_canny.canny.enabled = false;
        p.set_config(Config::default()).unwrap();
        assert!(p.process(&view).unwrap().edges.is_none());
        p.set_config(no_canny).unwrap();
        p.want_edges(true);
        assert!(p.process(&view).unwrap().edges.is_none());
        p.set_config(Config::default()).unwrap();
        assert_eq!(
            p.process(&view).unwrap().edges.map(|e| e.data),
            Some(edges.data)
        );
    }
}
