//! goodFeaturesToTrack on the GPU (host side of `kernels/gftt.cu`, after the dense Harris
//! kernels' derivatives and row sums), equal to `cpu::gftt::good_features_to_track`: the
//! box sums, the minimum-eigenvalue map, the masked maximum, threshold, dilation and local
//! maxima on the GPU; the few candidates sorted and spaced on the host with the CPU
//! reference's own `keep_spaced`.
//! Buffers are sized once per resolution.

mod lazy_sorted;
mod map;
mod select;

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream};

use self::lazy_sorted::LazySorted;
use self::map::MapKey;
use self::select::SelectKey;
use super::driver::buffers::{DevBuf, HostBuf};
use super::driver::cuda_err;
use super::driver::graph::GraphCache;
use super::driver::DevPtr;
use super::kernels::params::LevelDesc;
use super::Gpu;
use crate::cpu::gftt::GfttParams;
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

/// Where a selection's host time went ([`GpuGftt::finish`]), ms: queueing it (the wait for
/// the map ordered, the discs written, the graph launched), the wait for its download (a
/// second one when the first was short), the candidates read as sort keys, and their sort
/// and spacing; with the candidates' count.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CornerParts {
    pub ms: [f64; 4],
    pub candidates: usize,
}

/// Candidates downloaded with their count at least (32 KB; more when the last frame had
/// more); more take a second wait.
const FIRST_CANDIDATES: usize = 4096;

/// The discs' first buffer, in words: the count and radius, 1,000 centres and the span
/// table of a 1,000-pixel radius (grown for more).
const DISC_WORDS: usize = 2 + 1000 * 2 + 1001;

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
    grid: crate::cpu::gftt::SpacingGrid,
    /// The candidates as sort keys (`lazy_sorted::key`).
    cands: Vec<u64>,
    /// The map's own stream (the lowest priority, as the pipeline's): it runs beside the
    /// LK launch on the tracker's stream (`gpu.track`).
    map_stream: Arc<CudaStream>,
    /// Recorded on the tracker's stream (`gpu.track`) when the image is there; the map stream waits.
    image_ready: CudaEvent,
    /// Recorded on the map stream when the map is done; the tracker's stream (`gpu.track`) waits.
    map_done: CudaEvent,
    /// The map's copy and launches from a pyramid's level 0 as CUDA graphs, one per source
    /// (the tracker's two pyramids take turns), recorded on first use.
    map_graphs: GraphCache<MapKey>,
    /// The selection's graphs with VINS's discs (`select.rs`), recorded on first use.
    select_graphs: GraphCache<SelectKey>,
    /// The recent selections' largest candidate count, decaying (it sizes the next one's
    /// first download).
    last_count: usize,
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
            grid: Default::default(),
            // Room for every candidate the device may report (`cap`): no frame grows it.
            cands: Vec::with_capacity(cap),
            map_stream: c
                .new_stream()
                .map_err(|e| cuda_err("creating the GFTT map's stream", e))?,
            image_ready: c
                .new_event(None)
                .map_err(|e| cuda_err("creating an event", e))?,
            map_graphs: GraphCache::new(2),
            select_graphs: GraphCache::new(3),
            last_count: 0,
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
        self.finish(gpu, p, mask, out).map(|_| ())
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
}
