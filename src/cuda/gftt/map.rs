//! The corner map's half of [`GpuGftt`]: the image staged on the map's stream (uploaded,
//! or copied from the LK pyramid's level 0), the minimum-eigenvalue map's launches, and
//! their CUDA graph per source image.

use super::GpuGftt;
use crate::cpu::gftt::GfttParams;
use crate::cuda::driver::buffers::{copy_rows_on_device, upload};
use crate::cuda::driver::graph::Graph;
use crate::cuda::driver::{DevPtr, Launch};
use crate::cuda::harris::sobel_kernels;
use crate::cuda::kernels::params::DenseParams;
use crate::cuda::Gpu;
use crate::error::Result;

use super::GfttInput;

impl GpuGftt {
    /// The map's image into `self.gray` on the map's stream: uploaded from the host, or
    /// copied on the device from the LK pyramid's level 0.
    pub(super) fn stage_image(&mut self, img: GfttInput, (w, h): (usize, usize)) -> Result<()> {
        match img {
            GfttInput::Host(i) => {
                let n = w * h;
                self.host_in.as_mut_slice()[..n].copy_from_slice(&i.data);
                upload(&self.map_stream, &self.host_in, self.gray.ptr(), n)
            }
            GfttInput::Device { ptr, pitch, .. } => self.copy_image(ptr, pitch, (w, h)),
        }
    }

    /// The map's image copied on the device from `ptr` (rows `pitch` apart) into
    /// `self.gray`, on the map's stream. The pyramid's buffer is not written again before
    /// the tracker's stream waits for `map_done` (`settle`, called by the tracker before it
    /// builds its next pyramid).
    pub(super) fn copy_image(
        &self,
        ptr: DevPtr<u8>,
        pitch: usize,
        (w, h): (usize, usize),
    ) -> Result<()> {
        copy_rows_on_device(
            &self.map_stream,
            (ptr, pitch),
            (self.gray.ptr(), w),
            (w, h),
            "copying the LK pyramid's level 0",
        )
    }

    /// The map of the device image at `ptr` (rows `pitch` apart; the map's size) by its
    /// graph: the copy and [`GpuGftt::map_launches`] recorded on the first frame from that
    /// source, one graph launch after (five calls before; docs/tracking.md, "Begun beside
    /// the detection").
    pub(super) fn map_from_graph(
        &mut self,
        gpu: &Gpu,
        ptr: DevPtr<u8>,
        pitch: usize,
        p: &GfttParams,
    ) -> Result<()> {
        let key = MapKey {
            src: ptr.addr(),
            pitch,
            size: self.map_size,
            block: p.block_size,
            ksize: p.ksize,
        };
        let name = "the corner map's graph";
        if let Some(g) = self.map_graphs.get_mut(&key) {
            return g.launch(gpu, name);
        }
        let stream = self.map_stream.clone();
        let graph = Graph::record(gpu, &stream, || {
            self.copy_image(ptr, pitch, key.size)?;
            self.map_launches(gpu, p)
        })?;
        self.map_graphs.insert(key, graph).launch(gpu, name)
    }

    /// The map's launches on the map's stream, from `self.gray`: the derivatives and their
    /// row sums (the dense Harris kernels), the box sums, the minimum eigenvalues.
    pub(super) fn map_launches(&self, gpu: &Gpu, p: &GfttParams) -> Result<()> {
        let (w, h) = self.map_size;
        let n = w * h;
        let ms = &*self.map_stream;
        let dp = eigen_params(p);
        let (gray, desc, nlev) = (self.gray.ptr(), self.desc.ptr(), 1i32);
        let (gx, gy) = (self.gx.ptr(), self.gy.ptr());
        let [sxx, sxy, syy] = [self.sums[0].ptr(), self.sums[1].ptr(), self.sums[2].ptr()];
        let (eig, words) = (self.eig.ptr(), self.words.ptr());
        let tiles = ((w.div_ceil(32) * h.div_ceil(8)) as u32, 1, 1);
        // SAFETY: `harris_sobel`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.harris.harris_sobel(
                gpu,
                Launch::new(tiles, (32, 8, 1)).on(ms),
                gray,
                desc,
                nlev,
                dp,
                gx,
                gy,
            )
        }?;
        // SAFETY: `harris_rowsum`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.harris.harris_rowsum(
                gpu,
                Launch::new(tiles, (32, 8, 1)).on(ms),
                desc,
                nlev,
                dp,
                gx,
                gy,
                sxx,
                sxy,
                syy,
                words,
            )
        }?;
        let (wi, hi, block) = (w as i32, h as i32, p.block_size as i32);
        let (sa, sb, sc) = (gx, gy, self.box_c.ptr());
        // SAFETY: `gftt_boxsum`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            // A warp per block and a thread per column and product: each is a serial
            // chain, latency-bound, so spread over as many SMs as there are chains.
            gpu.k.gftt.gftt_boxsum(
                gpu,
                Launch::new((w.div_ceil(32) as u32, 3, 1), (32, 1, 1)).on(ms),
                wi,
                hi,
                block,
                sxx,
                sxy,
                syy,
                sa,
                sb,
                sc,
            )
        }?;
        let ni = n as i32;
        // SAFETY: `gftt_eig`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.gftt.gftt_eig(
                gpu,
                Launch::new((n.div_ceil(256) as u32, 1, 1), (256, 1, 1)).on(ms),
                sa,
                sb,
                sc,
                eig,
                ni,
            )
        }?;
        Ok(())
    }
}

/// What a corner map's graph was recorded for: its source image (address, row pitch, size)
/// and the parameters its launches take.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct MapKey {
    src: u64,
    pitch: usize,
    size: (usize, usize),
    block: u32,
    ksize: u32,
}

/// The dense kernels' parameters for goodFeaturesToTrack's min-eigenvalue map (mode 1), with
/// `cpu::harris::dense_core`'s kernels and scale.
fn eigen_params(p: &GfttParams) -> DenseParams {
    let (smooth, deriv) = sobel_kernels(p.ksize);
    let scale = 1.0 / ((1u32 << (p.ksize - 1)) as f64 * p.block_size as f64 * 255.0);
    let mut dp = DenseParams {
        ksize: p.ksize as i32,
        block: p.block_size as i32,
        mode: 1,
        ..Default::default()
    };
    for (i, (&s, &dv)) in smooth.iter().zip(deriv).enumerate() {
        dp.sm[i] = s as f32 * scale as f32;
        dp.de[i] = dv as f32;
    }
    dp
}
