//! FAST + NMS + ORB Harris score + ordered compaction + orientation on the GPU (host side of
//! `kernels/fast_harris.cu`, `kernels/compact.cu` and `kernels/orient.cu`).
//!
//! Four launches for all levels together: `fast_harris` (one block per 32x8 tile of every
//! level), `scan_tile_rows`, `scan_levels`, `gather_orient`. The result is, per level, the
//! candidates in raster order with their FAST score, response and angle (the angle only
//! when asked: with the GPU budget selection, `select.cu` orients the kept corners only).
//!
//! ORB-SLAM3's per-cell detection with the low-threshold retry
//! (`detector.low_threshold_retry`, `cpu::cells::fast_in_cells`) replaces the first launch
//! by `fast_cells` + `cell_filter` ([`Detector::run_cells`]); the compaction is the same.

use super::driver::buffers::{download, DevBuf, HostBuf};
use super::driver::{DevPtr, Launch};
use super::kernels::params::{CellParams, LevelDesc};
use super::pyramid::Pyramid;
use super::Gpu;
use crate::config::{Config, DetectorConfig, DetectorMethod, ScoreType};
use crate::error::{Error, Result};
use crate::levels::MAX_LEVELS;

const TILE_W: usize = 32;
const TILE_H: usize = 8;
/// Tiles stacked per block of `fast_harris` (`FAST_GROUP` in kernels/fast_harris.cu).
const FAST_GROUP: usize = 8;

/// Records on the device (or mapped host memory): four words each, a candidate's or a kept
/// keypoint's ([`Candidate`]), or half a descriptor.
pub type Records = DevPtr<[u32; 4]>;

/// One compacted candidate as downloaded: `xy = x | y << 16`, FAST score, response bits,
/// angle bits (-1 when orientation is off).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Candidate {
    pub xy: u32,
    pub fast_score: u32,
    pub response: f32,
    pub angle: f32,
}

impl Candidate {
    pub fn x(&self) -> u32 {
        self.xy & 0xffff
    }
    pub fn y(&self) -> u32 {
        self.xy >> 16
    }
}

/// Slots per 32x8 tile: the most survivors a tile can hold. With NMS, strict 3x3 maxima are
/// never 8-adjacent, so a 2x2 block holds at most one: 64. With the per-cell NMS
/// (`cells = Some(cell_size)`) maxima of different cells can touch: a tile cut into `kx`
/// column runs and `ky` row runs holds at most `floor((32 + kx) / 2) * floor((8 + ky) / 2)`,
/// and cells are at least `cell_size` wide unless there is only one (85..90 for
/// `cell_size >= 8`). Without NMS every pixel: 256.
pub fn slot_cap(nms: bool, cells: Option<u32>) -> usize {
    match (nms, cells) {
        (false, _) => TILE_W * TILE_H,
        (true, None) => 64,
        (true, Some(c)) => {
            let c = c.max(1) as usize;
            let kx = 1 + (TILE_W - 1).div_ceil(c);
            let ky = 1 + (TILE_H - 1).div_ceil(c);
            (((TILE_W + kx) / 2) * ((TILE_H + ky) / 2)).min(TILE_W * TILE_H)
        }
    }
}

pub struct Detector {
    nlev: usize,
    ntiles: usize,
    /// Blocks of `fast_harris`: per level, tile columns x groups of `FAST_GROUP` tile rows.
    ngroups: usize,
    /// Per block of `fast_harris`: its level << 27 | tile column << 14 | group row.
    block_groups: DevBuf<u32>,
    ntr: usize,
    /// Slots per tile: 64 with NMS (strict 3x3 maxima are never 8-adjacent), else 256.
    cap: usize,
    descs: DevBuf<LevelDesc>,
    rc: DevBuf<u32>,
    rc_off: DevBuf<u32>,
    tr_total: DevBuf<u32>,
    tr_base: DevBuf<u32>,
    header: DevBuf<u32>,
    slots: DevBuf<[u32; 2]>,
    /// Candidate records ([`Candidate`]'s four words).
    out: DevBuf<[u32; 4]>,
    out_cap: usize,
    umax: DevBuf<i32>,
    half: i32,
    host_header: HostBuf,
    /// Pinned records of the final download (candidates or selected keypoints): sized once
    /// per resolution for `out_cap` records, the most a frame can produce.
    host_out: HostBuf,
    /// Per-cell flags of the per-cell detection (grown on demand).
    cell_flags: DevBuf<u8>,
    /// The level sizes, for [`CellParams::new`].
    sizes: Vec<(usize, usize)>,
}

impl Detector {
    /// `cap`: slots per tile, [`slot_cap`].
    pub fn new(gpu: &Gpu, pyr: &Pyramid, cap: usize, patch_size: u32) -> Result<Self> {
        let nlev = pyr.levels.len();
        let mut descs = Vec::with_capacity(nlev);
        let mut block_groups: Vec<u32> = Vec::new();
        let (mut tiles, mut trs, mut rcs) = (0usize, 0usize, 0usize);
        for lv in &pyr.levels {
            let (tx, ty) = (lv.w.div_ceil(TILE_W), lv.h.div_ceil(TILE_H));
            if lv.off > i32::MAX as usize {
                return Err(Error::Cuda("pyramid larger than 2 GiB".into()));
            }
            descs.push(LevelDesc {
                w: lv.w as i32,
                h: lv.h as i32,
                img_off: lv.off as i32,
                tiles_x: tx as i32,
                tiles_y: ty as i32,
                tile_start: tiles as i32,
                tr_start: trs as i32,
                rc_start: rcs as i32,
            });
            tiles += tx * ty;
            let (level, group_rows) = ((descs.len() - 1) as u32, ty.div_ceil(FAST_GROUP));
            if level >= 1 << 5 || tx > 1 << 13 || group_rows > 1 << 14 {
                return Err(Error::Cuda(format!(
                    "pyramid level {level} too large or too deep for the detection kernels"
                )));
            }
            // `group_pos` in kernels/fast_harris.cu unpacks these.
            block_groups.extend(
                (0..group_rows as u32)
                    .flat_map(|gy| (0..tx as u32).map(move |gx| level << 27 | gx << 14 | gy)),
            );
            trs += ty;
            rcs += ty * TILE_H * tx;
        }
        let cap = cap.clamp(1, TILE_W * TILE_H);
        let out_cap = tiles * cap;
        let umax = crate::cpu::orient::circle_extents(patch_size / 2);
        let c = &gpu.ctx;
        Ok(Detector {
            nlev,
            ntiles: tiles,
            ngroups: block_groups.len(),
            block_groups: DevBuf::from_slice(c, &block_groups)?,
            ntr: trs,
            cap,
            descs: DevBuf::from_slice(c, &descs)?,
            rc: DevBuf::new(c, rcs.max(1))?,
            rc_off: DevBuf::new(c, rcs.max(1))?,
            tr_total: DevBuf::new(c, trs.max(1))?,
            tr_base: DevBuf::new(c, trs.max(1))?,
            header: DevBuf::new(c, 1 + 2 * nlev)?,
            slots: DevBuf::new(c, out_cap.max(1))?,
            out: DevBuf::new(c, out_cap.max(1))?,
            out_cap,
            umax: DevBuf::from_slice(c, &umax)?,
            half: (patch_size / 2) as i32,
            host_header: HostBuf::new_device_written(c, (1 + 2 * nlev) * 4, gpu.can_map_host)?,
            host_out: HostBuf::new_device_written(c, out_cap.max(1) * 16, gpu.can_map_host)?,
            cell_flags: DevBuf::empty(c),
            sizes: pyr.levels.iter().map(|l| (l.w, l.h)).collect(),
        })
    }

    pub fn nlev(&self) -> usize {
        self.nlev
    }
    /// Capacity of the candidate buffer, in records.
    pub fn out_cap(&self) -> usize {
        self.out_cap
    }
    /// Device pointers: level descriptors, candidate header, candidates, circle extents.
    pub fn descs_ptr(&self) -> DevPtr<LevelDesc> {
        self.descs.ptr()
    }
    pub fn header_ptr(&self) -> DevPtr<u32> {
        self.header.ptr()
    }
    pub fn out_ptr(&self) -> DevPtr<[u32; 4]> {
        self.out.ptr()
    }
    pub fn umax_ptr(&self) -> DevPtr<i32> {
        self.umax.ptr()
    }
    pub fn half(&self) -> i32 {
        self.half
    }
    /// Tiles over all levels (the grid of the per-tile kernels).
    pub fn ntiles(&self) -> usize {
        self.ntiles
    }
    /// Slots per tile, row counts and slots (the detection kernels' outputs).
    pub fn cap(&self) -> usize {
        self.cap
    }
    pub fn rc_ptr(&self) -> DevPtr<u32> {
        self.rc.ptr()
    }
    pub fn slots_ptr(&self) -> DevPtr<[u32; 2]> {
        self.slots.ptr()
    }

    /// Launches the four detection kernels on the stream (no sync). `orient`: compute the
    /// angle of every candidate (else -1).
    pub fn run(&self, gpu: &Gpu, pyr: &Pyramid, cfg: &Config, orient: bool) -> Result<()> {
        let d = &cfg.detector;
        let (harris, harris_bs, halo, sss) = harris_args(d);
        let (pyr_p, descs) = (pyr.buf.ptr(), self.descs.ptr());
        let (thr, nms, border) = (
            d.fast_threshold as i32,
            d.nonmax_suppression as i32,
            d.border as i32,
        );
        let k = d.harris_k;
        let cap = self.cap as i32;
        let (rc, slots) = (self.rc.ptr(), self.slots.ptr());
        let groups = self.block_groups.ptr();
        // SAFETY: `fast_harris`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.fast_harris.fast_harris(
                gpu,
                Launch::new(
                    (self.ngroups as u32, 1, 1),
                    (TILE_W as u32, TILE_H as u32, 1),
                ),
                pyr_p,
                descs,
                groups,
                thr,
                nms,
                border,
                harris,
                harris_bs,
                k,
                sss,
                halo,
                cap,
                rc,
                slots,
            )
        }?;
        self.compact(gpu, pyr, orient)
    }

    /// ORB-SLAM3's per-cell detection with the low-threshold retry (the GPU twin of
    /// `cpu::cells::fast_in_cells`, candidates in the same raster order): `fast_cells`
    /// (scores at the lower threshold, NMS within each cell, per-cell flags), `cell_filter`
    /// (each cell's threshold) when a retry is possible, then the compaction. No sync.
    pub fn run_cells(
        &mut self,
        gpu: &Gpu,
        pyr: &Pyramid,
        cfg: &Config,
        orient: bool,
    ) -> Result<()> {
        let d = &cfg.detector;
        if self.nlev > MAX_LEVELS {
            return Err(Error::Cuda(format!(
                "{} pyramid levels (at most {MAX_LEVELS} with the per-cell detection)",
                self.nlev
            )));
        }
        let (cp, ncells) = CellParams::new(
            &self.sizes,
            cfg.select.cell_size,
            d.border,
            d.fast_threshold,
            d.min_fast_threshold,
        );
        if self.cell_flags.len() < ncells {
            self.cell_flags = DevBuf::new(&gpu.ctx, ncells.next_power_of_two())?;
        }
        let flags = self.cell_flags.ptr();
        self.cell_flags.fill_async(&gpu.stream, 0..ncells, 0)?;
        let (harris, harris_bs, halo, sss) = harris_args(d);
        let (pyr_p, descs, nlev) = (pyr.buf.ptr(), self.descs.ptr(), self.nlev as i32);
        let nms = d.nonmax_suppression as i32;
        let k = d.harris_k;
        let cap = self.cap as i32;
        let (rc, slots) = (self.rc.ptr(), self.slots.ptr());
        // SAFETY: `fast_cells`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.fast_harris.fast_cells(
                gpu,
                Launch::new(
                    (self.ntiles as u32, 1, 1),
                    (TILE_W as u32, TILE_H as u32, 1),
                ),
                pyr_p,
                descs,
                nlev,
                cp,
                nms,
                harris,
                harris_bs,
                k,
                sss,
                halo,
                cap,
                flags,
                rc,
                slots,
            )
        }?;
        if cp.lo < cp.ini {
            // SAFETY: `cell_filter`'s buffers are this context's, sized for this launch when the
            // stage was built.
            unsafe {
                gpu.k.fast_harris.cell_filter(
                    gpu,
                    Launch::new((self.ntiles as u32, 1, 1), (256, 1, 1)),
                    descs,
                    nlev,
                    cp,
                    flags,
                    cap,
                    rc,
                    slots,
                )
            }?;
        }
        self.compact(gpu, pyr, orient)
    }

    /// The ordered compaction of the survivors that a detection kernel left in the row
    /// counts and tile slots (`scan_tile_rows`, `scan_levels`, `gather_orient`).
    pub fn compact(&self, gpu: &Gpu, pyr: &Pyramid, orient: bool) -> Result<()> {
        let (pyr_p, descs, nlev) = (pyr.buf.ptr(), self.descs.ptr(), self.nlev as i32);
        let cap = self.cap as i32;
        let (rc, rc_off, tr_total, tr_base) = (
            self.rc.ptr(),
            self.rc_off.ptr(),
            self.tr_total.ptr(),
            self.tr_base.ptr(),
        );
        let (header, slots, out) = (self.header.ptr(), self.slots.ptr(), self.out.ptr());
        // SAFETY: `scan_tile_rows`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.compact.scan_tile_rows(
                gpu,
                Launch::new((self.ntr as u32, 1, 1), (256, 1, 1)),
                descs,
                nlev,
                rc,
                rc_off,
                tr_total,
            )
        }?;
        // SAFETY: `scan_levels`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.compact.scan_levels(
                gpu,
                Launch::new((1, 1, 1), (1024, 1, 1)),
                descs,
                nlev,
                tr_total,
                tr_base,
                header,
            )
        }?;
        let orient = orient as i32;
        let half = self.half;
        let umax = self.umax.ptr();
        let p = atan_coefficients();
        let eps = f64::EPSILON as f32;
        let out_cap = self.out_cap as u32;
        let ntiles = self.ntiles as i32;
        // SAFETY: `gather_orient`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            // 8 warps of GATHER_TILES tiles (kernels/orient.cu).
            gpu.k.orient.gather_orient(
                gpu,
                Launch::new(
                    // 8 warps of GATHER_TILES tiles (kernels/orient.cu).
                    (self.ntiles.div_ceil(8 * 4) as u32, 1, 1),
                    (256, 1, 1),
                ),
                pyr_p,
                descs,
                nlev,
                ntiles,
                cap,
                rc,
                rc_off,
                tr_base,
                slots,
                orient,
                half,
                umax,
                p,
                eps,
                out,
                out_cap,
            )
        }?;
        Ok(())
    }

    /// Queues the download of a header of `1 + 2 * nlev` words from `header` (device) and
    /// of `records` 16-byte records from `recs` (no sync).
    pub fn queue_download(
        &mut self,
        gpu: &Gpu,
        header: DevPtr<u32>,
        recs: DevPtr<[u32; 4]>,
        records: usize,
    ) -> Result<()> {
        let n = (1 + 2 * self.nlev) * 4;
        download(&gpu.stream, header, &mut self.host_header, 0, n)?;
        let records = records.min(self.out_cap);
        download(&gpu.stream, recs, &mut self.host_out, 0, records * 16)
    }

    /// Queues `copy_results` (kernels/select.cu) of the candidate header and the candidates
    /// it counts (at most `out_cap`) straight into the pinned buffers, where they are
    /// mapped: no sync for the count first (docs/performance.md, change 49). `false`, nothing
    /// queued, where they are not: [`Detector::queue_candidate_header`] then.
    pub fn copy_candidates(&self, gpu: &Gpu) -> Result<bool> {
        self.copy_to_host(gpu, self.header.ptr(), self.out.ptr(), self.out_cap, None)
    }

    /// Queues `copy_results` (kernels/select.cu): the header at `header` (device) and the
    /// records at `recs` that it counts (at most `cap`) into this detector's pinned header
    /// and records, and with `desc` (the device's descriptors, the device address of their
    /// pinned host copy) as many descriptors: straight into the memory the host reads after
    /// its sync. `false`, nothing queued, where the pinned header and records are not
    /// mapped.
    pub fn copy_to_host(
        &self,
        gpu: &Gpu,
        header: DevPtr<u32>,
        recs: DevPtr<[u32; 4]>,
        cap: usize,
        desc: Option<(Records, Records)>,
    ) -> Result<bool> {
        let Some((host_header, host_recs)) = self.results_on_host() else {
            return Ok(false);
        };
        let (desc, host_desc) = desc.unwrap_or((DevPtr::NULL, DevPtr::NULL));
        let (nlev, cap_u32) = (self.nlev as i32, cap as u32);
        let words = cap * if desc.is_null() { 1 } else { 3 };
        // SAFETY: `copy_results`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.select.copy_results(
                gpu,
                Launch::new(
                    (words.div_ceil(256).clamp(1, 1024) as u32, 1, 1),
                    (256, 1, 1),
                ),
                header,
                nlev,
                cap_u32,
                recs,
                desc,
                host_header,
                host_recs,
                host_desc,
            )
        }?;
        Ok(true)
    }

    /// Queues the candidate header download (no sync).
    pub fn queue_candidate_header(&mut self, gpu: &Gpu) -> Result<()> {
        let h = self.header.ptr();
        self.queue_download(gpu, h, DevPtr::NULL, 0)
    }

    /// After the sync of [`Detector::queue_candidate_header`]: queues the download of every
    /// candidate (then sync again).
    pub fn queue_candidates(&mut self, gpu: &Gpu) -> Result<()> {
        let total = (self.header_word(0) as usize).min(self.out_cap);
        download(
            &gpu.stream,
            self.out.ptr(),
            &mut self.host_out,
            0,
            total * 16,
        )
    }

    /// The device's addresses of the pinned header and records (`copy_results` writes them),
    /// `None` where they are not mapped.
    pub fn results_on_host(&self) -> Option<(DevPtr<u32>, DevPtr<[u32; 4]>)> {
        let (h, r) = (self.host_header.dev_ptr(), self.host_out.dev_ptr());
        (!h.is_null() && !r.is_null()).then_some((h.cast(), r.cast()))
    }

    /// Word `i` of the downloaded header.
    pub fn header_word(&self, i: usize) -> u32 {
        let c = &self.host_header.as_slice()[4 * i..4 * i + 4];
        u32::from_le_bytes([c[0], c[1], c[2], c[3]])
    }

    /// After the sync: per level (count, base) from the downloaded header, clamped to the
    /// records that were downloaded (`records`).
    pub fn level_range(&self, level: usize, records: usize) -> (usize, usize) {
        let count = self.header_word(1 + level) as usize;
        let base = (self.header_word(1 + self.nlev + level) as usize).min(records);
        (count.min(records - base), base)
    }

    /// Downloaded record `i` (valid after the sync).
    #[inline]
    pub fn record(&self, i: usize) -> Candidate {
        let c = &self.host_out.as_slice()[16 * i..16 * i + 16];
        let w = |i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
        Candidate {
            xy: w(0),
            fast_score: w(4),
            response: f32::from_bits(w(8)),
            angle: f32::from_bits(w(12)),
        }
    }
}

/// The ORB Harris score's arguments of `fast_harris` / `fast_cells`: whether it is on, its
/// block size, the tile halo it needs (at least the FAST circle's 3 + 1 for the NMS ring) and
/// OpenCV's scale^4.
fn harris_args(d: &DetectorConfig) -> (i32, i32, i32, f32) {
    let harris_bs = d.harris_block_size as i32;
    let halo = (harris_bs / 2 + 1).max(4);
    let harris = (d.method == DetectorMethod::Fast && d.score == ScoreType::Harris) as i32;
    let scale = 1.0f32 / ((4 * harris_bs) as f32 * 255.0f32);
    (harris, harris_bs, halo, scale * scale * scale * scale)
}

/// `cv::fastAtan2`'s polynomial coefficients as `float4 {P1, P3, P5, P7}`, computed exactly
/// as src/cpu/orient.rs does (f32 products).
pub fn atan_coefficients() -> [f32; 4] {
    use crate::cpu::orient::{ATAN_P1, ATAN_P3, ATAN_P5, ATAN_P7};
    [ATAN_P1, ATAN_P3, ATAN_P5, ATAN_P7]
}

#[cfg(test)]
mod tests {
    /// The lane arithmetic of `compass4` (kernels/fast_harris.cu, note "compass test in
    /// 16-bit lanes"), for every centre v, neighbour q and threshold t in 0..=255, two pixels
    /// per 32-bit word: bit 15 of each lane says brighter than v + t, resp. darker than
    /// v - t, exactly as the scalar test, and no carry or borrow reaches the other lane
    /// (the other lane's pixel pair is chosen to be the worst case for a borrow).
    #[test]
    fn compass_lanes_brighter_and_darker_are_exact() {
        const H: u32 = 0x8000_8000;
        for t in 0..=255u32 {
            let t1 = (t + 1) * 0x0001_0001;
            for v in 0..=255u32 {
                for q in 0..=255u32 {
                    for (other_v, other_q) in [(0u32, 255u32), (255, 0)] {
                        let vv = v | (other_v << 16);
                        let qq = q | (other_q << 16);
                        let bright = qq.wrapping_add(H.wrapping_sub(t1).wrapping_sub(vv));
                        let dark = H.wrapping_sub(t1).wrapping_add(vv).wrapping_sub(qq);
                        assert_eq!(bright & 0x8000 != 0, q > v + t, "bright v{v} q{q} t{t}");
                        assert_eq!(dark & 0x8000 != 0, q + t < v, "dark v{v} q{q} t{t}");
                        // The upper lane is the other pair's own result, untouched.
                        let hi_bright = other_q + 0x8000 - (t + 1) - other_v;
                        let hi_dark = 0x8000 - (t + 1) + other_v - other_q;
                        assert_eq!(bright >> 16, hi_bright, "carry into the upper lane");
                        assert_eq!(dark >> 16, hi_dark, "borrow into the upper lane");
                    }
                }
            }
        }
    }
}
