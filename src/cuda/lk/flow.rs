//! LK's flows on the GPU: the points up, every point tracked through every level forward
//! (and back) in one `lk_track` launch between two [`GpuFlowPyramid`]s, the flows down
//! ([`GpuLk`]; its launch and its collection apart, so that other work runs between them).

use cudarc::driver::{sys, CudaEvent};

use super::{GpuFlowPyramid, MAX_WARPS};
use crate::cpu::lk::{Flow, LkParams};
use crate::cuda::driver::buffers::{download, upload, upload_range, DevBuf, HostBuf};
use crate::cuda::driver::{cuda_err, Launch};
use crate::cuda::kernels::params::LkArgs;
use crate::cuda::Gpu;
use crate::error::{Error, Result};

/// The points' buffers, grown when a call brings more points (rare; never shrunk).
pub struct GpuLk {
    /// Around each `lk_track` launch while `timed` (timing events, made once): its GPU time.
    start: CudaEvent,
    end: CudaEvent,
    kernel_ms: f64,
    /// The launches timed ([`GpuLk::set_timed`]; off by default: the two event records cost
    /// host time on the frame's path).
    timed: bool,
    /// The points' (x, y), and their initial guesses.
    pts: DevBuf<[f32; 2]>,
    init: DevBuf<[f32; 2]>,
    /// (x, y, status, error) per point, then per flow-back point.
    out: DevBuf<[f32; 4]>,
    host_in: HostBuf,
    host_out: HostBuf,
    cap: usize,
    /// The last [`GpuLk::launch`] not yet collected: its points, whether it tracked back
    /// too, whether it was timed.
    pending: Option<(usize, bool, bool)>,
}

impl GpuLk {
    /// The last `lk_track` launch's GPU time (CUDA events), ms; NaN before the first, and
    /// when it was not timed ([`GpuLk::set_timed`]).
    pub fn kernel_ms(&self) -> f64 {
        self.kernel_ms
    }

    /// Times the launches from now on (`bench --tracks`), or not.
    pub fn set_timed(&mut self, on: bool) {
        self.timed = on;
    }

    pub fn new(gpu: &Gpu, capacity: usize) -> Result<Self> {
        let c = &gpu.ctx;
        let cap = capacity.max(64);
        let ev = || {
            c.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| cuda_err("creating a timing event", e))
        };
        Ok(GpuLk {
            start: ev()?,
            end: ev()?,
            kernel_ms: f64::NAN,
            timed: false,
            pts: DevBuf::new(c, cap)?,
            init: DevBuf::new(c, cap)?,
            out: DevBuf::new(c, cap * 2)?,
            host_in: HostBuf::new(c, cap * 16, true)?,
            host_out: HostBuf::new(c, cap * 32, false)?,
            cap,
            pending: None,
        })
    }

    /// `cv::calcOpticalFlowPyrLK` on two GPU pyramids (`prev` with derivatives), as
    /// `cpu::lk::track`; with `back`, each point whose forward status holds is then tracked
    /// back (`next` -> `prev`, from its forward position, `back.0`'s levels; with `back.1`
    /// the initial flow is its previous position; `next` needs its derivatives too) in the
    /// same launch, into `back_out` (status false for the others). One download, one wait.
    #[allow(clippy::too_many_arguments)]
    pub fn track(
        &mut self,
        gpu: &Gpu,
        prev: &GpuFlowPyramid,
        next: &GpuFlowPyramid,
        prev_pts: &[(f32, f32)],
        initial: Option<&[(f32, f32)]>,
        p: &LkParams,
        back: Option<(&LkParams, bool)>,
        out: &mut Vec<Flow>,
        back_out: &mut Vec<Flow>,
    ) -> Result<()> {
        let mut nothing = || Ok(());
        self.launch(gpu, (prev, next), prev_pts, initial, p, back, &mut nothing)?;
        self.collect(gpu, out, back_out)
    }

    /// The points (and their initial guesses) into pinned memory and up to the device (no
    /// sync).
    fn upload_points(
        &mut self,
        gpu: &Gpu,
        prev_pts: &[(f32, f32)],
        initial: Option<&[(f32, f32)]>,
    ) -> Result<()> {
        let n = prev_pts.len();
        {
            let h = self.host_in.as_mut_slice();
            for (i, &(x, y)) in prev_pts.iter().enumerate() {
                h[8 * i..8 * i + 4].copy_from_slice(&x.to_le_bytes());
                h[8 * i + 4..8 * i + 8].copy_from_slice(&y.to_le_bytes());
            }
            if let Some(init) = initial {
                let o = 8 * self.cap;
                for (i, &(x, y)) in init.iter().enumerate() {
                    h[o + 8 * i..o + 8 * i + 4].copy_from_slice(&x.to_le_bytes());
                    h[o + 8 * i + 4..o + 8 * i + 8].copy_from_slice(&y.to_le_bytes());
                }
            }
        }
        upload(&gpu.track, &self.host_in, self.pts.ptr(), n * 8)?;
        if initial.is_some() {
            upload_range(
                &gpu.track,
                &self.host_in,
                8 * self.cap,
                self.init.ptr(),
                n * 8,
            )?;
        }
        Ok(())
    }

    /// After the sync: the `n` flows (and with `back`, the `n` flow-back ones) from pinned
    /// memory.
    fn read_flows(&self, n: usize, back: bool, out: &mut Vec<Flow>, back_out: &mut Vec<Flow>) {
        let h = self.host_out.as_slice();
        let f = |o: usize| f32::from_le_bytes(h[o..o + 4].try_into().unwrap());
        let flow = |i: usize| Flow {
            x: f(16 * i),
            y: f(16 * i + 4),
            status: f(16 * i + 8) != 0.0,
            err: f(16 * i + 12),
        };
        out.extend((0..n).map(flow));
        if back {
            back_out.extend((n..2 * n).map(flow));
        }
    }

    /// The first half of [`GpuLk::track`]: the points up, the launch and its download
    /// queued on the tracker's stream, then `during` (work for the host, or more work
    /// queued on another stream, while the GPU tracks; not run when there are no points);
    /// no wait. [`GpuLk::collect`] brings
    /// the flows; a later launch drops these uncollected.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &mut self,
        gpu: &Gpu,
        (prev, next): (&GpuFlowPyramid, &GpuFlowPyramid),
        prev_pts: &[(f32, f32)],
        initial: Option<&[(f32, f32)]>,
        p: &LkParams,
        back: Option<(&LkParams, bool)>,
        during: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        // A launch not collected still reads the points' pinned buffer.
        if self.pending.take().is_some_and(|(n, ..)| n > 0) {
            gpu.sync_track()?;
        }
        let n = prev_pts.len();
        self.pending = Some((0, false, false));
        if n == 0 {
            return Ok(());
        }
        if !prev.derivs_ready || (back.is_some() && !next.derivs_ready) {
            return Err(Error::Cuda(
                "the LK pyramid tracked from needs its derivatives".into(),
            ));
        }
        if n > self.cap {
            let timed = self.timed;
            *self = GpuLk::new(gpu, n.next_power_of_two())?;
            self.timed = timed;
        }
        self.upload_points(gpu, prev_pts, initial)?;
        let levels = |q: &LkParams| q.max_level.min(prev.max_level()).min(next.max_level());
        let e = p.epsilon.clamp(0.0, 10.0);
        let win = p.window;
        let blocks = if win >= 8 { (win - 8) / 8 + 1 } else { 0 };
        let tail = win - 8 * blocks;
        // Floats per chain: the longest chain (and the error pass's window, over all 15), a
        // multiple of 4 that is 4 mod 32 (16-byte loads without bank conflicts).
        let mut chain = (win * blocks * 2)
            .max(win * tail)
            .max((win * win).div_ceil(15))
            .next_multiple_of(4);
        if chain % 32 != 4 {
            chain += (36 - chain % 32) % 32;
        }
        let args = LkArgs {
            win: win as i32,
            pad: prev.window as i32,
            max_level: levels(p) as i32,
            max_iter: p.max_iter.min(100) as i32,
            use_initial: initial.is_some() as i32,
            n: n as i32,
            min_eig: p.min_eig_threshold,
            eps: e * e,
            back_level: back.map_or(-1, |b| levels(b.0) as i32),
            back_initial: back.is_some_and(|b| b.1) as i32,
            chain: chain as i32,
        };
        let (pa, pb) = (prev.desc(), next.desc());
        let (pts, init, res) = (self.pts.ptr(), self.init.ptr(), self.out.ptr());
        // A block per point, its warps sharing each window's rows (2 or 3 rows each).
        let shared = (4 * (15 * chain + 16 + 3 * win * win)) as u32;
        let warps = win.div_ceil(2).min(MAX_WARPS) as u32;
        if self.timed {
            self.start
                .record(&gpu.track)
                .map_err(|e| cuda_err("recording an event", e))?;
        }
        // SAFETY: `lk_track`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.lk.lk_track(
                gpu,
                Launch::new((n as u32, 1, 1), (32 * warps, 1, 1))
                    .shared(shared)
                    .on(&gpu.track),
                pa,
                pb,
                pts,
                init,
                res,
                args,
            )
        }?;
        if self.timed {
            self.end
                .record(&gpu.track)
                .map_err(|e| cuda_err("recording an event", e))?;
        }
        let results = if back.is_some() { 2 * n } else { n };
        download(&gpu.track, res, &mut self.host_out, 0, results * 16)?;
        self.pending = Some((n, back.is_some(), self.timed));
        during()
    }

    /// The second half of [`GpuLk::track`]: waits for the last launch and reads its
    /// flows into `out` (and `back_out`); both empty when it had no points. An error when
    /// nothing was launched since the last collect.
    pub fn collect(
        &mut self,
        gpu: &Gpu,
        out: &mut Vec<Flow>,
        back_out: &mut Vec<Flow>,
    ) -> Result<()> {
        out.clear();
        back_out.clear();
        let Some((n, back, timed)) = self.pending.take() else {
            return Err(Error::Cuda("LK: no launch to collect".into()));
        };
        if n == 0 {
            return Ok(());
        }
        gpu.sync_track()?;
        self.kernel_ms = match timed {
            true => self
                .start
                .elapsed_ms(&self.end)
                .map_or(f64::NAN, |ms| ms as f64),
            false => f64::NAN,
        };
        self.read_flows(n, back, out, back_out);
        Ok(())
    }
}
