//! `Pipeline`: a backend plus its per-resolution state; `process(frame) -> Features`.

use crate::config::Config;
use crate::cpu::CpuPipeline;
use crate::error::Result;
// The shared types live in `features` (no import circle with the backends); re-exported
// here for the callers that name them through the pipeline.
pub use crate::features::{Descriptor, Features, Keypoint, StageTiming};
use crate::image::ImageView;

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
    backend: Backend,
    /// Why `Auto` fell back to the CPU, if it did.
    fallback_reason: Option<String>,
    /// The CUDA error that made the pipeline switch to the CPU mid-stream, if one did.
    gpu_failure: Option<String>,
}

impl Pipeline {
    pub fn new(config: Config, choice: BackendChoice) -> Result<Self> {
        config.validate()?;
        let (backend, fallback_reason) = match choice {
            BackendChoice::Cpu => (Backend::Cpu(Box::default()), None),
            BackendChoice::Cuda => (Self::cuda_backend()?, None),
            BackendChoice::Auto => match Self::cuda_backend() {
                Ok(b) => (b, None),
                Err(e) => (Backend::Cpu(Box::default()), Some(e.to_string())),
            },
        };
        Ok(Pipeline {
            config,
            backend,
            fallback_reason,
            gpu_failure: None,
        })
    }

    #[cfg(feature = "cuda")]
    fn cuda_backend() -> Result<Backend> {
        Ok(Backend::Cuda(Box::new(crate::cuda::CudaPipeline::new()?)))
    }

    #[cfg(not(feature = "cuda"))]
    fn cuda_backend() -> Result<Backend> {
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

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the config (validated first; the old one stays on error). Buffers that
    /// depend on it are resized on the next frame.
    pub fn set_config(&mut self, config: Config) -> Result<()> {
        config.validate()?;
        self.config = config;
        Ok(())
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
        let mut r = match &mut self.backend {
            Backend::Cpu(p) => {
                p.process_into(&self.config, frame, out);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(p) => p.process_into(&self.config, frame, out),
        };
        if let Err(crate::Error::Cuda(why)) = &r {
            // The GPU failed mid-stream: continue on the CPU reference (identical output)
            // rather than losing this frame and the ones after it.
            self.gpu_failure = Some(why.clone());
            let mut cpu = Box::<CpuPipeline>::default();
            cpu.process_into(&self.config, frame, out);
            self.backend = Backend::Cpu(cpu);
            r = Ok(());
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
