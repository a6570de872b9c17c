//! Canny on the GPU (host side of `kernels/canny.cu`): optional bit-exact Gaussian blur,
//! the fused Sobel/magnitude/NMS/threshold kernel, then exact union-find hysteresis.

use super::buffers::{download, DevBuf, HostBuf};
use super::context::Gpu;
use crate::config::CannyConfig;
use crate::cpu::canny::thresholds;
use crate::error::Result;

pub struct Canny {
    w: usize,
    h: usize,
    cls: DevBuf,
    label: DevBuf,
    edges: DevBuf,
    /// Blur buffers and the fixed-point kernel, when the config blurs.
    blur: Option<(DevBuf, DevBuf, DevBuf, usize)>,
    host_edges: HostBuf,
}

impl Canny {
    pub fn new(gpu: &Gpu, w: usize, h: usize, cfg: &CannyConfig) -> Result<Self> {
        let c = &gpu.ctx;
        let n = w * h;
        let blur = if cfg.blur_ksize > 0 {
            let k = crate::cpu::blur::gaussian_kernel_fixed(
                cfg.blur_ksize as usize,
                cfg.blur_sigma.max(0.0),
            );
            Some((
                DevBuf::new(c, n * 2)?,
                DevBuf::new(c, n)?,
                DevBuf::from_slice(c, &k)?,
                k.len(),
            ))
        } else {
            None
        };
        Ok(Canny {
            w,
            h,
            cls: DevBuf::new(c, n)?,
            label: DevBuf::new(c, n * 4)?,
            edges: DevBuf::new(c, n)?,
            blur,
            host_edges: HostBuf::new(c, n, false)?,
        })
    }

    /// Queues the whole Canny on the stream, edges into the device buffer and then into
    /// pinned host memory (no sync).
    pub fn run(&mut self, gpu: &Gpu, src: u64, cfg: &CannyConfig) -> Result<()> {
        let (w, h) = (self.w as i32, self.h as i32);
        let grid = (self.w.div_ceil(32) as u32, self.h.div_ceil(8) as u32, 1);
        let block = (32, 8, 1);
        let mut img = src;
        if let Some((tmp, blurred, kernel, ksize)) = &self.blur {
            let (t, b, k, ks) = (tmp.ptr(), blurred.ptr(), kernel.ptr(), *ksize as i32);
            gpu.launch(
                "blur_h",
                &gpu.k.blur_h,
                grid,
                block,
                0,
                &mut kargs![src, w, h, k, ks, t],
            )?;
            gpu.launch(
                "blur_v",
                &gpu.k.blur_v,
                grid,
                block,
                0,
                &mut kargs![t, w, h, k, ks, b],
            )?;
            img = b;
        }
        let (low, high) = thresholds(cfg);
        let l2 = cfg.l2_gradient as i32;
        let (cls, label, edges) = (self.cls.ptr(), self.label.ptr(), self.edges.ptr());
        gpu.launch(
            "canny_classify",
            &gpu.k.canny_classify,
            grid,
            block,
            0,
            &mut kargs![img, w, h, l2, low, high, cls, label],
        )?;
        gpu.launch(
            "uf_merge",
            &gpu.k.uf_merge,
            grid,
            block,
            0,
            &mut kargs![label, w, h],
        )?;
        gpu.launch(
            "uf_resolve",
            &gpu.k.uf_resolve,
            grid,
            block,
            0,
            &mut kargs![label, cls, w, h],
        )?;
        gpu.launch(
            "uf_final",
            &gpu.k.uf_final,
            grid,
            block,
            0,
            &mut kargs![label, cls, w, h, edges],
        )
    }

    pub fn download(&mut self, gpu: &Gpu) -> Result<()> {
        let n = self.w * self.h;
        download(&gpu.stream, self.edges.ptr(), &mut self.host_edges, 0, n)
    }

    /// The downloaded edge map (valid after the stream sync).
    pub fn edges_host(&self) -> &[u8] {
        &self.host_edges.as_slice()[..self.w * self.h]
    }
}
