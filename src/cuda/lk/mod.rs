//! Pyramidal LK on the GPU (host side of `kernels/lk.cu`), equal bit for bit to
//! `cpu::lk`: the frame's pyramid (`lk_border`, `lk_pyrdown`), its Scharr derivatives
//! (`lk_scharr`) and every point tracked through every level in one launch (`lk_track`, a
//! block per point). Buffers are sized once per resolution and window; per frame: one upload
//! of the gray image, the points' upload and the results' download.

use cudarc::driver::{sys, CudaEvent};

use super::driver::buffers::{copy_rows_on_device, upload, DevBuf, HostBuf};
use super::driver::cuda_err;
use super::driver::graph::{Graph, GraphCache};
use super::driver::Launch;
use super::kernels::params::{LkLevel, LkPyr, LK_MAX_LEVELS as MAX_LEVELS};
use super::Gpu;
use crate::error::{Error, Result};
use crate::image::GrayImage;

mod flow;
pub use self::flow::GpuLk;

/// Largest window the kernel takes (a lane per window column).
pub const MAX_WINDOW: usize = 31;
/// Sources a pyramid records a graph from at most ([`GpuFlowPyramid::build_from_device`]).
const SOURCE_GRAPHS: usize = 4;
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
    /// [`GpuFlowPyramid::build_from_device`]'s copy, its event and `graph`'s launches as
    /// one graph per source (its address and row pitch: the pipeline's gray buffers),
    /// recorded on the first frame from it (three calls before).
    from_device: GraphCache<(u64, usize)>,
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
            from_device: GraphCache::new(SOURCE_GRAPHS),
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
            self.from_device.clear();
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
        if self.copied.is_none() {
            let e = gpu
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(|e| cuda_err("creating an event", e))?;
            self.copied = Some(e);
        }
        let key = (src.ptr().addr(), src.pitch());
        let name = "the LK pyramid's graph from the device";
        if let Some(g) = self.from_device.get_mut(&key) {
            g.launch(gpu, name)?;
        } else if self.from_device.recorded() >= SOURCE_GRAPHS {
            // A pyramid fed from more sources than that (the stereo pair's kept frames take
            // turns) goes without: a recording costs more than it saves.
            self.queue_copy(gpu, src, false)?;
            return self.build_levels(gpu);
        } else {
            let g = Graph::record(gpu, &gpu.track, || {
                self.queue_copy(gpu, src, true)?;
                self.queue_levels(gpu)?;
                self.queue_derivatives(gpu)
            })?;
            self.from_device.insert(key, g).launch(gpu, name)?;
        }
        self.derivs_ready = true;
        Ok(())
    }

    /// `src` copied into level 0's interior (`prepare` sized it for this frame), then the
    /// `copied` event, queued on the tracker's stream (`in_graph`: inside a graph's
    /// capture, where the event becomes a node recorded at each replay).
    fn queue_copy(&self, gpu: &Gpu, src: super::DeviceGray<'_>, in_graph: bool) -> Result<()> {
        let (pad, stride) = (self.window, src.width() + 2 * self.window);
        let interior = self.levels[0].img.ptr().offset(pad * stride + pad);
        copy_rows_on_device(
            &gpu.track,
            (src.ptr(), src.pitch()),
            (interior, stride),
            (src.width(), src.height()),
            "copying the pipeline's gray frame",
        )?;
        let copied = self.copied.as_ref().expect("made before the capture");
        super::driver::graph::mark(copied, &gpu.track, in_graph)
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
