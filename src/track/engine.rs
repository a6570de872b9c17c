//! Where the tracker's LK stage and Shi-Tomasi top-up run: [`FlowEngine`] holds the two
//! frames' pyramids on the CPU (`cpu::lk`) or on the GPU (`cuda::lk`, `cuda::gftt`, equal
//! bit for bit) and tracks points between them.

use crate::cpu::lk::{track, Flow, FlowPyramid, LkParams, LkScratch};
use crate::image::GrayImage;

/// Where the LK stage runs: the CPU reference, or the GPU (`cuda::lk`, equal bit for bit;
/// a GPU failure moves the tracker to the CPU and starts its tracks over).
pub(super) enum FlowEngine {
    Cpu {
        prev: FlowPyramid,
        cur: FlowPyramid,
        scratch: LkScratch,
    },
    #[cfg(feature = "cuda")]
    Gpu(Box<GpuFlow>),
}

#[cfg(feature = "cuda")]
pub(super) struct GpuFlow {
    pub(super) gpu: crate::cuda::Gpu,
    pub(super) prev: crate::cuda::lk::GpuFlowPyramid,
    pub(super) cur: crate::cuda::lk::GpuFlowPyramid,
    pub(super) lk: crate::cuda::lk::GpuLk,
    pub(super) gftt: Option<crate::cuda::gftt::GpuGftt>,
}

impl Default for FlowEngine {
    fn default() -> Self {
        FlowEngine::Cpu {
            prev: FlowPyramid::default(),
            cur: FlowPyramid::default(),
            scratch: LkScratch::default(),
        }
    }
}

impl FlowEngine {
    pub(super) fn name(&self) -> &'static str {
        match self {
            FlowEngine::Cpu { .. } => "cpu",
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(_) => "cuda",
        }
    }

    /// The new frame's pyramid; the last one becomes the previous.
    pub(super) fn next_frame(
        &mut self,
        img: &GrayImage,
        window: usize,
        levels: usize,
    ) -> crate::error::Result<()> {
        match self {
            FlowEngine::Cpu { prev, cur, .. } => {
                std::mem::swap(prev, cur);
                cur.build(img, window, levels);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => {
                std::mem::swap(&mut g.prev, &mut g.cur);
                g.cur.build(&g.gpu, img, window, levels)
            }
        }
    }

    /// Forward (previous -> current) or, with `back`, current -> previous from `initial`.
    pub(super) fn flow(
        &mut self,
        back: bool,
        pts: &[(f32, f32)],
        initial: Option<&[(f32, f32)]>,
        p: &LkParams,
        out: &mut Vec<Flow>,
    ) -> crate::error::Result<()> {
        match self {
            FlowEngine::Cpu { prev, cur, scratch } => {
                let (a, b) = if back { (cur, prev) } else { (prev, cur) };
                a.ensure_derivatives();
                track(a, b, pts, initial, p, scratch, out);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => {
                let GpuFlow {
                    gpu, prev, cur, lk, ..
                } = &mut **g;
                let (a, b) = if back { (cur, prev) } else { (prev, cur) };
                a.ensure_derivatives(gpu)?;
                lk.track(gpu, a, b, pts, initial, p, out)
            }
        }
    }
}
