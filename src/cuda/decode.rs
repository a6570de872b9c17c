//! Encoding decode + gray conversion on the GPU (host side of `kernels/decode.cu`): the raw
//! message bytes go to the device through a pinned staging buffer; the conversion runs there.
//!
//! The copy into the staging buffer was the largest single cost of a 1080p frame (190 us on
//! one thread for 2 MB of mono8 on the H100 machine, 4x the 50 us pinned upload that
//! follows): one core cannot fill write-combined memory at PCIe speed. Frames of at least
//! [`PARALLEL_COPY_MIN`] bytes are cut into at most [`MAX_PIECES`] pieces of at least
//! [`COPY_CHUNK`] bytes, and each piece's upload is queued as soon as that piece is in
//! ([`stage_and_upload`]): the DMA of the first pieces runs while the others are copied on
//! rayon's pool. Tunables and measurements: docs/performance.md, "Input path".

use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::CudaStream;
use rayon::prelude::*;

use super::buffers::{upload, upload_range, DevBuf, HostBuf};
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
/// Smallest piece of a parallel copy: large enough to amortise a task and an upload call,
/// small enough to spread a 1080p mono8 frame (2 MB) over 8 threads.
pub const COPY_CHUNK: usize = 256 << 10;
/// Most pieces per frame (a 4K bgr8 frame, 24 MB, goes in 16 pieces of 1.5 MB).
pub const MAX_PIECES: usize = 16;

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

/// Piece size of [`stage_and_upload`] for `n` bytes.
pub fn piece_bytes(n: usize) -> usize {
    COPY_CHUNK.max(n.div_ceil(MAX_PIECES))
}

/// A pointer that may cross to a pool thread; see the SAFETY note where it is used.
#[derive(Clone, Copy)]
struct SendPtr(*mut u8);
unsafe impl Send for SendPtr {}

/// Who copies the pieces of [`stage_and_upload_by`]. The pipeline uses the pool: the calling
/// thread alone was slower at every size measured, even 2 MB after an idle gap
/// (docs/performance.md, "Input path").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyCrew {
    /// The calling thread, piece after piece.
    ThisThread,
    /// Rayon's pool; the calling thread queues the uploads.
    Pool,
}

/// Copies `src` into the pinned `host` buffer and queues its upload to `dst` on `stream`
/// (no sync), in pieces copied on rayon's pool, each piece's upload queued by this thread as
/// soon as it is copied, so that the upload overlaps the copy. No allocation.
pub fn stage_and_upload(
    stream: &CudaStream,
    host: &mut HostBuf,
    dst: u64,
    src: &[u8],
) -> Result<()> {
    stage_and_upload_by(stream, host, dst, src, CopyCrew::Pool)
}

/// [`stage_and_upload`] with the copy done by `crew` (the bench compares them).
pub fn stage_and_upload_by(
    stream: &CudaStream,
    host: &mut HostBuf,
    dst: u64,
    src: &[u8],
    crew: CopyCrew,
) -> Result<()> {
    let n = src.len();
    if n < PARALLEL_COPY_MIN {
        host.as_mut_slice()[..n].copy_from_slice(src);
        return upload(stream, host, dst, n);
    }
    if crew == CopyCrew::ThisThread {
        let piece = piece_bytes(n);
        for (k, part) in src.chunks(piece).enumerate() {
            let off = k * piece;
            host.as_mut_slice()[off..off + part.len()].copy_from_slice(part);
            upload_range(stream, host, off, dst + off as u64, part.len())?;
        }
        return Ok(());
    }
    let piece = piece_bytes(n);
    let pieces = n.div_ceil(piece);
    let done: [AtomicBool; MAX_PIECES] = std::array::from_fn(|_| AtomicBool::new(false));
    let base = SendPtr(host.as_mut_slice()[..n].as_mut_ptr());
    let host: &HostBuf = host;
    rayon::in_place_scope(|s| -> Result<()> {
        for (k, part) in src.chunks(piece).enumerate() {
            let flag = &done[k];
            s.spawn(move |_| {
                // SAFETY: pieces are disjoint ranges of the `n` bytes behind `base`, which the
                // `&mut HostBuf` above keeps alive and unaliased for the whole scope; this
                // thread only reads piece k (for its upload) after the Release store below.
                // Raw pointers instead of `chunks_mut` because this thread reads the pieces
                // while the scope still runs (measured benefit: docs/performance.md).
                let dst = base;
                unsafe {
                    std::ptr::copy_nonoverlapping(part.as_ptr(), dst.0.add(k * piece), part.len())
                };
                flag.store(true, Ordering::Release);
            });
        }
        for (k, flag) in done.iter().enumerate().take(pieces) {
            while !flag.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            let off = k * piece;
            let len = piece.min(n - off);
            upload_range(stream, host, off, dst + off as u64, len)?;
        }
        Ok(())
    })
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
        let (w, h) = (frame.width(), frame.height());
        let stream = &gpu.stream;
        let src = &frame.data()[..n];
        if frame.encoding() == Encoding::Mono8 && frame.step() == w {
            return stage_and_upload(stream, &mut self.host, gray, src);
        }
        stage_and_upload(stream, &mut self.host, self.dev.ptr(), src)?;
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
