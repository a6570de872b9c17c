//! goodFeaturesToTrack on the GPU (host side of `kernels/gftt.cu`, after the dense Harris
//! kernels' derivatives and row sums), equal to `cpu::gftt::good_features_to_track`: the
//! box sums, the minimum-eigenvalue map, the masked maximum, threshold, dilation and local
//! maxima on the GPU; the few candidates sorted and spaced on the host with the CPU
//! reference's own `keep_spaced`.
//! Buffers are sized once per resolution.

mod lazy_sorted;
mod map;

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream};

use self::lazy_sorted::LazySorted;
use self::map::MapKey;
use super::driver::buffers::{download, upload, DevBuf, HostBuf};
use super::driver::cuda_err;
use super::driver::graph::Graph;
use super::driver::{DevPtr, Launch};
use super::kernels::params::LevelDesc;
use super::Gpu;
use crate::cpu::gftt::{take_best, GfttParams};
use crate::error::Result;
use crate::image::GrayImage;

/// The image goodFeaturesToTrack runs on: in host memory (uploaded), or already on the GPU
/// (`ptr` at pixel (0, 0), rows `pitch` bytes apart: the LK pyramid's level 0, copied on
/// the device instead of uploaded again).
#[derive(Clone, Copy)]
pub enum GfttInput<'a> {
    Host(&'a GrayImage),
    Device {
        ptr: DevPtr<u8>,
        pitch: usize,
        width: usize,
        height: usize,
    },
}

impl GfttInput<'_> {
    /// The image's (width, height).
    pub fn size(&self) -> (usize, usize) {
        match *self {
            GfttInput::Host(i) => (i.width, i.height),
            GfttInput::Device { width, height, .. } => (width, height),
        }
    }
}

/// Where goodFeaturesToTrack may put corners: everywhere, where a mask image is nonzero,
/// or outside discs (VINS's mask: `centers` in pixels, the disc's half-width on each row
/// offset in `spans`, as `track::mask::Discs` keeps them), drawn into the mask on the GPU.
#[derive(Clone, Copy)]
pub enum GfttMask<'a> {
    Everywhere,
    Image(&'a GrayImage),
    Discs {
        centers: &'a [(i32, i32)],
        spans: &'a [i32],
    },
}

/// Candidates downloaded with their count (32 KB); more take a second wait.
const FIRST_CANDIDATES: usize = 4096;

/// The discs' first buffer, in words: 1,000 centres and the span table of a 1,000-pixel
/// radius.
const DISC_WORDS: usize = 1000 * 2 + 1001;

pub struct GpuGftt {
    size: (usize, usize),
    desc: DevBuf<LevelDesc>,
    gray: DevBuf<u8>,
    mask: DevBuf<u8>,
    gx: DevBuf<f32>,
    gy: DevBuf<f32>,
    sums: [DevBuf<f64>; 3],
    eig: DevBuf<f32>,
    /// The third box sum (the first two reuse `gx`, `gy`).
    box_c: DevBuf<f32>,
    /// [level max (harris_rowsum resets it; unused here), masked max, candidate count]
    words: DevBuf<u32>,
    /// (value key, pixel index) of each candidate.
    cand: DevBuf<[u32; 2]>,
    cap: usize,
    /// The discs' centres then their span table (`GfttMask::Discs`), in host and device
    /// memory; grown only when a frame has more than ever before.
    discs_host: HostBuf,
    /// The centres' (x, y) words, then the span table's.
    discs_dev: DevBuf<i32>,
    host_in: HostBuf,
    host_out: HostBuf,
    grid: Vec<Vec<(f32, f32)>>,
    cands: Vec<(u32, u32)>,
    /// The map's own stream (the lowest priority, as the pipeline's): it runs beside the
    /// LK launch on the tracker's stream (`gpu.track`).
    map_stream: Arc<CudaStream>,
    /// Recorded on the tracker's stream (`gpu.track`) when the image is there; the map stream waits.
    image_ready: CudaEvent,
    /// Recorded on the map stream when the map is done; the tracker's stream (`gpu.track`) waits.
    map_done: CudaEvent,
    /// The map's copy and launches from a pyramid's level 0 as CUDA graphs, one per source
    /// (the tracker's two pyramids take turns), recorded on first use.
    map_graphs: Vec<(MapKey, Graph)>,
    /// A map was started ([`GpuGftt::start_map`]) and the tracker's stream (`gpu.track`) does not wait
    /// for it yet.
    pending: bool,
    /// `image_ready` marks an image whose map is not queued yet ([`GpuGftt::mark_image`]).
    marked: bool,
    /// The map's size (the size a started map was made for).
    map_size: (usize, usize),
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
            gx: DevBuf::new(c, n)?,
            gy: DevBuf::new(c, n)?,
            sums: [DevBuf::new(c, n)?, DevBuf::new(c, n)?, DevBuf::new(c, n)?],
            eig: DevBuf::new(c, n)?,
            box_c: DevBuf::new(c, n)?,
            words: DevBuf::new(c, 4)?,
            cand: DevBuf::new(c, cap)?,
            cap,
            discs_host: HostBuf::new(c, DISC_WORDS * 4, true)?,
            discs_dev: DevBuf::new(c, DISC_WORDS)?,
            host_in: HostBuf::new(c, 2 * n, true)?,
            host_out: HostBuf::new(c, cap * 8 + 16, false)?,
            grid: Vec::new(),
            // Room for every candidate the device may report (`cap`): no frame grows it.
            cands: Vec::with_capacity(cap),
            map_stream: c
                .new_stream()
                .map_err(|e| cuda_err("creating the GFTT map's stream", e))?,
            image_ready: c
                .new_event(None)
                .map_err(|e| cuda_err("creating an event", e))?,
            map_graphs: Vec::new(),
            map_done: c
                .new_event(None)
                .map_err(|e| cuda_err("creating an event", e))?,
            pending: false,
            marked: false,
            map_size: (0, 0),
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
        self.start_map(gpu, GfttInput::Host(img), p)?;
        let mask = mask.map_or(GfttMask::Everywhere, GfttMask::Image);
        self.finish(gpu, p, mask, out)
    }

    /// Queues the minimum-eigenvalue map of `img` on the map's own stream, after the work
    /// queued so far on the tracker's stream (`gpu.track`) (which puts the image there): it runs while
    /// the tracker's stream goes on (the tracker's LK). [`GpuGftt::finish`] selects the
    /// corners from it.
    pub fn start_map(&mut self, gpu: &Gpu, img: GfttInput, p: &GfttParams) -> Result<()> {
        self.mark_image(gpu, img.size())?;
        self.queue_map(gpu, img, p)
    }

    /// The first half of [`GpuGftt::start_map`]: marks the point of the tracker's stream (`gpu.track`)
    /// after which the map's image of `size` is there, so that [`GpuGftt::queue_map`] may
    /// queue the map later (after the tracker's LK launch) yet let it start from here.
    pub fn mark_image(&mut self, gpu: &Gpu, (w, h): (usize, usize)) -> Result<()> {
        self.settle(gpu)?;
        if (w, h) != self.size {
            // The old buffers may still be in use by a map in flight.
            self.map_stream
                .synchronize()
                .map_err(|e| cuda_err("waiting for the GFTT map", e))?;
            *self = GpuGftt::new(gpu, w, h)?;
        }
        self.map_size = (w, h);
        self.image_ready
            .record(&gpu.track)
            .map_err(|e| cuda_err("recording an event", e))?;
        self.marked = true;
        Ok(())
    }

    /// The second half of [`GpuGftt::start_map`]: the map of `img` (the image of the last
    /// [`GpuGftt::mark_image`], whose buffer the tracker's stream (`gpu.track`) leaves as it is until it
    /// waits for the map: `settle`) on the map's stream, from the marked point.
    pub fn queue_map(&mut self, gpu: &Gpu, img: GfttInput, p: &GfttParams) -> Result<()> {
        let (w, h) = img.size();
        if !std::mem::take(&mut self.marked) || (w, h) != self.map_size {
            return Err(crate::error::Error::Cuda(
                "goodFeaturesToTrack: the map's image was not marked at its size".into(),
            ));
        }
        let n = w * h;
        if n == 0 {
            return Ok(());
        }
        self.map_stream
            .wait(&self.image_ready)
            .map_err(|e| cuda_err("waiting for an event", e))?;
        self.pending = true;
        match img {
            GfttInput::Device { ptr, pitch, .. } => self.map_from_graph(gpu, ptr, pitch, p)?,
            GfttInput::Host(_) => {
                self.stage_image(img, (w, h))?;
                self.map_launches(gpu, p)?;
            }
        }
        self.map_done
            .record(&self.map_stream)
            .map_err(|e| cuda_err("recording an event", e))
    }

    /// The pipeline's stream waits (on the GPU) for a started map: before anything the map
    /// reads from is written again.
    pub fn settle(&mut self, gpu: &Gpu) -> Result<()> {
        if self.pending {
            gpu.track
                .wait(&self.map_done)
                .map_err(|e| cuda_err("waiting for the GFTT map", e))?;
            self.pending = false;
        }
        Ok(())
    }

    /// The mask on the device (`n` pixels): uploaded, or drawn from its discs; null for none.
    fn stage_mask(&mut self, gpu: &Gpu, mask: GfttMask, n: usize) -> Result<DevPtr<u8>> {
        Ok(match mask {
            GfttMask::Image(m) => {
                self.host_in.as_mut_slice()[n..2 * n].copy_from_slice(&m.data);
                super::driver::buffers::upload_range(
                    &gpu.track,
                    &self.host_in,
                    n,
                    self.mask.ptr(),
                    n,
                )?;
                self.mask.ptr()
            }
            GfttMask::Discs { centers, spans } => {
                self.draw_discs(gpu, centers, spans)?;
                self.mask.ptr()
            }
            GfttMask::Everywhere => DevPtr::NULL,
        })
    }

    /// The candidate count at `cnt` and the candidates at `cand` into `host_out` (after its
    /// 16-byte header), then waits: the first `FIRST_CANDIDATES` come back in one wait with
    /// the count, the rest in a second only when there are more. The count, at most `cap`.
    fn download_candidates(
        &mut self,
        gpu: &Gpu,
        cnt: DevPtr<u32>,
        cand: DevPtr<[u32; 2]>,
    ) -> Result<usize> {
        // The count and the first FIRST_CANDIDATES candidates come back in one wait; a
        // second download only when there are more.
        let first = FIRST_CANDIDATES.min(self.cap);
        download(&gpu.track, cnt, &mut self.host_out, 0, 4)?;
        download(&gpu.track, cand, &mut self.host_out, 16, first * 8)?;
        gpu.sync_track()?;
        let count = u32::from_le_bytes(self.host_out.as_slice()[..4].try_into().unwrap()) as usize;
        let count = count.min(self.cap);
        if count > first {
            let rest = cand.offset(first);
            download(
                &gpu.track,
                rest,
                &mut self.host_out,
                16 + first * 8,
                (count - first) * 8,
            )?;
            gpu.sync_track()?;
        }
        Ok(count)
    }

    /// The corners of the started map ([`GpuGftt::start_map`]) where `mask` allows, as
    /// `cv::goodFeaturesToTrack` returns them.
    pub fn finish(
        &mut self,
        gpu: &Gpu,
        p: &GfttParams,
        mask: GfttMask,
        out: &mut Vec<(f32, f32)>,
    ) -> Result<()> {
        out.clear();
        let (w, h) = self.map_size;
        if matches!(mask, GfttMask::Image(m) if (m.width, m.height) != (w, h)) {
            return Err(crate::error::Error::Cuda(
                "goodFeaturesToTrack: the mask's size differs from the image's".into(),
            ));
        }
        let n = w * h;
        if n == 0 {
            return Ok(());
        }
        self.settle(gpu)?;
        let mask_ptr = self.stage_mask(gpu, mask, n)?;
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
        let (q, cand, cap) = (p.quality, self.cand.ptr(), self.cap as i32);
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
                q,
                cand,
                cnt,
                cap,
            )
        }?;
        let count = self.download_candidates(gpu, cnt, cand)?;
        let h8 = &self.host_out.as_slice()[16..16 + count * 8];
        self.cands.clear();
        self.cands.extend(h8.chunks_exact(8).map(|c| {
            (
                u32::from_le_bytes(c[..4].try_into().unwrap()),
                u32::from_le_bytes(c[4..].try_into().unwrap()),
            )
        }));
        // The CPU's order (value descending, all positive, then the later pixel first),
        // sorted only as far as the greedy spacing reads it: at 1080p there are tens of
        // thousands of candidates and a VINS frame wants a few.
        let first_chunk = (4 * p.max_corners).max(256);
        take_best(
            LazySorted::new(&mut self.cands, first_chunk),
            w,
            h,
            p,
            &mut self.grid,
            out,
        );
        Ok(())
    }
}

impl GpuGftt {
    /// VINS's mask in `self.mask`: 255, then 0 on every disc (`GfttMask::Discs`); the
    /// centres and the span table go up (a few KB) instead of the image-sized mask.
    fn draw_discs(&mut self, gpu: &Gpu, centers: &[(i32, i32)], spans: &[i32]) -> Result<()> {
        let (w, h) = self.map_size;
        let bytes = (centers.len() * 2 + spans.len()) * 4;
        if bytes > self.discs_host.bytes() {
            // Before the buffers in use are dropped, the uploads from them are done.
            gpu.sync_track()?;
            let c = &gpu.ctx;
            self.discs_host = HostBuf::new(c, bytes * 2, true)?;
            self.discs_dev = DevBuf::new(c, bytes / 2)?;
        }
        let host = self.discs_host.as_mut_slice();
        let words = centers
            .iter()
            .flat_map(|&(x, y)| [x, y])
            .chain(spans.iter().copied());
        for (dst, v) in host.chunks_exact_mut(4).zip(words) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        upload(&gpu.track, &self.discs_host, self.discs_dev.ptr(), bytes)?;
        let mask = self.mask.ptr();
        self.mask.fill_async(&gpu.track, 0..w * h, 255)?;
        if centers.is_empty() || spans.is_empty() {
            return Ok(());
        }
        let pts = self.discs_dev.ptr();
        let sp = pts.offset(centers.len() * 2);
        let pts = pts.cast::<[i32; 2]>();
        let (nc, radius, wi, hi) = (
            centers.len() as i32,
            spans.len() as i32 - 1,
            w as i32,
            h as i32,
        );
        let rows = 2 * spans.len() - 1;
        // SAFETY: `gftt_discs`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.gftt.gftt_discs(
                gpu,
                Launch::new(
                    (centers.len() as u32, rows.div_ceil(128) as u32, 1),
                    (128, 1, 1),
                )
                .on(&gpu.track),
                pts,
                nc,
                sp,
                radius,
                mask,
                wi,
                hi,
            )
        }
    }
}
