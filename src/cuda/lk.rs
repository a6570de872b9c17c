//! Pyramidal LK on the GPU (host side of `kernels/lk.cu`), equal bit for bit to
//! `cpu::lk`: the frame's pyramid (`lk_border`, `lk_pyrdown`), its Scharr derivatives
//! (`lk_scharr`) and every point tracked through every level in one launch (`lk_track`, a
//! block per point). Buffers are sized once per resolution and window; per frame: one upload
//! of the gray image, the points' upload and the results' download.

use cudarc::driver::{sys, CudaEvent};

use super::driver::buffers::{copy_rows_on_device, download, upload, DevBuf, HostBuf};
use super::driver::cuda_err;
use super::driver::graph::Graph;
use super::driver::Launch;
use super::kernels::params::{LkArgs, LkLevel, LkPyr, LK_MAX_LEVELS as MAX_LEVELS};
use super::Gpu;
use crate::cpu::lk::{Flow, LkParams};
use crate::error::{Error, Result};
use crate::image::GrayImage;

/// Largest window the kernel takes (a lane per window column).
pub const MAX_WINDOW: usize = 31;
/// Warps per point at most (`LK_MAX_THREADS` / 32 in kernels/lk.cu).
const MAX_WARPS: usize = 12;

struct Level {
    img: DevBuf<u8>,
    /// The Scharr derivatives, (x, y) interleaved.
    der: DevBuf<i16>,
    w: usize,
    h: usize,
}

/// One frame's LK pyramid on the GPU (`cv::buildOpticalFlowPyramid`).
pub struct GpuFlowPyramid {
    levels: Vec<Level>,
    /// The padded level 0 as it is uploaded.
    staging: Option<HostBuf>,
    window: usize,
    size: (usize, usize),
    derivs_ready: bool,
    /// The launches after level 0's interior (its border, the other levels and their
    /// borders, every level's derivatives) as one CUDA graph, recorded on the first frame
    /// of these buffers.
    graph: Option<Graph>,
    /// Recorded after [`GpuFlowPyramid::build_from_device`]'s copy: the source may be
    /// reused once it has passed ([`GpuFlowPyramid::wait_source`]).
    copied: Option<CudaEvent>,
}

impl GpuFlowPyramid {
    pub fn new() -> Self {
        GpuFlowPyramid {
            levels: Vec::new(),
            staging: None,
            window: 0,
            size: (0, 0),
            derivs_ready: false,
            graph: None,
            copied: None,
        }
    }

    /// Level 0 on the GPU as goodFeaturesToTrack takes it (pixel (0, 0), row pitch), once
    /// built.
    pub fn level0(&self) -> Option<super::gftt::GfttInput<'static>> {
        let l = self.levels.first()?;
        let pad = self.window;
        let pitch = l.w + 2 * pad;
        Some(super::gftt::GfttInput::Device {
            ptr: l.img.ptr().offset(pad * pitch + pad),
            pitch,
            width: l.w,
            height: l.h,
        })
    }

    pub fn max_level(&self) -> usize {
        self.levels.len().saturating_sub(1)
    }

    /// The level sizes OpenCV builds for an image of `w x h` (the first `.1` entries; on
    /// the stack: a frame allocates nothing).
    fn sizes(
        w: usize,
        h: usize,
        window: usize,
        max_level: usize,
    ) -> ([(usize, usize); MAX_LEVELS], usize) {
        let mut v = [(0, 0); MAX_LEVELS];
        v[0] = (w, h);
        let mut n = 1;
        let (mut cw, mut ch) = (w, h);
        for _ in 0..max_level.min(MAX_LEVELS - 1) {
            let (nw, nh) = (cw.div_ceil(2), ch.div_ceil(2));
            if nw <= window || nh <= window {
                break;
            }
            v[n] = (nw, nh);
            n += 1;
            (cw, ch) = (nw, nh);
        }
        (v, n)
    }

    /// The buffers for a `width x height` frame's pyramid (kept while the shape repeats).
    fn prepare(
        &mut self,
        gpu: &Gpu,
        (width, height): (usize, usize),
        window: usize,
        max_level: usize,
    ) -> Result<()> {
        if !(5..=MAX_WINDOW).contains(&window) {
            return Err(Error::Config(format!(
                "track.window {window}: the GPU tracker takes 5..={MAX_WINDOW}"
            )));
        }
        let pad = window;
        let (all_sizes, n_sizes) =
            Self::sizes(width, height, window, max_level.min(MAX_LEVELS - 1));
        let sizes = &all_sizes[..n_sizes];
        if (width, height) != self.size || window != self.window || sizes.len() != self.levels.len()
        {
            self.levels.clear();
            for &(w, h) in sizes {
                let bytes = (w + 2 * pad) * (h + 2 * pad);
                let der = DevBuf::new(&gpu.ctx, bytes * 2)?;
                // The derivatives' border is zero for good (BORDER_CONSTANT).
                der.fill_sync(0..der.len(), 0)?;
                self.levels.push(Level {
                    img: DevBuf::new(&gpu.ctx, bytes)?,
                    der,
                    w,
                    h,
                });
            }
            let (w, h) = sizes[0];
            self.staging = Some(HostBuf::new(&gpu.ctx, (w + 2 * pad) * (h + 2 * pad), true)?);
            self.size = (width, height);
            self.window = window;
            self.graph = None;
        }
        self.derivs_ready = false;
        Ok(())
    }

    /// Uploads `img` and builds its levels on the tracker's stream (`gpu.track`, no sync).
    pub fn build(
        &mut self,
        gpu: &Gpu,
        img: &GrayImage,
        window: usize,
        max_level: usize,
    ) -> Result<()> {
        self.prepare(gpu, (img.width, img.height), window, max_level)?;
        let pad = window;
        let stride = img.width + 2 * pad;
        let st = self.staging.as_mut().expect("allocated above");
        {
            let s = st.as_mut_slice();
            for y in 0..img.height {
                let o = (y + pad) * stride + pad;
                s[o..o + img.width].copy_from_slice(img.row(y));
            }
        }
        let bytes = stride * (img.height + 2 * pad);
        upload(&gpu.track, st, self.levels[0].img.ptr(), bytes)?;
        self.build_levels(gpu)
    }

    /// [`GpuFlowPyramid::build`] from a gray image already on the device (the pipeline's,
    /// `crate::cuda::CudaPipeline::gray_on_device`): copied into level 0 on the device,
    /// no upload, no sync. The source must stay as it is until [`GpuFlowPyramid::wait_source`]
    /// returns (the pipeline's next frame overwrites it).
    pub fn build_from_device(
        &mut self,
        gpu: &Gpu,
        src: super::DeviceGray<'_>,
        window: usize,
        max_level: usize,
    ) -> Result<()> {
        self.prepare(gpu, (src.width(), src.height()), window, max_level)?;
        // Into level 0's interior (`prepare` sized it for this frame); the source lives
        // until the caller's next frame, which comes after the wait below.
        let (pad, stride) = (window, src.width() + 2 * window);
        let interior = self.levels[0].img.ptr().offset(pad * stride + pad);
        copy_rows_on_device(
            &gpu.track,
            (src.ptr(), src.pitch()),
            (interior, stride),
            (src.width(), src.height()),
            "copying the pipeline's gray frame",
        )?;
        let copied = match &mut self.copied {
            Some(e) => e,
            None => self.copied.insert(
                gpu.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .map_err(|e| cuda_err("creating an event", e))?,
            ),
        };
        copied
            .record(&gpu.track)
            .map_err(|e| cuda_err("recording an event", e))?;
        self.build_levels(gpu)
    }

    /// Waits until the source of the last [`GpuFlowPyramid::build_from_device`] has been
    /// copied (at once when a later wait on the stream covered it, as LK's download does).
    pub fn wait_source(&self) -> Result<()> {
        match &self.copied {
            Some(e) => e
                .synchronize()
                .map_err(|e| cuda_err("waiting for the frame's copy", e)),
            None => Ok(()),
        }
    }

    /// Level 0's border, then levels 1.. and their borders, from level 0's interior, and
    /// every level's derivatives (LK reads them from every frame it tracks from or back
    /// into: with the flow-back check, every frame as soon as it is built): one graph
    /// replay (12 launches one by one at 3 levels before it, performance.md change 60).
    fn build_levels(&mut self, gpu: &Gpu) -> Result<()> {
        let graph = match &mut self.graph {
            Some(g) => g,
            None => {
                let g = Graph::record(gpu, &gpu.track, || {
                    self.queue_levels(gpu)?;
                    self.queue_derivatives(gpu)
                })?;
                self.graph.insert(g)
            }
        };
        graph.launch(gpu, "the LK pyramid's graph")?;
        self.derivs_ready = true;
        Ok(())
    }

    /// [`GpuFlowPyramid::build_levels`]'s pyramid launches, one by one.
    fn queue_levels(&self, gpu: &Gpu) -> Result<()> {
        let pad = self.window;
        for l in 0..self.levels.len() {
            if l > 0 {
                let (src, dst) = (&self.levels[l - 1], &self.levels[l]);
                let (s, spad, sstride) = (src.img.ptr(), pad as i32, (src.w + 2 * pad) as i32);
                let (d, dw, dh) = (dst.img.ptr(), dst.w as i32, dst.h as i32);
                let (dpad, dstride) = (pad as i32, (dst.w + 2 * pad) as i32);
                let n = (dst.w * dst.h) as u32;
                // SAFETY: `lk_pyrdown`'s buffers are this context's, sized for this launch when the
                // stage was built.
                unsafe {
                    gpu.k.lk.lk_pyrdown(
                        gpu,
                        Launch::new((n.div_ceil(256), 1, 1), (256, 1, 1)).on(&gpu.track),
                        s,
                        spad,
                        sstride,
                        d,
                        dw,
                        dh,
                        dpad,
                        dstride,
                    )
                }?;
            }
            let lv = &self.levels[l];
            let (p, w, h, padi, stride) = (
                lv.img.ptr(),
                lv.w as i32,
                lv.h as i32,
                pad as i32,
                (lv.w + 2 * pad) as i32,
            );
            let n = ((lv.w + 2 * pad) * (lv.h + 2 * pad)) as u32;
            // SAFETY: `lk_border`'s buffers are this context's, sized for this launch when the
            // stage was built.
            unsafe {
                gpu.k.lk.lk_border(
                    gpu,
                    Launch::new((n.div_ceil(256), 1, 1), (256, 1, 1)).on(&gpu.track),
                    p,
                    w,
                    h,
                    padi,
                    stride,
                )
            }?;
        }
        Ok(())
    }

    /// The Scharr derivatives of every level (once per frame, only for a frame tracked from).
    pub fn ensure_derivatives(&mut self, gpu: &Gpu) -> Result<()> {
        if self.derivs_ready {
            return Ok(());
        }
        self.queue_derivatives(gpu)?;
        self.derivs_ready = true;
        Ok(())
    }

    /// Every level's Scharr derivatives, one launch per level.
    fn queue_derivatives(&self, gpu: &Gpu) -> Result<()> {
        let pad = self.window;
        for lv in &self.levels {
            let (img, w, h, padi) = (lv.img.ptr(), lv.w as i32, lv.h as i32, pad as i32);
            let stride = (lv.w + 2 * pad) as i32;
            let (der, dstride) = (lv.der.ptr(), stride * 2);
            let n = (lv.w * lv.h) as u32;
            // SAFETY: `lk_scharr`'s buffers are this context's, sized for this launch when the
            // stage was built.
            unsafe {
                gpu.k.lk.lk_scharr(
                    gpu,
                    Launch::new((n.div_ceil(256), 1, 1), (256, 1, 1)).on(&gpu.track),
                    img,
                    w,
                    h,
                    padi,
                    stride,
                    der,
                    dstride,
                )
            }?;
        }
        Ok(())
    }

    fn desc(&self) -> LkPyr {
        let pad = self.window;
        let mut p = LkPyr::default();
        for (d, lv) in p.lv.iter_mut().zip(&self.levels) {
            let stride = lv.w + 2 * pad;
            *d = LkLevel {
                img: lv.img.ptr(),
                der: lv.der.ptr(),
                w: lv.w as i32,
                h: lv.h as i32,
                stride: stride as i32,
                dstride: (stride * 2) as i32,
            };
        }
        p
    }
}

impl Default for GpuFlowPyramid {
    fn default() -> Self {
        Self::new()
    }
}

/// The points' buffers, grown when a call brings more points (rare; never shrunk).
pub struct GpuLk {
    /// Around each `lk_track` launch (timing events, made once): its GPU time.
    start: CudaEvent,
    end: CudaEvent,
    kernel_ms: f64,
    /// The points' (x, y), and their initial guesses.
    pts: DevBuf<[f32; 2]>,
    init: DevBuf<[f32; 2]>,
    /// (x, y, status, error) per point, then per flow-back point.
    out: DevBuf<[f32; 4]>,
    host_in: HostBuf,
    host_out: HostBuf,
    cap: usize,
    /// The last [`GpuLk::launch`] not yet collected: its points, and whether it tracked
    /// back too.
    pending: Option<(usize, bool)>,
}

impl GpuLk {
    /// The last `lk_track` launch's GPU time (CUDA events), ms; NaN before the first.
    pub fn kernel_ms(&self) -> f64 {
        self.kernel_ms
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
        self.track_with(
            gpu,
            prev,
            next,
            prev_pts,
            initial,
            p,
            back,
            out,
            back_out,
            &mut nothing,
        )
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
            super::driver::buffers::upload_range(
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

    /// [`GpuLk::track`], running `during` once the launch and its download are queued and
    /// before the wait for them (work for the host, or more work queued on another stream,
    /// while the GPU tracks; not run when there are no points).
    #[allow(clippy::too_many_arguments)]
    pub fn track_with(
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
        during: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        self.launch(gpu, (prev, next), prev_pts, initial, p, back, during)?;
        self.collect(gpu, out, back_out)
    }

    /// The first half of [`GpuLk::track_with`]: the points up, the launch and its download
    /// queued on the tracker's stream, then `during`; no wait. [`GpuLk::collect`] brings
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
        if self.pending.take().is_some_and(|(n, _)| n > 0) {
            gpu.sync_track()?;
        }
        let n = prev_pts.len();
        self.pending = Some((0, false));
        if n == 0 {
            return Ok(());
        }
        if !prev.derivs_ready || (back.is_some() && !next.derivs_ready) {
            return Err(Error::Cuda(
                "the LK pyramid tracked from needs its derivatives".into(),
            ));
        }
        if n > self.cap {
            *self = GpuLk::new(gpu, n.next_power_of_two())?;
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
        self.start
            .record(&gpu.track)
            .map_err(|e| cuda_err("recording an event", e))?;
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
        self.end
            .record(&gpu.track)
            .map_err(|e| cuda_err("recording an event", e))?;
        let results = if back.is_some() { 2 * n } else { n };
        download(&gpu.track, res, &mut self.host_out, 0, results * 16)?;
        self.pending = Some((n, back.is_some()));
        during()
    }

    /// The second half of [`GpuLk::track_with`]: waits for the last launch and reads its
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
        let Some((n, back)) = self.pending.take() else {
            return Err(Error::Cuda("LK: no launch to collect".into()));
        };
        if n == 0 {
            return Ok(());
        }
        gpu.sync_track()?;
        self.kernel_ms = self
            .start
            .elapsed_ms(&self.end)
            .map_or(f64::NAN, |ms| ms as f64);
        self.read_flows(n, back, out, back_out);
        Ok(())
    }
}
