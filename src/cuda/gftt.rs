//! goodFeaturesToTrack on the GPU (host side of `kernels/gftt.cu`, after the dense Harris
//! kernels' derivatives and row sums), equal to `cpu::gftt::good_features_to_track`: the
//! box sums, the minimum-eigenvalue map, the masked maximum, threshold, dilation and local
//! maxima on the GPU; the few candidates sorted and spaced on the host with the CPU
//! reference's own `keep_spaced`.
//! Buffers are sized once per resolution.

use cudarc::driver::result;

use super::buffers::{download, upload, DevBuf, HostBuf};
use super::context::{cuda_err, Gpu};
use super::harris::{sobel_kernels, DenseParams};
use crate::cpu::gftt::{take_best, GfttParams};
use crate::error::Result;
use crate::image::GrayImage;

/// Mirrors `struct LevelDesc` in kernels/common.cuh.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct LevelDesc {
    w: i32,
    h: i32,
    img_off: i32,
    tiles_x: i32,
    tiles_y: i32,
    tile_start: i32,
    tr_start: i32,
    rc_start: i32,
}

/// Candidates downloaded with their count (32 KB); more take a second wait.
const FIRST_CANDIDATES: usize = 4096;

pub struct GpuGftt {
    size: (usize, usize),
    desc: DevBuf,
    gray: DevBuf,
    mask: DevBuf,
    gx: DevBuf,
    gy: DevBuf,
    sums: [DevBuf; 3],
    eig: DevBuf,
    /// The third box sum (the first two reuse `gx`, `gy`).
    box_c: DevBuf,
    /// [level max (harris_rowsum resets it; unused here), masked max, candidate count]
    words: DevBuf,
    cand: DevBuf,
    cap: usize,
    host_in: HostBuf,
    host_out: HostBuf,
    grid: Vec<Vec<(f32, f32)>>,
    cands: Vec<(u32, u32)>,
}

impl GpuGftt {
    pub fn new(gpu: &Gpu, w: usize, h: usize) -> Result<Self> {
        let c = &gpu.ctx;
        let n = (w * h).max(1);
        let cap = n / 4 + 64;
        let desc = LevelDesc {
            w: w as i32,
            h: h as i32,
            tiles_x: w.div_ceil(32) as i32,
            tiles_y: h.div_ceil(8) as i32,
            ..Default::default()
        };
        Ok(GpuGftt {
            size: (w, h),
            desc: DevBuf::from_slice(c, &[desc])?,
            gray: DevBuf::new(c, n)?,
            mask: DevBuf::new(c, n)?,
            gx: DevBuf::new(c, n * 4)?,
            gy: DevBuf::new(c, n * 4)?,
            sums: [
                DevBuf::new(c, n * 8)?,
                DevBuf::new(c, n * 8)?,
                DevBuf::new(c, n * 8)?,
            ],
            eig: DevBuf::new(c, n * 4)?,
            box_c: DevBuf::new(c, n * 4)?,
            words: DevBuf::new(c, 16)?,
            cand: DevBuf::new(c, cap * 8)?,
            cap,
            host_in: HostBuf::new(c, 2 * n, true)?,
            host_out: HostBuf::new(c, cap * 8 + 16, false)?,
            grid: Vec::new(),
            cands: Vec::new(),
        })
    }

    /// `cv::goodFeaturesToTrack(img, ..., mask)` into `out`, as the CPU reference.
    pub fn run(
        &mut self,
        gpu: &Gpu,
        img: &GrayImage,
        p: &GfttParams,
        mask: Option<&GrayImage>,
        out: &mut Vec<(f32, f32)>,
    ) -> Result<()> {
        out.clear();
        let (w, h) = (img.width, img.height);
        if (w, h) != self.size {
            *self = GpuGftt::new(gpu, w, h)?;
        }
        let n = w * h;
        if n == 0 {
            return Ok(());
        }
        {
            let s = self.host_in.as_mut_slice();
            s[..n].copy_from_slice(&img.data);
            if let Some(m) = mask {
                s[n..2 * n].copy_from_slice(&m.data);
            }
        }
        upload(&gpu.stream, &self.host_in, self.gray.ptr(), n)?;
        let mask_ptr = match mask {
            Some(_) => {
                super::buffers::upload_range(&gpu.stream, &self.host_in, n, self.mask.ptr(), n)?;
                self.mask.ptr()
            }
            None => 0u64,
        };
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
        let (gray, desc, nlev) = (self.gray.ptr(), self.desc.ptr(), 1i32);
        let (gx, gy) = (self.gx.ptr(), self.gy.ptr());
        let [sxx, sxy, syy] = [self.sums[0].ptr(), self.sums[1].ptr(), self.sums[2].ptr()];
        let (eig, words) = (self.eig.ptr(), self.words.ptr());
        let tiles = ((w.div_ceil(32) * h.div_ceil(8)) as u32, 1, 1);
        gpu.launch(
            "harris_sobel",
            &gpu.k.harris_sobel,
            tiles,
            (32, 8, 1),
            0,
            &mut kargs![gray, desc, nlev, dp, gx, gy],
        )?;
        gpu.launch(
            "harris_rowsum",
            &gpu.k.harris_rowsum,
            tiles,
            (32, 8, 1),
            0,
            &mut kargs![desc, nlev, dp, gx, gy, sxx, sxy, syy, words],
        )?;
        let (wi, hi, block) = (w as i32, h as i32, p.block_size as i32);
        let (sa, sb, sc) = (gx, gy, self.box_c.ptr());
        gpu.launch(
            "gftt_boxsum",
            &gpu.k.gftt_boxsum,
            // A warp per block and a thread per column and product: each is a serial
            // chain, latency-bound, so spread over as many SMs as there are chains.
            (w.div_ceil(32) as u32, 3, 1),
            (32, 1, 1),
            0,
            &mut kargs![wi, hi, block, sxx, sxy, syy, sa, sb, sc],
        )?;
        unsafe { result::memset_d8_async(words + 4, 0, 8, gpu.stream.cu_stream()) }
            .map_err(|e| cuda_err("clearing the GFTT counters", e))?;
        let (ni, mx, cnt) = (n as i32, words + 4, words + 8);
        gpu.launch(
            "gftt_max",
            &gpu.k.gftt_max,
            (n.div_ceil(256).min(1024) as u32, 1, 1),
            (256, 1, 1),
            0,
            &mut kargs![sa, sb, sc, eig, mask_ptr, ni, mx],
        )?;
        let (q, cand, cap) = (p.quality, self.cand.ptr(), self.cap as i32);
        gpu.launch(
            "gftt_candidates",
            &gpu.k.gftt_candidates,
            (n.div_ceil(256) as u32, 1, 1),
            (256, 1, 1),
            0,
            &mut kargs![eig, mask_ptr, wi, hi, mx, q, cand, cnt, cap],
        )?;
        // The count and the first FIRST_CANDIDATES candidates come back in one wait; a
        // second download only when there are more.
        let first = FIRST_CANDIDATES.min(self.cap);
        download(&gpu.stream, cnt, &mut self.host_out, 0, 4)?;
        download(&gpu.stream, cand, &mut self.host_out, 16, first * 8)?;
        gpu.sync()?;
        let count = u32::from_le_bytes(self.host_out.as_slice()[..4].try_into().unwrap()) as usize;
        let count = count.min(self.cap);
        if count > first {
            let rest = cand + (first * 8) as u64;
            download(
                &gpu.stream,
                rest,
                &mut self.host_out,
                16 + first * 8,
                (count - first) * 8,
            )?;
            gpu.sync()?;
        }
        let h8 = &self.host_out.as_slice()[16..16 + count * 8];
        self.cands.clear();
        self.cands.extend(h8.chunks_exact(8).map(|c| {
            (
                u32::from_le_bytes(c[..4].try_into().unwrap()),
                u32::from_le_bytes(c[4..].try_into().unwrap()),
            )
        }));
        // The CPU's order: value descending (all positive), then the later pixel first.
        self.cands.sort_unstable_by(|a, b| {
            f32::from_bits(b.0)
                .total_cmp(&f32::from_bits(a.0))
                .then(b.1.cmp(&a.1))
        });
        take_best(
            self.cands.iter().map(|&(_, i)| i),
            w,
            h,
            p,
            &mut self.grid,
            out,
        );
        Ok(())
    }
}
