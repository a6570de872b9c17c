//! Dense Harris on the GPU (host side of `kernels/harris.cu`): `cv::cornerHarris` response,
//! 3x3 NMS and quality threshold on every pyramid level, equal bit for bit to
//! `cpu::harris::dense_corners` (the CPU's OpenCV rounding schedule is replayed per pixel
//! with explicit FMA / mul / add intrinsics). The survivors go through the detector's
//! ordered compaction, so selection and orientation are shared with the FAST path.

use super::driver::buffers::DevBuf;
use super::driver::Launch;
use super::fast_harris::Detector;
use super::kernels::params::DenseParams;
use super::pyramid::Pyramid;
use super::Gpu;
use crate::config::Config;
use crate::error::Result;

/// Integer Sobel kernels of order 1 (`cv::getDerivKernels`), as `cpu::harris`.
pub(super) fn sobel_kernels(ksize: u32) -> (&'static [i32], &'static [i32]) {
    match ksize {
        3 => (&[1, 2, 1], &[-1, 0, 1]),
        5 => (&[1, 4, 6, 4, 1], &[-1, -2, 0, 2, 1]),
        _ => (&[1, 6, 15, 20, 15, 6, 1], &[-1, -4, -5, 0, 5, 4, 1]),
    }
}

pub struct Dense {
    gx: DevBuf<f32>,
    gy: DevBuf<f32>,
    sums: [DevBuf<f64>; 3],
    resp: DevBuf<f32>,
    maxkey: DevBuf<u32>,
    /// Widest level (level 0).
    w0: usize,
    /// (k bits, k as the double the user wrote): a string round trip, once per k.
    kd: (u32, f64),
}

impl Dense {
    pub fn new(gpu: &Gpu, pyr: &Pyramid) -> Result<Self> {
        let c = &gpu.ctx;
        let px = pyr.buf.bytes().max(1);
        Ok(Dense {
            gx: DevBuf::new(c, px)?,
            gy: DevBuf::new(c, px)?,
            sums: [
                DevBuf::new(c, px)?,
                DevBuf::new(c, px)?,
                DevBuf::new(c, px)?,
            ],
            resp: DevBuf::new(c, px)?,
            maxkey: DevBuf::new(c, pyr.levels.len().max(1))?,
            w0: pyr.levels.first().map_or(0, |l| l.w),
            kd: (f32::NAN.to_bits(), f64::NAN),
        })
    }

    /// The kernels' parameters for `d` (`cpu::harris::dense_core`'s kernels and scale).
    fn params(&mut self, d: &crate::config::DetectorConfig) -> DenseParams {
        let ksize = d.dense_ksize;
        let k = d.harris_k;
        if self.kd.0 != k.to_bits() {
            // As cpu::harris::dense_core: the shortest decimal form of the f32 k.
            self.kd = (k.to_bits(), k.to_string().parse().unwrap_or(k as f64));
        }
        let (smooth, deriv) = sobel_kernels(ksize);
        let scale = 1.0 / ((1u32 << (ksize - 1)) as f64 * d.dense_block_size as f64 * 255.0);
        let mut p = DenseParams {
            ksize: ksize as i32,
            block: d.dense_block_size as i32,
            k,
            kd: self.kd.1,
            quality: d.dense_quality,
            border: d.border as i32,
            ..Default::default()
        };
        for (i, (&s, &dv)) in smooth.iter().zip(deriv).enumerate() {
            p.sm[i] = s as f32 * scale as f32;
            p.de[i] = dv as f32;
        }
        p
    }

    /// Queues the four dense Harris kernels and the detector's compaction (no sync).
    pub fn run(
        &mut self,
        gpu: &Gpu,
        pyr: &Pyramid,
        det: &Detector,
        cfg: &Config,
        orient: bool,
    ) -> Result<()> {
        let p = self.params(&cfg.detector);
        let (pyr_p, descs, nlev) = (pyr.buf.ptr(), det.descs_ptr(), det.nlev() as i32);
        let (gx, gy) = (self.gx.ptr(), self.gy.ptr());
        let [sxx, sxy, syy] = [self.sums[0].ptr(), self.sums[1].ptr(), self.sums[2].ptr()];
        let (resp, maxkey) = (self.resp.ptr(), self.maxkey.ptr());
        let tiles = (det.ntiles() as u32, 1, 1);
        let tile_block = (32, 8, 1);
        // SAFETY: `harris_sobel`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.harris.harris_sobel(
                gpu,
                Launch::new(tiles, tile_block),
                pyr_p,
                descs,
                nlev,
                p,
                gx,
                gy,
            )
        }?;
        // SAFETY: `harris_rowsum`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.harris.harris_rowsum(
                gpu,
                Launch::new(tiles, tile_block),
                descs,
                nlev,
                p,
                gx,
                gy,
                sxx,
                sxy,
                syy,
                maxkey,
            )
        }?;
        // SAFETY: `harris_colsum`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.harris.harris_colsum(
                gpu,
                Launch::new(
                    (nlev as u32, self.w0.div_ceil(128).max(1) as u32, 1),
                    (128, 1, 1),
                ),
                descs,
                nlev,
                p,
                sxx,
                sxy,
                syy,
                resp,
                maxkey,
            )
        }?;
        let cap = det.cap() as i32;
        let (rc, slots) = (det.rc_ptr(), det.slots_ptr());
        // SAFETY: `harris_nms`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.harris.harris_nms(
                gpu,
                Launch::new(tiles, tile_block),
                descs,
                nlev,
                p,
                resp,
                maxkey,
                cap,
                rc,
                slots,
            )
        }?;
        det.compact(gpu, pyr, orient)
    }
}
