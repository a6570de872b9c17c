//! Where the tracker's LK stage and Shi-Tomasi top-up run: [`FlowEngine`] holds the two
//! frames' pyramids on the CPU (`cpu::lk`) or on the GPU (`cuda::lk`, `cuda::gftt`, equal
//! bit for bit) and tracks points between them; `Tracker::for_pipeline` makes the tracker of
//! a pipeline's frames, on the GPU in the pipeline's own GPU session when it runs on CUDA
//! (`Tracker::with_gpu`; `Tracker::with_cuda` opens a session of its own).

use super::input::{HostFrame, RightInput};
#[cfg(feature = "cuda")]
use crate::cpu::gftt::GfttParams;
use crate::cpu::lk::{track, Flow, FlowPyramid, LkParams, LkScratch};
use crate::pipeline::BackendKind;

/// Where the LK stage runs: the CPU reference, or the GPU (`cuda::lk`, equal bit for bit;
/// a GPU failure moves the tracker to the CPU and starts its tracks over).
// The CPU variant holds its buffers inline (~280 bytes): one engine per tracker, made once
// and never moved per frame, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum FlowEngine {
    Cpu {
        prev: FlowPyramid,
        cur: FlowPyramid,
        /// The second camera's frame (stereo; boxed: most trackers are mono).
        right: Box<FlowPyramid>,
        scratch: LkScratch,
        /// The forward positions the back pass starts from (kept from frame to frame).
        from: Vec<(f32, f32)>,
    },
    #[cfg(feature = "cuda")]
    Gpu(Box<GpuFlow>),
}

#[cfg(feature = "cuda")]
pub(super) struct GpuFlow {
    /// The GPU session: the pipeline's when the tracker was made for one
    /// (`Tracker::for_pipeline`), else its own.
    pub(super) gpu: std::sync::Arc<crate::cuda::Gpu>,
    pub(super) prev: crate::cuda::lk::GpuFlowPyramid,
    pub(super) cur: crate::cuda::lk::GpuFlowPyramid,
    /// The second camera's frame (stereo).
    pub(super) right: crate::cuda::lk::GpuFlowPyramid,
    pub(super) lk: crate::cuda::lk::GpuLk,
    pub(super) gftt: Option<crate::cuda::gftt::GpuGftt>,
    /// This frame's corner map is wanted early: its image is marked on the stream, and the
    /// map is queued right after LK's launch (beside LK, without delaying its launch).
    pub(super) map_marked: bool,
    /// This frame's corner map was queued.
    pub(super) map_started: bool,
}

impl Default for FlowEngine {
    fn default() -> Self {
        FlowEngine::Cpu {
            prev: FlowPyramid::default(),
            cur: FlowPyramid::default(),
            right: Box::default(),
            scratch: LkScratch::default(),
            from: Vec::new(),
        }
    }
}

impl FlowEngine {
    /// Room for `n` points in the CPU engine's point buffers (the GPU's are sized at start).
    pub(super) fn reserve(&mut self, n: usize) {
        match self {
            FlowEngine::Cpu { scratch, from, .. } => {
                from.reserve(n);
                scratch.reserve(n);
            }
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(_) => {}
        }
    }

    /// The last LK launch's GPU time (ms), NaN on the CPU.
    /// LK's launches timed on the GPU, or not (nothing on the CPU).
    pub(super) fn time_lk(&mut self, on: bool) {
        #[cfg(feature = "cuda")]
        if let FlowEngine::Gpu(g) = self {
            g.lk.set_timed(on);
        }
        #[cfg(not(feature = "cuda"))]
        let _ = on;
    }

    pub(super) fn lk_kernel_ms(&self) -> f64 {
        match self {
            FlowEngine::Cpu { .. } => f64::NAN,
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => g.lk.kernel_ms(),
        }
    }

    pub(super) fn kind(&self) -> BackendKind {
        match self {
            FlowEngine::Cpu { .. } => BackendKind::Cpu,
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(_) => BackendKind::Cuda,
        }
    }

    /// The new frame's pyramid; the last one becomes the previous. The GPU builds it from
    /// the frame's gray image on the device when the frame came with one (the pipeline's),
    /// else from the host pixels, which the CPU always reads.
    pub(super) fn next_frame(
        &mut self,
        frame: &mut HostFrame,
        window: usize,
        levels: usize,
    ) -> crate::error::Result<()> {
        match self {
            FlowEngine::Cpu { prev, cur, .. } => {
                std::mem::swap(prev, cur);
                cur.build(frame.pixels(), window, levels);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => {
                // A corner map still reading the pyramid to be overwritten comes first.
                if let Some(m) = g.gftt.as_mut() {
                    m.settle(&g.gpu)?;
                }
                (g.map_marked, g.map_started) = (false, false);
                std::mem::swap(&mut g.prev, &mut g.cur);
                match frame.device() {
                    Some(gray) => g.cur.build_from_device(&g.gpu, gray, window, levels),
                    None => g.cur.build(&g.gpu, frame.pixels(), window, levels),
                }
            }
        }
    }

    /// The last [`FlowEngine::next_frame`] undone, after its GPU work (the pyramid, a
    /// launched LK, the corner map) is waited for: the previous pyramid is the current
    /// one again. Only the GPU begins a frame early (`Tracker::begin`).
    pub(super) fn undo_frame(&mut self) -> crate::error::Result<()> {
        match self {
            FlowEngine::Cpu { .. } => Ok(()),
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => {
                g.gpu.sync_track()?;
                if let Some(m) = g.gftt.as_mut() {
                    m.settle(&g.gpu)?;
                }
                (g.map_marked, g.map_started) = (false, false);
                std::mem::swap(&mut g.prev, &mut g.cur);
                Ok(())
            }
        }
    }

    /// Waits until the frames given on the device (this frame's, the second camera's) have
    /// been copied into the pyramids, so that their owners may reuse them: at once when
    /// LK's or the corners' download already waited.
    pub(super) fn release_inputs(&self) -> crate::error::Result<()> {
        match self {
            FlowEngine::Cpu { .. } => Ok(()),
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => {
                g.cur.wait_source()?;
                g.right.wait_source()
            }
        }
    }

    /// The points tracked forward (previous -> current) into `fwd`; with `back`, every
    /// point whose forward status holds is then tracked back (current -> previous, from its
    /// forward position, initial flow = its previous position) into `back_out` (VINS's
    /// flow-back check; the GPU does both in one launch, the entries of points lost forward
    /// carry status false): this launch, then [`FlowEngine::collect_flow`]. On the GPU, LK
    /// queued on the tracker's stream (with the marked corner map beside it), no wait;
    /// nothing on the CPU.
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub(super) fn launch_flow(
        &mut self,
        pts: &[(f32, f32)],
        p: &LkParams,
        back: Option<&LkParams>,
    ) -> crate::error::Result<()> {
        match self {
            FlowEngine::Cpu { .. } => Ok(()),
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => g.launch(Pair::Frames, pts, p, back.map(|b| (b, true))),
        }
    }

    /// The flows of [`FlowEngine::launch_flow`] (the same arguments): the GPU's brought
    /// back, or the CPU's computed, into `out` (forward, back).
    pub(super) fn collect_flow(
        &mut self,
        pts: &[(f32, f32)],
        p: &LkParams,
        back: Option<&LkParams>,
        out: (&mut Vec<Flow>, &mut Vec<Flow>),
    ) -> crate::error::Result<()> {
        match self {
            FlowEngine::Cpu {
                prev,
                cur,
                scratch,
                from,
                ..
            } => {
                let back = back.map(|b| (b, true));
                cpu_there_and_back(prev, cur, pts, p, back, scratch, from, out);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => g.lk.collect(&g.gpu, out.0, out.1),
        }
    }

    /// Stereo (VINS-Fusion): the second camera's frame `img` becomes the right pyramid (on
    /// the GPU from its device copy when it is on the device); the current frame's points
    /// `pts` are tracked into it (`p`, no initial flow) into `fwd`, and with `back` tracked
    /// back from there into the current frame (no initial flow either, as VINS-Fusion's
    /// check) into `back_out`.
    pub(super) fn stereo(
        &mut self,
        img: RightInput,
        pts: &[(f32, f32)],
        p: &LkParams,
        back: Option<&LkParams>,
        fwd: &mut Vec<Flow>,
        back_out: &mut Vec<Flow>,
    ) -> crate::error::Result<()> {
        let back = back.map(|b| (b, false));
        match self {
            FlowEngine::Cpu {
                cur,
                right,
                scratch,
                from,
                ..
            } => {
                let Some(img) = img.host() else {
                    return Err(crate::Error::Cuda(
                        "the CPU tracker cannot read a frame on the GPU".into(),
                    ));
                };
                right.build(img, p.window, p.max_level);
                cpu_there_and_back(cur, right, pts, p, back, scratch, from, (fwd, back_out));
                Ok(())
            }
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(g) => {
                match img {
                    RightInput::Gray(img) => g.right.build(&g.gpu, img, p.window, p.max_level)?,
                    RightInput::Device(d) => {
                        g.right
                            .build_from_device(&g.gpu, d, p.window, p.max_level)?
                    }
                }
                g.launch(Pair::Stereo, pts, p, back)?;
                g.lk.collect(&g.gpu, fwd, back_out)
            }
        }
    }
}

/// Which two pyramids LK tracks between: the previous and the current frame, or the current
/// frame and the second camera's.
#[cfg(feature = "cuda")]
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pair {
    Frames,
    Stereo,
}

/// `pts` tracked from `a` into `b` (`p`, no initial flow) into `out.0`; with `back`, the
/// points whose forward status holds tracked from there back into `a` (`back.0`; with
/// `back.1` the initial flow is their `pts` position) into `out.1`, as the GPU's one launch
/// does (`cuda::lk::GpuLk::track`; the CPU skips the back pass when nothing survived).
#[allow(clippy::too_many_arguments)]
fn cpu_there_and_back(
    a: &mut FlowPyramid,
    b: &mut FlowPyramid,
    pts: &[(f32, f32)],
    p: &LkParams,
    back: Option<(&LkParams, bool)>,
    scratch: &mut LkScratch,
    from: &mut Vec<(f32, f32)>,
    (fwd, back_out): (&mut Vec<Flow>, &mut Vec<Flow>),
) {
    a.ensure_derivatives();
    track(a, b, pts, None, p, scratch, fwd);
    back_out.clear();
    if let Some((bp, initial)) = back.filter(|_| fwd.iter().any(|f| f.status)) {
        from.clear();
        from.extend(fwd.iter().map(|f| (f.x, f.y)));
        b.ensure_derivatives();
        track(b, a, from, initial.then_some(pts), bp, scratch, back_out);
    }
}

#[cfg(feature = "cuda")]
impl GpuFlow {
    /// `pts` tracked between the two pyramids of `pair` (with `back`, back too: `back.1`
    /// starts the back pass from the first pyramid's positions), both passes in one
    /// `lk_track` launch on the tracker's stream; no wait ([`crate::cuda::lk::GpuLk::collect`]).
    /// A marked corner map is queued right after LK (it starts from the mark).
    fn launch(
        &mut self,
        pair: Pair,
        pts: &[(f32, f32)],
        p: &LkParams,
        back: Option<(&LkParams, bool)>,
    ) -> crate::error::Result<()> {
        let map = (pair == Pair::Frames && self.map_marked && !self.map_started)
            .then(|| self.cur.level0())
            .flatten();
        let GpuFlow {
            gpu,
            prev,
            cur,
            right,
            lk,
            gftt,
            map_started,
            ..
        } = self;
        let (a, b) = match pair {
            Pair::Frames => (prev, cur),
            Pair::Stereo => (cur, right),
        };
        a.ensure_derivatives(gpu)?;
        if back.is_some() {
            b.ensure_derivatives(gpu)?;
        }
        let mut during = || -> crate::error::Result<()> {
            if let (Some(img), Some(m)) = (map, gftt.as_mut()) {
                m.queue_map(gpu, img, &GfttParams::default())?;
                *map_started = true;
            }
            Ok(())
        };
        lk.launch(gpu, (a, b), pts, None, p, back, &mut during)
    }

    /// The frame just built's level 0 (on the GPU already) at `size`: the corner map's
    /// image.
    fn map_image(
        &self,
        size: (usize, usize),
    ) -> crate::error::Result<crate::cuda::gftt::GfttInput<'static>> {
        self.cur
            .level0()
            .filter(|l| l.size() == size)
            .ok_or_else(|| {
                crate::Error::Cuda("the corner map needs the frame's pyramid first".into())
            })
    }

    /// Marks the frame just built for goodFeaturesToTrack's eigenvalue map (its pyramid's
    /// level 0): the map is queued on its own stream right after LK's launch (it then runs
    /// beside LK), or by [`GpuFlow::corners`] when no LK runs.
    pub(super) fn mark_corner_map(
        &mut self,
        (width, height): (usize, usize),
    ) -> crate::error::Result<()> {
        self.map_image((width, height))?;
        let m = match self.gftt.as_mut() {
            Some(m) => m,
            None => self
                .gftt
                .insert(crate::cuda::gftt::GpuGftt::new(&self.gpu, width, height)?),
        };
        m.mark_image(&self.gpu, (width, height))?;
        self.map_marked = true;
        Ok(())
    }

    /// The corners of the frame's map (queued now if it was not) outside the claimed
    /// `discs` (VINS's mask, drawn on the GPU from their centres); the selection's host times.
    pub(super) fn corners(
        &mut self,
        size: (usize, usize),
        g: &GfttParams,
        discs: &super::mask::Discs,
        out: &mut Vec<(f32, f32)>,
    ) -> crate::error::Result<crate::cuda::gftt::CornerParts> {
        if !self.map_started {
            if !self.map_marked {
                self.mark_corner_map(size)?;
            }
            let img = self.map_image(size)?;
            let m = self.gftt.as_mut().expect("made by mark_corner_map");
            m.queue_map(&self.gpu, img, &GfttParams::default())?;
            self.map_started = true;
        }
        let m = self.gftt.as_mut().expect("started above");
        let mask = crate::cuda::gftt::GfttMask::Discs {
            centers: discs.centers(),
            spans: discs.spans(),
        };
        m.finish(&self.gpu, g, mask, out)
    }
}

/// Making a tracker for a backend (its LK stage on the GPU or the CPU).
impl super::Tracker {
    /// A tracker whose LK stage runs on the GPU (window up to 31) in a GPU session of its
    /// own; the CPU's when CUDA cannot start, with the reason. Beside a pipeline,
    /// [`super::Tracker::for_pipeline`] shares the pipeline's session instead.
    #[cfg(feature = "cuda")]
    pub fn with_cuda(params: super::TrackParams) -> (super::Tracker, Option<String>) {
        match crate::cuda::Gpu::new() {
            Ok(gpu) => super::Tracker::with_gpu(params, std::sync::Arc::new(gpu)),
            Err(e) => (super::Tracker::new(params), Some(e.to_string())),
        }
    }

    /// A tracker whose LK stage runs in `gpu`'s session (its context, kernels and streams);
    /// the CPU's, with the reason, when the GPU buffers cannot be made or the window is
    /// too large for the GPU kernel.
    #[cfg(feature = "cuda")]
    pub fn with_gpu(
        params: super::TrackParams,
        gpu: std::sync::Arc<crate::cuda::Gpu>,
    ) -> (super::Tracker, Option<String>) {
        let mut t = super::Tracker::new(params);
        if params.window > crate::cuda::lk::MAX_WINDOW {
            return (
                t,
                Some(format!(
                    "track.window {} > {}: LK on the CPU",
                    params.window,
                    crate::cuda::lk::MAX_WINDOW
                )),
            );
        }
        match gpu.bind().and_then(|()| {
            let lk = crate::cuda::lk::GpuLk::new(&gpu, params.max_features.max(64))?;
            Ok(GpuFlow {
                gpu,
                prev: Default::default(),
                cur: Default::default(),
                right: Default::default(),
                lk,
                gftt: None,
                map_marked: false,
                map_started: false,
            })
        }) {
            Ok(g) => {
                t.engine = FlowEngine::Gpu(Box::new(g));
                (t, None)
            }
            Err(e) => (t, Some(e.to_string())),
        }
    }

    /// Without the `cuda` feature: the CPU tracker, and why.
    #[cfg(not(feature = "cuda"))]
    pub fn with_cuda(params: super::TrackParams) -> (super::Tracker, Option<String>) {
        (
            super::Tracker::new(params),
            Some("built without the cuda feature".into()),
        )
    }

    /// The tracker for a pipeline on `backend`: its LK stage on the GPU with CUDA (the
    /// CPU's when CUDA cannot start it, with the reason), else the CPU's. Without a
    /// pipeline at hand; beside one, [`super::Tracker::for_pipeline`].
    pub fn on(
        backend: BackendKind,
        params: super::TrackParams,
    ) -> (super::Tracker, Option<String>) {
        match backend {
            BackendKind::Cuda => super::Tracker::with_cuda(params),
            BackendKind::Cpu => (super::Tracker::new(params), None),
        }
    }

    /// The tracker of `pipeline`'s frames: on the CUDA backend in the pipeline's own GPU
    /// session (one context and kernel set; its work queued on the pipeline's streams after
    /// the frame's, which it reads on the device), else on the CPU. What the CLI, the replay
    /// and the node start their trackers with.
    pub fn for_pipeline(
        pipeline: &crate::pipeline::Pipeline,
        params: super::TrackParams,
    ) -> (super::Tracker, Option<String>) {
        let gpu_used = pipeline.backend() == BackendKind::Cuda;
        let threads = pipeline.config().cpu.threads_for(gpu_used);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = pipeline.gpu_session() {
            let (mut t, why) = super::Tracker::with_gpu(params, gpu);
            t.set_threads(threads);
            return (t, why);
        }
        let (mut t, why) = super::Tracker::on(pipeline.backend(), params);
        t.set_threads(threads);
        (t, why)
    }

    /// The threads of the CPU engine's LK (`cpu.threads`; the results are the same for any
    /// count). No effect on the GPU engine.
    pub fn set_threads(&mut self, threads: usize) {
        match &mut self.engine {
            FlowEngine::Cpu { scratch, .. } => scratch.set_threads(threads),
            #[cfg(feature = "cuda")]
            FlowEngine::Gpu(_) => {}
        }
    }
}
