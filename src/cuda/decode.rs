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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cudarc::driver::{result, CudaStream};
use rayon::prelude::*;

use super::buffers::{upload, upload_range, DevBuf, HostBuf};
use super::context::cuda_err;
use super::context::Gpu;
use crate::error::Result;
use crate::image::{Encoding, FrameLayout};

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

/// The staging buffer's address, shared by the threads of one copy ([`Pieces`]).
#[derive(Clone, Copy)]
struct SendPtr(*mut u8);

/// Who copies the pieces of [`stage_and_upload_by`]. The pipeline uses the pool: the calling
/// thread alone was slower at every size measured, even 2 MB after an idle gap
/// (docs/performance.md, "Input path").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyCrew {
    /// The calling thread, piece after piece.
    ThisThread,
    /// Rayon's pool and the calling thread, which queues the uploads in order.
    Pool,
}

/// Copies `src` into the pinned `host` buffer and queues its upload to `dst` on `stream`
/// (no sync), in pieces copied on rayon's pool (and this thread), each piece's upload queued
/// by this thread as soon as it is copied, so that the upload overlaps the copy. No
/// allocation.
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
    copy_in_pieces(src, &mut host.as_mut_slice()[..n], |off, bytes| {
        unsafe { result::memcpy_htod_async(dst + off as u64, bytes, stream.cu_stream()) }
            .map_err(|e| cuda_err("host-to-device copy", e))
    })
}

/// Copies `src` into `dst` (same length) in [`piece_bytes`] pieces shared by this thread and
/// rayon's pool, and calls `on_piece(offset, bytes)` on this thread for each piece, in
/// order, as soon as it is in. This thread copies too whenever it has nothing to hand over:
/// the copy finishes even when the pool is busy or the caller is the pool's only thread
/// (and it measured the same as leaving the copy to the pool: docs/performance.md).
pub fn copy_in_pieces(
    src: &[u8],
    dst: &mut [u8],
    mut on_piece: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    assert_eq!(src.len(), dst.len(), "copy_in_pieces: lengths differ");
    let n = src.len();
    let pieces = Pieces {
        src,
        dst: SendPtr(dst.as_mut_ptr()),
        piece: piece_bytes(n),
        count: n.div_ceil(piece_bytes(n)),
        next: AtomicUsize::new(0),
        done: std::array::from_fn(|_| AtomicBool::new(false)),
    };
    let helpers = pieces
        .count
        .saturating_sub(1)
        .min(rayon::current_num_threads());
    rayon::in_place_scope(|s| -> Result<()> {
        for _ in 0..helpers {
            s.spawn(|_| while pieces.copy_one() {});
        }
        let mut handed = 0;
        while handed < pieces.count {
            if let Some(bytes) = pieces.finished(handed) {
                on_piece(handed * pieces.piece, bytes)?;
                handed += 1;
            } else if !pieces.copy_one() {
                std::hint::spin_loop();
            }
        }
        Ok(())
    })
}

/// The pieces of one frame's copy into pinned staging, claimed by whichever thread comes.
struct Pieces<'a> {
    src: &'a [u8],
    dst: SendPtr,
    piece: usize,
    count: usize,
    next: AtomicUsize,
    done: [AtomicBool; MAX_PIECES],
}

// SAFETY: `dst` points at `src.len()` bytes that `copy_in_pieces` holds by `&mut` for the
// whole scope; the pieces are disjoint and each is written by the one
// thread that claimed it (`next`), then only read after its Release flag.
unsafe impl Sync for Pieces<'_> {}

impl Pieces<'_> {
    /// Claims the next piece and copies it; false when none was left.
    fn copy_one(&self) -> bool {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        if k >= self.count {
            return false;
        }
        let off = k * self.piece;
        let part = &self.src[off..(off + self.piece).min(self.src.len())];
        // SAFETY: see `impl Sync for Pieces`: piece k is this thread's alone. Raw pointers
        // because the calling thread uploads finished pieces while others are still being
        // written (measured benefit: docs/performance.md, change 8: 0.229 -> 0.179 ms at
        // 1080p after an idle gap).
        unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), self.dst.0.add(off), part.len()) };
        self.done[k].store(true, Ordering::Release);
        true
    }

    /// Piece k's bytes in the staging buffer once they are all there.
    fn finished(&self, k: usize) -> Option<&[u8]> {
        if !self.done[k].load(Ordering::Acquire) {
            return None;
        }
        let off = k * self.piece;
        let len = self.piece.min(self.src.len() - off);
        // SAFETY: piece k is complete (Acquire above) and nobody writes it again.
        Some(unsafe { std::slice::from_raw_parts(self.dst.0.add(off), len) })
    }
}

/// Where [`Decoder::run`] takes the frame's bytes from.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A caller's (pageable) buffer: copied into the pinned staging, then uploaded.
    Copy(&'a [u8]),
    /// Already in the pinned staging ([`Decoder::staging`]): uploaded as it is.
    Staged,
}

/// Upload staging and raw device bytes for frames of one layout; or, mapped
/// (`cuda.zero_copy`), one pinned buffer that the first kernel reads in place.
pub struct Decoder {
    layout: FrameLayout,
    raw_bytes: usize,
    host: HostBuf,
    /// The uploaded raw bytes (empty when mapped).
    dev: DevBuf,
}

impl Decoder {
    pub fn new(gpu: &Gpu, layout: FrameLayout, mapped: bool) -> Result<Self> {
        let raw_bytes = layout.bytes()?;
        let (host, dev) = if mapped {
            (
                HostBuf::new_mapped(&gpu.ctx, raw_bytes)?,
                DevBuf::empty(&gpu.ctx),
            )
        } else {
            (
                HostBuf::new(&gpu.ctx, raw_bytes, true)?,
                DevBuf::new(&gpu.ctx, raw_bytes)?,
            )
        };
        Ok(Decoder {
            layout,
            raw_bytes,
            host,
            dev,
        })
    }

    pub fn layout(&self) -> FrameLayout {
        self.layout
    }

    /// Whether the kernels read the staging in place (`cuda.zero_copy`).
    pub fn mapped(&self) -> bool {
        self.host.dev_ptr() != 0
    }

    /// The pinned staging bytes of one frame: write a frame here and run with
    /// [`Source::Staged`] to skip the copy.
    pub fn staging(&mut self) -> &mut [u8] {
        &mut self.host.as_mut_slice()[..self.raw_bytes]
    }

    /// The staged frame's bytes (e.g. for the CPU to redo a frame the GPU failed on).
    pub fn staged(&self) -> &[u8] {
        &self.host.as_slice()[..self.raw_bytes]
    }

    /// Brings the frame to the GPU (copy into pinned memory and upload, or the upload
    /// alone; mapped: the copy alone) and converts it into `gray` (w*h). A packed mono8
    /// frame is uploaded (or, mapped, copied by a kernel) straight into `gray`.
    pub fn run(&mut self, gpu: &Gpu, source: Source, gray: u64) -> Result<()> {
        let n = self.raw_bytes;
        let l = self.layout;
        let packed_mono8 = l.encoding == Encoding::Mono8 && l.step == l.width;
        if self.mapped() {
            if let Source::Copy(src) = source {
                copy_to_staging(&mut self.host.as_mut_slice()[..n], &src[..n]);
            }
            let raw = self.host.dev_ptr();
            if packed_mono8 && raw % 16 == 0 && gray % 16 == 0 {
                let n64 = n as u64;
                let blocks = n.div_ceil(16 * 256).max(1) as u32;
                return gpu.launch(
                    "copy_frame16",
                    &gpu.k.copy_frame16,
                    (blocks, 1, 1),
                    (256, 1, 1),
                    0,
                    &mut kargs![raw, gray, n64],
                );
            }
            return self.convert(gpu, raw, gray);
        }
        let stream = &gpu.stream;
        let dst = if packed_mono8 { gray } else { self.dev.ptr() };
        match source {
            Source::Copy(src) => stage_and_upload(stream, &mut self.host, dst, &src[..n])?,
            Source::Staged => upload(stream, &self.host, dst, n)?,
        }
        if packed_mono8 {
            return Ok(());
        }
        self.convert(gpu, self.dev.ptr(), gray)
    }

    /// The encoding's conversion from the raw bytes at `raw` (device address) into `gray`.
    fn convert(&self, gpu: &Gpu, raw: u64, gray: u64) -> Result<()> {
        let l = self.layout;
        let step = l.step as i32;
        let (wi, hi) = (l.width as i32, l.height as i32);
        let enc = encoding_code(l.encoding);
        let be = l.big_endian as i32;
        let out = gray;
        use crate::cpu::decode::{GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT};
        let wt: [u32; 4] = [GRAY_R, GRAY_G, GRAY_B, GRAY_SHIFT];
        gpu.launch(
            "decode_gray",
            &gpu.k.decode_gray,
            (l.width.div_ceil(32) as u32, l.height.div_ceil(8) as u32, 1),
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
    fn pieces_are_copied_exactly_and_handed_over_in_order() {
        for n in [
            0,
            1,
            PARALLEL_COPY_MIN,
            3 * COPY_CHUNK + 17,
            MAX_PIECES * COPY_CHUNK + 1,
            40 << 20,
        ] {
            let src: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let mut dst = vec![0u8; n];
            let mut seen = Vec::new();
            copy_in_pieces(&src, &mut dst, |off, bytes| {
                // Each piece is complete when handed over.
                assert!(
                    bytes == &src[off..off + bytes.len()],
                    "{n} bytes, piece at {off}"
                );
                seen.push((off, bytes.len()));
                Ok(())
            })
            .unwrap();
            assert!(dst == src, "{n} bytes");
            let piece = piece_bytes(n);
            let want: Vec<(usize, usize)> = (0..n.div_ceil(piece))
                .map(|k| (k * piece, piece.min(n - k * piece)))
                .collect();
            assert_eq!(seen, want, "{n} bytes");
            assert!(seen.len() <= MAX_PIECES);
        }
    }

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
