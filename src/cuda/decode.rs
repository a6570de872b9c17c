//! Encoding decode + gray conversion on the GPU (host side of `kernels/decode.cu`): the raw
//! message bytes go to the device through a pinned staging buffer; the conversion runs there.
//!
//! The copy into the staging buffer was the largest single cost of a 1080p frame (190 us on
//! one thread for 2 MB of mono8 on the H100 machine, 4x the 50 us pinned upload that
//! follows): one core cannot fill write-combined memory at PCIe speed. Frames of at least
//! [`PARALLEL_COPY_MIN`] bytes are copied in [`COPY_CHUNK`] pieces on rayon's pool.
//! Tunables and measurements: docs/performance.md, "Input path".

use rayon::prelude::*;

use super::buffers::{upload, DevBuf, HostBuf};
use super::context::Gpu;
use crate::error::Result;
use crate::image::{Encoding, ImageView};

pub fn encoding_code(e: Encoding) -> i32 {
    match e {
        Encoding::Mono8 => 0,
        Encoding::Mono16 => 1,
        Encoding::Rgb8 => 2,
        Encoding::Bgr8 => 3,
        Encoding::Rgba8 => 4,
        Encoding::Bgra8 => 5,
        Encoding::Uyvy => 6,
        Encoding::Yuyv => 7,
    }
}

/// Frames smaller than this are copied on the calling thread (waking the pool costs more).
pub const PARALLEL_COPY_MIN: usize = 256 << 10;
/// Bytes per parallel copy task: large enough to amortise a task, small enough to spread
/// a 1080p mono8 frame (2 MB) over 8 threads.
pub const COPY_CHUNK: usize = 256 << 10;

/// `dst.copy_from_slice(src)`, on several threads for large frames.
pub fn copy_to_staging(dst: &mut [u8], src: &[u8]) {
    if src.len() < PARALLEL_COPY_MIN {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(COPY_CHUNK)
        .zip(src.par_chunks(COPY_CHUNK))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Upload staging and raw device bytes for frames of one geometry.
pub struct Decoder {
    raw_bytes: usize,
    host: HostBuf,
    dev: DevBuf,
}

impl Decoder {
    pub fn new(gpu: &Gpu, frame: &ImageView) -> Result<Self> {
        let raw_bytes = frame.step() * frame.height();
        Ok(Decoder {
            raw_bytes,
            host: HostBuf::new(&gpu.ctx, raw_bytes, true)?,
            dev: DevBuf::new(&gpu.ctx, raw_bytes)?,
        })
    }

    /// Copies the frame into pinned memory, uploads it and converts it into `gray` (w*h).
    /// A packed mono8 frame is uploaded straight into `gray`.
    pub fn run(&mut self, gpu: &Gpu, frame: &ImageView, gray: u64) -> Result<()> {
        let n = self.raw_bytes;
        copy_to_staging(&mut self.host.as_mut_slice()[..n], &frame.data()[..n]);
        let (w, h) = (frame.width(), frame.height());
        let stream = &gpu.stream;
        if frame.encoding() == Encoding::Mono8 && frame.step() == w {
            return upload(stream, &self.host, gray, n);
        }
        upload(stream, &self.host, self.dev.ptr(), n)?;
        let raw = self.dev.ptr();
        let step = frame.step() as i32;
        let (wi, hi) = (w as i32, h as i32);
        let enc = encoding_code(frame.encoding());
        let be = frame.big_endian() as i32;
        let out = gray;
        use crate::cpu::decode::{GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT};
        let wt: [u32; 4] = [GRAY_R, GRAY_G, GRAY_B, GRAY_SHIFT];
        gpu.launch(
            "decode_gray",
            &gpu.k.decode_gray,
            (w.div_ceil(32) as u32, h.div_ceil(8) as u32, 1),
            (32, 8, 1),
            0,
            &mut kargs![raw, step, wi, hi, enc, be, wt, out],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_copy_is_exact_at_every_size_around_the_thresholds() {
        for n in [
            0,
            1,
            PARALLEL_COPY_MIN - 1,
            PARALLEL_COPY_MIN,
            3 * COPY_CHUNK + 17,
        ] {
            let src: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let mut dst = vec![0u8; n];
            copy_to_staging(&mut dst, &src);
            assert!(dst == src, "{n} bytes");
        }
    }
}
