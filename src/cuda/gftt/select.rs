//! The selection half of [`GpuGftt`]: from a started map, the mask (uploaded, or VINS's
//! discs drawn on the GPU), the masked maximum, the candidates and their download, then the
//! host's sort and spacing. With VINS's discs (the tracker's every frame) the device part is
//! one CUDA graph: the discs' upload, the mask, the three kernels and the download, replayed
//! with one call (eight calls before; docs/tracking.md, "Begun beside the detection").

use super::lazy_sorted::key;
use super::{CornerParts, GfttMask, GpuGftt, LazySorted, FIRST_CANDIDATES};
use crate::cpu::gftt::{take_best, GfttParams};
use crate::cuda::driver::buffers::{download, upload, upload_range, DevBuf, HostBuf};
use crate::cuda::driver::graph::Graph;
use crate::cuda::driver::{DevPtr, Launch};
use crate::cuda::Gpu;
use crate::error::{Error, Result};
use crate::image::GrayImage;

/// The disc kernel's blocks (they stride over the discs).
const DISC_BLOCKS: u32 = 256;

/// What a selection's graph was recorded for: the parameters baked into its nodes (the
/// quality, the discs' upload and the candidates' first download, in words and candidates).
#[derive(Clone, Copy, PartialEq)]
pub(super) struct SelectKey {
    quality: f64,
    disc_words: usize,
    first: usize,
}

impl GpuGftt {
    /// The corners of the started map ([`GpuGftt::start_map`]) where `mask` allows, as
    /// `cv::goodFeaturesToTrack` returns them; where the host's time went.
    pub fn finish(
        &mut self,
        gpu: &Gpu,
        p: &GfttParams,
        mask: GfttMask,
        out: &mut Vec<(f32, f32)>,
    ) -> Result<CornerParts> {
        out.clear();
        let (w, h) = self.map_size;
        if matches!(mask, GfttMask::Image(m) if (m.width, m.height) != (w, h)) {
            return Err(Error::Cuda(
                "goodFeaturesToTrack: the mask's size differs from the image's".into(),
            ));
        }
        let n = w * h;
        if n == 0 {
            return Ok(CornerParts::default());
        }
        let t0 = std::time::Instant::now();
        self.settle(gpu)?;
        // The first download holds the recent frames' largest count with room to spare: a
        // scene's candidates (5,400 in a 752x480 crop of building.png) come back in one
        // wait, also when scenes of fewer and more take turns.
        let first = (self.last_count + self.last_count / 4)
            .next_power_of_two()
            .max(FIRST_CANDIDATES)
            .min(self.cap);
        match mask {
            GfttMask::Discs { centers, spans } => {
                self.select_by_graph(gpu, p.quality, (centers, spans), first)?
            }
            GfttMask::Image(m) => {
                let mask_ptr = self.upload_mask(gpu, m, n)?;
                self.select_launches(gpu, p.quality, mask_ptr, first)?;
            }
            GfttMask::Everywhere => self.select_launches(gpu, p.quality, DevPtr::NULL, first)?,
        }
        let t1 = std::time::Instant::now();
        let count = self.wait_candidates(gpu, first)?;
        let t2 = std::time::Instant::now();
        // The largest recent count, decaying by an eighth a frame.
        self.last_count = count.max(self.last_count - self.last_count / 8);
        let h8 = &self.host_out.as_slice()[16..16 + count * 8];
        self.cands.clear();
        self.cands.extend(h8.chunks_exact(8).map(|c| {
            let value = u32::from_le_bytes(c[..4].try_into().unwrap());
            key(value, u32::from_le_bytes(c[4..].try_into().unwrap()))
        }));
        // The CPU's order (value descending, all positive, then the later pixel first),
        // sorted only as far as the greedy spacing reads it: at 1080p there are tens of
        // thousands of candidates and a VINS frame wants a few.
        let first_chunk = (4 * p.max_corners).max(256);
        let t3 = std::time::Instant::now();
        take_best(
            LazySorted::new(&mut self.cands, first_chunk),
            w,
            h,
            p,
            &mut self.grid,
            out,
        );
        let ms = |a: std::time::Instant, b: std::time::Instant| (b - a).as_secs_f64() * 1e3;
        Ok(CornerParts {
            ms: [
                ms(t0, t1),
                ms(t1, t2),
                ms(t2, t3),
                ms(t3, std::time::Instant::now()),
            ],
            candidates: count,
        })
    }

    /// The mask image `m` (`n` pixels) uploaded into `self.mask`; its device pointer.
    fn upload_mask(&mut self, gpu: &Gpu, m: &GrayImage, n: usize) -> Result<DevPtr<u8>> {
        self.host_in.as_mut_slice()[n..2 * n].copy_from_slice(&m.data);
        upload_range(&gpu.track, &self.host_in, n, self.mask.ptr(), n)?;
        Ok(self.mask.ptr())
    }

    /// The masked maximum, the candidates and the download of their count and `first` of
    /// them, queued on the tracker's stream (`gpu.track`); no wait.
    fn select_launches(
        &mut self,
        gpu: &Gpu,
        quality: f64,
        mask_ptr: DevPtr<u8>,
        first: usize,
    ) -> Result<()> {
        let (w, h) = self.map_size;
        let n = w * h;
        let (eig, words) = (self.eig.ptr(), self.words.ptr());
        let (wi, hi) = (w as i32, h as i32);
        // The masked max and the candidate count.
        self.words.fill_async(&gpu.track, 1..3, 0)?;
        let (ni, mx, cnt) = (n as i32, words.offset(1), words.offset(2));
        // SAFETY: `gftt_max`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.gftt.gftt_max(
                gpu,
                Launch::new((n.div_ceil(256).min(1024) as u32, 1, 1), (256, 1, 1)).on(&gpu.track),
                eig,
                mask_ptr,
                ni,
                mx,
            )
        }?;
        let (cand, cap) = (self.cand.ptr(), self.cap as i32);
        // SAFETY: `gftt_candidates`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.gftt.gftt_candidates(
                gpu,
                Launch::new((n.div_ceil(256) as u32, 1, 1), (256, 1, 1)).on(&gpu.track),
                eig,
                mask_ptr,
                wi,
                hi,
                mx,
                quality,
                cand,
                cnt,
                cap,
            )
        }?;
        // The count and the first candidates come back in one wait; a second download only
        // when there are more (`wait_candidates`).
        download(&gpu.track, cnt, &mut self.host_out, 0, 4)?;
        download(&gpu.track, cand, &mut self.host_out, 16, first * 8)
    }

    /// Waits for the queued selection; the rest of the candidates beyond `first` brought
    /// back in a second wait when there are more. The count, at most `cap`.
    fn wait_candidates(&mut self, gpu: &Gpu, first: usize) -> Result<usize> {
        gpu.sync_track()?;
        let count = u32::from_le_bytes(self.host_out.as_slice()[..4].try_into().unwrap()) as usize;
        let count = count.min(self.cap);
        if count > first {
            let rest = self.cand.ptr().offset(first);
            let bytes = (count - first) * 8;
            download(&gpu.track, rest, &mut self.host_out, 16 + first * 8, bytes)?;
            gpu.sync_track()?;
        }
        Ok(count)
    }

    /// VINS's mask (255, then 0 on every disc: `centers` and the half-widths `spans`) and
    /// the selection from it ([`GpuGftt::select_launches`]) as one graph, recorded on the
    /// first frame of its [`SelectKey`]: the discs go up as [n, radius, centres, spans] in a
    /// buffer of a fixed size, so that the graph's nodes read each frame's from memory.
    fn select_by_graph(
        &mut self,
        gpu: &Gpu,
        quality: f64,
        (centers, spans): (&[(i32, i32)], &[i32]),
        first: usize,
    ) -> Result<()> {
        let words = 2 + centers.len() * 2 + spans.len();
        let disc_words = words.next_power_of_two().max(512);
        if disc_words * 4 > self.discs_host.bytes() || disc_words > self.discs_dev.len() {
            // Before the buffers in use are dropped, the copies from them are done; the
            // graphs recorded with them go too.
            gpu.sync_track()?;
            let c = &gpu.ctx;
            self.discs_host = HostBuf::new(c, disc_words * 8, true)?;
            self.discs_dev = DevBuf::new(c, disc_words * 2)?;
            self.select_graphs.clear();
        }
        let header = [centers.len() as i32, spans.len() as i32 - 1];
        let all = header
            .into_iter()
            .chain(centers.iter().flat_map(|&(x, y)| [x, y]))
            .chain(spans.iter().copied());
        for (dst, v) in self.discs_host.as_mut_slice().chunks_exact_mut(4).zip(all) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        let key = SelectKey {
            quality,
            disc_words,
            first,
        };
        let name = "the corner selection's graph";
        if let Some(g) = self.select_graphs.get_mut(&key) {
            return g.launch(gpu, name);
        }
        let stream = gpu.track.clone();
        let graph = Graph::record(gpu, &stream, || {
            self.draw_discs(gpu, disc_words)?;
            let mask = self.mask.ptr();
            self.select_launches(gpu, quality, mask, first)
        })?;
        self.select_graphs.insert(key, graph).launch(gpu, name)
    }

    /// The discs' `words` up, `self.mask` set to 255 and the discs drawn (`gftt_discs`),
    /// queued on the tracker's stream.
    fn draw_discs(&self, gpu: &Gpu, words: usize) -> Result<()> {
        let (w, h) = self.map_size;
        upload(
            &gpu.track,
            &self.discs_host,
            self.discs_dev.ptr(),
            words * 4,
        )?;
        let mask = self.mask.ptr();
        self.mask.fill_async(&gpu.track, 0..w * h, 255)?;
        let (discs, wi, hi) = (self.discs_dev.ptr(), w as i32, h as i32);
        // SAFETY: `gftt_discs` reads its count and radius from `discs` (uploaded above, within
        // its `words`) and writes inside the `w` x `h` mask.
        unsafe {
            gpu.k.gftt.gftt_discs(
                gpu,
                Launch::new((DISC_BLOCKS, 1, 1), (128, 1, 1)).on(&gpu.track),
                discs,
                mask,
                wi,
                hi,
            )
        }
    }
}
