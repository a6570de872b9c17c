//! Pyramidal LK on the GPU (host side of `kernels/lk.cu`), equal bit for bit to
//! `cpu::lk`: the frame's pyramid (`lk_border`, `lk_pyrdown`), its Scharr derivatives
//! (`lk_scharr`) and every point tracked through every level in one launch (`lk_track`, a
//! warp per point). Buffers are sized once per resolution and window; per frame: one upload
//! of the gray image, the points' upload and the results' download.

use cudarc::driver::result;

use super::buffers::{download, upload, DevBuf, HostBuf};
use super::context::{cuda_err, Gpu};
use crate::cpu::lk::{Flow, LkParams};
use crate::error::{Error, Result};
use crate::image::GrayImage;

/// Mirrors `LK_MAX_LEVELS` in kernels/lk.cu.
const MAX_LEVELS: usize = 8;
/// Largest window the kernel's shared memory holds (4 ints per window pixel per warp).
pub const MAX_WINDOW: usize = 31;
const WARPS_PER_BLOCK: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct LkLevel {
    img: u64,
    der: u64,
    w: i32,
    h: i32,
    stride: i32,
    dstride: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct LkPyr {
    lv: [LkLevel; MAX_LEVELS],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct LkArgs {
    win: i32,
    pad: i32,
    max_level: i32,
    max_iter: i32,
    use_initial: i32,
    n: i32,
    min_eig: f32,
    eps: f64,
}

struct Level {
    img: DevBuf,
    der: DevBuf,
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
}

impl GpuFlowPyramid {
    pub fn new() -> Self {
        GpuFlowPyramid {
            levels: Vec::new(),
            staging: None,
            window: 0,
            size: (0, 0),
            derivs_ready: false,
        }
    }

    pub fn max_level(&self) -> usize {
        self.levels.len().saturating_sub(1)
    }

    /// The level sizes OpenCV builds for an image of `w x h`.
    fn sizes(w: usize, h: usize, window: usize, max_level: usize) -> Vec<(usize, usize)> {
        let mut v = vec![(w, h)];
        let (mut cw, mut ch) = (w, h);
        for _ in 0..max_level {
            let (nw, nh) = (cw.div_ceil(2), ch.div_ceil(2));
            if nw <= window || nh <= window {
                break;
            }
            v.push((nw, nh));
            (cw, ch) = (nw, nh);
        }
        v
    }

    /// Uploads `img` and builds its levels on `gpu`'s stream (no sync).
    pub fn build(
        &mut self,
        gpu: &Gpu,
        img: &GrayImage,
        window: usize,
        max_level: usize,
    ) -> Result<()> {
        if !(5..=MAX_WINDOW).contains(&window) {
            return Err(Error::Config(format!(
                "track.window {window}: the GPU tracker takes 5..={MAX_WINDOW}"
            )));
        }
        let pad = window;
        let sizes = Self::sizes(img.width, img.height, window, max_level.min(MAX_LEVELS - 1));
        if (img.width, img.height) != self.size
            || window != self.window
            || sizes.len() != self.levels.len()
        {
            self.levels.clear();
            for &(w, h) in &sizes {
                let bytes = (w + 2 * pad) * (h + 2 * pad);
                let der = DevBuf::new(&gpu.ctx, bytes * 4)?;
                // The derivatives' border is zero for good (BORDER_CONSTANT).
                unsafe { result::memset_d8_sync(der.ptr(), 0, bytes * 4) }
                    .map_err(|e| cuda_err("clearing the LK derivatives", e))?;
                self.levels.push(Level {
                    img: DevBuf::new(&gpu.ctx, bytes)?,
                    der,
                    w,
                    h,
                });
            }
            let (w, h) = sizes[0];
            self.staging = Some(HostBuf::new(&gpu.ctx, (w + 2 * pad) * (h + 2 * pad), true)?);
            self.size = (img.width, img.height);
            self.window = window;
        }
        self.derivs_ready = false;
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
        upload(&gpu.stream, st, self.levels[0].img.ptr(), bytes)?;
        for l in 0..self.levels.len() {
            if l > 0 {
                let (src, dst) = (&self.levels[l - 1], &self.levels[l]);
                let (s, spad, sstride) = (src.img.ptr(), pad as i32, (src.w + 2 * pad) as i32);
                let (d, dw, dh) = (dst.img.ptr(), dst.w as i32, dst.h as i32);
                let (dpad, dstride) = (pad as i32, (dst.w + 2 * pad) as i32);
                let n = (dst.w * dst.h) as u32;
                gpu.launch(
                    "lk_pyrdown",
                    &gpu.k.lk_pyrdown,
                    (n.div_ceil(256), 1, 1),
                    (256, 1, 1),
                    0,
                    &mut kargs![s, spad, sstride, d, dw, dh, dpad, dstride],
                )?;
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
            gpu.launch(
                "lk_border",
                &gpu.k.lk_border,
                (n.div_ceil(256), 1, 1),
                (256, 1, 1),
                0,
                &mut kargs![p, w, h, padi, stride],
            )?;
        }
        Ok(())
    }

    /// The Scharr derivatives of every level (once per frame, only for a frame tracked from).
    pub fn ensure_derivatives(&mut self, gpu: &Gpu) -> Result<()> {
        if self.derivs_ready {
            return Ok(());
        }
        let pad = self.window;
        for lv in &self.levels {
            let (img, w, h, padi) = (lv.img.ptr(), lv.w as i32, lv.h as i32, pad as i32);
            let stride = (lv.w + 2 * pad) as i32;
            let (der, dstride) = (lv.der.ptr(), stride * 2);
            let n = (lv.w * lv.h) as u32;
            gpu.launch(
                "lk_scharr",
                &gpu.k.lk_scharr,
                (n.div_ceil(256), 1, 1),
                (256, 1, 1),
                0,
                &mut kargs![img, w, h, padi, stride, der, dstride],
            )?;
        }
        self.derivs_ready = true;
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
    pts: DevBuf,
    init: DevBuf,
    out: DevBuf,
    host_in: HostBuf,
    host_out: HostBuf,
    cap: usize,
}

impl GpuLk {
    pub fn new(gpu: &Gpu, capacity: usize) -> Result<Self> {
        let c = &gpu.ctx;
        let cap = capacity.max(64);
        Ok(GpuLk {
            pts: DevBuf::new(c, cap * 8)?,
            init: DevBuf::new(c, cap * 8)?,
            out: DevBuf::new(c, cap * 16)?,
            host_in: HostBuf::new(c, cap * 16, true)?,
            host_out: HostBuf::new(c, cap * 16, false)?,
            cap,
        })
    }

    /// `cv::calcOpticalFlowPyrLK` on two GPU pyramids (`prev` with derivatives), as
    /// `cpu::lk::track`; waits for the result.
    #[allow(clippy::too_many_arguments)]
    pub fn track(
        &mut self,
        gpu: &Gpu,
        prev: &GpuFlowPyramid,
        next: &GpuFlowPyramid,
        prev_pts: &[(f32, f32)],
        initial: Option<&[(f32, f32)]>,
        p: &LkParams,
        out: &mut Vec<Flow>,
    ) -> Result<()> {
        out.clear();
        let n = prev_pts.len();
        if n == 0 {
            return Ok(());
        }
        if !prev.derivs_ready {
            return Err(Error::Cuda(
                "the previous LK pyramid needs its derivatives".into(),
            ));
        }
        if n > self.cap {
            *self = GpuLk::new(gpu, n.next_power_of_two())?;
        }
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
        upload(&gpu.stream, &self.host_in, self.pts.ptr(), n * 8)?;
        if initial.is_some() {
            super::buffers::upload_range(
                &gpu.stream,
                &self.host_in,
                8 * self.cap,
                self.init.ptr(),
                n * 8,
            )?;
        }
        let max_level = p.max_level.min(prev.max_level()).min(next.max_level());
        let e = p.epsilon.clamp(0.0, 10.0);
        let args = LkArgs {
            win: p.window as i32,
            pad: prev.window as i32,
            max_level: max_level as i32,
            max_iter: p.max_iter.min(100) as i32,
            use_initial: initial.is_some() as i32,
            n: n as i32,
            min_eig: p.min_eig_threshold,
            eps: e * e,
        };
        let (pa, pb) = (prev.desc(), next.desc());
        let (pts, init, res) = (self.pts.ptr(), self.init.ptr(), self.out.ptr());
        let shared = WARPS_PER_BLOCK * 16 * (p.window * p.window) as u32;
        gpu.launch(
            "lk_track",
            &gpu.k.lk_track,
            ((n as u32).div_ceil(WARPS_PER_BLOCK), 1, 1),
            (32 * WARPS_PER_BLOCK, 1, 1),
            shared,
            &mut kargs![pa, pb, pts, init, res, args],
        )?;
        download(&gpu.stream, res, &mut self.host_out, 0, n * 16)?;
        gpu.sync()?;
        let h = self.host_out.as_slice();
        let f = |o: usize| f32::from_le_bytes(h[o..o + 4].try_into().unwrap());
        out.extend((0..n).map(|i| Flow {
            x: f(16 * i),
            y: f(16 * i + 4),
            status: f(16 * i + 8) != 0.0,
            err: f(16 * i + 12),
        }));
        Ok(())
    }
}
