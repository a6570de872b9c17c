//! ORB descriptors on the GPU (host side of `kernels/describe.cu`; semantics in
//! `cpu::describe`'s "Note: descriptor semantics").
//!
//! One kernel per frame for the kept keypoints only, the blur fused in (each block blurs the
//! patch around its keypoint; no blurred copy of the pyramid):
//! - ORB's path (GPU selection): straight from the selection's records, before the final
//!   download, and downloaded with them ([`Describer::describe_records`]);
//! - the host spread modes and `max_keypoints: 0` pick the keypoints on the host: their
//!   records are uploaded, described and downloaded in one more round trip
//!   ([`Describer::describe_keypoints`]).

use super::driver::buffers::{download, upload, DevBuf, HostBuf};
use super::driver::{DevPtr, Launch};
use super::kernels::params::{DescLevels, DESC_MAX_LEVELS};
use super::pyramid::Pyramid;
use super::Gpu;
use crate::config::DescriptorBlur;
use crate::cpu::blur::gaussian_kernel_fixed;
use crate::cpu::describe::{blur_kernel, center, DescribeSettings};
use crate::error::{Error, Result};
use crate::features::{Descriptor, Keypoint};

/// The descriptor blur's first four taps (the 7-tap kernel is symmetric) and 1 when they
/// are ORB-SLAM3's fixed-point ones, as the kernel takes them: made once per [`Describer`]
/// (ORB-SLAM3's kernel is built in vectors; per frame it made 3 allocations).
fn blur_taps(blur: DescriptorBlur) -> ([f32; 4], i32) {
    match blur {
        DescriptorBlur::Orb => {
            let k = blur_kernel();
            ([k[0], k[1], k[2], k[3]], 0)
        }
        DescriptorBlur::OrbSlam3 => {
            let k = gaussian_kernel_fixed(7, 2.0);
            ([k[0] as f32, k[1] as f32, k[2] as f32, k[3] as f32], 1)
        }
    }
}

/// Where [`Describer::describe_records`] takes each keypoint's angle from.
#[derive(Clone, Copy, Debug)]
pub enum Angles {
    /// Orientation off: -1 (as `cpu::to_keypoint`).
    None,
    /// The record's angle word.
    FromRecords,
    /// Computed in the descriptor kernel from the patch it loads anyway (ORB's intensity
    /// centroid over a disc of radius `half`, `umax` its row extents on the device) and
    /// written back into the record. Only for `half <=` [`MAX_FUSED_HALF`].
    ComputeHere { half: i32, umax: DevPtr<i32> },
}

/// Largest orientation patch radius that [`Angles::ComputeHere`] serves: the raw patch of
/// describe.cu reaches 21 pixels from the centre, one kept for rounding.
pub const MAX_FUSED_HALF: i32 = 20;

/// Device and pinned buffers of the descriptor stage, sized once per resolution.
pub struct Describer {
    /// The level geometry and the blur (`describe.blur`).
    set: DescribeSettings,
    /// The blur's first four taps and whether they are fixed-point ([`blur_taps`]).
    taps: ([f32; 4], i32),
    levels: DescLevels,
    nlev: usize,
    /// Capacity in keypoints (the detector's record capacity).
    cap: usize,
    /// 32 bytes per keypoint (two `uint4`s, as `copy_results` copies them).
    desc: DevBuf<[u32; 4]>,
    host_desc: HostBuf,
    /// The host-selected keypoints' records and header (host spread modes).
    recs: DevBuf<[u32; 4]>,
    header: DevBuf<u32>,
    host_recs: HostBuf,
    host_header: HostBuf,
}

impl Describer {
    pub fn new(gpu: &Gpu, pyr: &Pyramid, cap: usize, set: DescribeSettings) -> Result<Self> {
        let nlev = pyr.levels.len();
        if nlev > DESC_MAX_LEVELS {
            return Err(Error::Cuda(format!(
                "{nlev} pyramid levels (at most {DESC_MAX_LEVELS})"
            )));
        }
        let mut levels = DescLevels {
            w: [0; DESC_MAX_LEVELS],
            h: [0; DESC_MAX_LEVELS],
            off: [0; DESC_MAX_LEVELS],
            scale: [0.0; DESC_MAX_LEVELS],
        };
        for (l, lv) in pyr.levels.iter().enumerate() {
            levels.w[l] = lv.w as i32;
            levels.h[l] = lv.h as i32;
            levels.off[l] = i32::try_from(lv.off)
                .map_err(|_| Error::Cuda("pyramid larger than 2 GiB".into()))?;
            levels.scale[l] = crate::cpu::pyramid::level_scale(set.scales, set.scale_factor, l);
        }
        let c = &gpu.ctx;
        let cap = cap.max(1);
        let hdr = 1 + 2 * nlev;
        Ok(Describer {
            set,
            taps: blur_taps(set.blur),
            levels,
            nlev,
            cap,
            desc: DevBuf::new(c, cap * 2)?,
            host_desc: HostBuf::new_device_written(c, cap * 32, gpu.can_map_host)?,
            recs: DevBuf::new(c, cap)?,
            header: DevBuf::new(c, hdr)?,
            host_recs: HostBuf::new(c, cap * 16, true)?,
            host_header: HostBuf::new(c, hdr * 4, true)?,
        })
    }

    /// Queues the descriptors of at most `max_records` records at `recs` (device) whose
    /// header `{total, count[l]..., base[l]...}` is at `header`, then, with `download_them`,
    /// their download (without it the caller brings them back: `Selector::copy_results`).
    /// `angles`: where each keypoint's angle comes from.
    #[allow(clippy::too_many_arguments)]
    pub fn describe_records(
        &mut self,
        gpu: &Gpu,
        pyr: &Pyramid,
        header: DevPtr<u32>,
        recs: DevPtr<[u32; 4]>,
        max_records: usize,
        angles: Angles,
        download_them: bool,
    ) -> Result<()> {
        let n = max_records.min(self.cap);
        let (src, lv, out) = (pyr.buf.ptr(), self.levels, self.desc.ptr().cast::<u32>());
        let nlev = self.nlev as i32;
        let (k, fixed) = self.taps;
        let flags = fixed | (self.set.fma as i32) << 1;
        let (mode, half, umax) = match angles {
            Angles::None => (0, 0, DevPtr::NULL),
            Angles::FromRecords => (1, 0, DevPtr::NULL),
            Angles::ComputeHere { half, umax } => (2, half, umax),
        };
        let p = crate::cuda::fast_harris::atan_coefficients();
        let eps = f64::EPSILON as f32;
        // One block per record, one thread per test pair.
        // SAFETY: `orb_describe`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.describe.orb_describe(
                gpu,
                Launch::new((n.max(1) as u32, 1, 1), (32, 8, 1)),
                src,
                lv,
                nlev,
                header,
                recs,
                mode,
                k,
                flags,
                half,
                umax,
                p,
                eps,
                out,
            )
        }?;
        if download_them {
            download(&gpu.stream, out, &mut self.host_desc, 0, n * 32)?;
        }
        Ok(())
    }

    /// The descriptors on the device, and the device's address of their pinned host copy
    /// (`None` where it is not mapped).
    pub fn results(&self) -> (DevPtr<[u32; 4]>, Option<DevPtr<[u32; 4]>>) {
        let h = self.host_desc.dev_ptr();
        (self.desc.ptr(), (!h.is_null()).then_some(h.cast()))
    }

    /// Descriptors of keypoints chosen on the host (sorted by octave, as every backend
    /// returns them): upload their records, describe, download, sync. After the blur.
    pub fn describe_keypoints(
        &mut self,
        gpu: &Gpu,
        pyr: &Pyramid,
        keypoints: &[Keypoint],
        use_angle: bool,
    ) -> Result<()> {
        let n = keypoints.len();
        if n > self.cap {
            return Err(Error::Cuda(format!(
                "{n} keypoints to describe, capacity {}",
                self.cap
            )));
        }
        let nlev = self.nlev;
        let mut counts = [0u32; DESC_MAX_LEVELS];
        let recs = self.host_recs.as_mut_slice();
        for (i, kp) in keypoints.iter().enumerate() {
            let l = (kp.octave.max(0) as usize).min(nlev - 1);
            counts[l] += 1;
            let (cx, cy) = center(kp, self.set.scales, self.set.scale_factor);
            let words = [
                (cx as u32 & 0xffff) | (cy as u32) << 16,
                0,
                0,
                kp.angle.to_bits(),
            ];
            for (j, w) in words.iter().enumerate() {
                recs[16 * i + 4 * j..16 * i + 4 * j + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
        let hdr = self.host_header.as_mut_slice();
        let mut put = |i: usize, v: u32| hdr[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        put(0, n as u32);
        let mut base = 0u32;
        for (l, &c) in counts.iter().enumerate().take(nlev) {
            put(1 + l, c);
            put(1 + nlev + l, base);
            base += c;
        }
        upload(&gpu.stream, &self.host_recs, self.recs.ptr(), n * 16)?;
        upload(
            &gpu.stream,
            &self.host_header,
            self.header.ptr(),
            (1 + 2 * nlev) * 4,
        )?;
        let (h, r) = (self.header.ptr(), self.recs.ptr());
        let angles = if use_angle {
            Angles::FromRecords
        } else {
            Angles::None
        };
        self.describe_records(gpu, pyr, h, r, n, angles, true)?;
        gpu.sync()
    }

    /// After the sync: descriptor `i` of the last download.
    pub fn descriptor(&self, i: usize) -> Descriptor {
        self.host_desc.as_slice()[32 * i..32 * i + 32]
            .try_into()
            .expect("32 bytes")
    }
}
