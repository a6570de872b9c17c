//! The frame's copy into pinned staging in pieces, shared by the calling thread and the
//! crew ([`super::crew`]), each piece handed back to the caller (for its upload) as soon as
//! it is in. The bytes are written with streaming stores (`copy_streaming`): the upload
//! then reads them from memory, not from dirty cache lines. Measured on the H100 machine
//! (docs/performance.md, changes 23, 26 and 27): a 1080p mono8 frame's copy and upload
//! 0.17-0.18 ms on rayon's pool with plain stores, 0.09-0.10 ms with streaming stores and the
//! crew, ~0.07 ms with the stripes claimed in order and the doubling pieces.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::crew::{pause, share, Helpers, Job};
use crate::error::Result;

/// Frames of at most this many bytes are one piece, copied by the calling thread alone (no
/// helper to wake, nothing to overlap).
pub const COPY_CHUNK: usize = 256 << 10;
/// The first piece of a larger frame: small, so that its upload starts early. Each next
/// piece is twice the one before, up to [`MAX_PIECE`] (the copy on several threads outruns
/// the upload, so a piece is in before the link is free for it), and the last takes the
/// rest once that is at most twice the next size: a 1080p mono8 frame goes in 4 uploads
/// (128 KB to 1.1 MB), not 8 of 256 KB. Multiples of [`STRIPE`].
pub const FIRST_PIECE: usize = 128 << 10;
/// The doubling stops at this size: the last piece's upload starts only when its copy is
/// done, so a 4 MB last piece (4K mono8) left ~0.08 ms of upload after the copy
/// (docs/performance.md, change 30).
pub const MAX_PIECE: usize = 1 << 20;
/// Most pieces per frame (a bound; a 4K bgr8 frame, 24 MB, goes in 25).
pub const MAX_PIECES: usize = 32;
/// The unit of work of the copy: the threads claim the frame's stripes in order, so that the
/// pieces come in one after the other, the first one after a few microseconds, and its
/// upload starts while the next ones are copied. (With one piece per thread they all came
/// in at about the same time, and the whole upload waited for the copy: docs/performance.md,
/// change 26.)
pub const STRIPE: usize = 32 << 10;

/// The pieces of [`copy_in_pieces`] for `n` bytes: bounds `b[0] = 0 < b[1] < ... < b[count]
/// = n` and `count`.
pub fn piece_bounds(n: usize) -> ([usize; MAX_PIECES + 1], usize) {
    let mut b = [0; MAX_PIECES + 1];
    if n == 0 {
        return (b, 0);
    }
    if n <= COPY_CHUNK {
        b[1] = n;
        return (b, 1);
    }
    let (mut k, mut size) = (0, FIRST_PIECE);
    while b[k] < n {
        let rest = n - b[k];
        let last = rest <= 2 * size || k + 1 == MAX_PIECES;
        b[k + 1] = b[k] + if last { rest } else { size };
        k += 1;
        size = (size * 2).min(MAX_PIECE);
    }
    (b, k)
}

/// Copies `src` into `dst` (same length) in the pieces of [`piece_bounds`], shared by this
/// thread and `helpers`, and calls `on_piece(offset, bytes)` on this thread for each piece,
/// in order, as soon as it is in. This thread copies too whenever it has nothing to hand
/// over: the copy finishes even when every helper is busy; a frame of one piece (at most
/// [`COPY_CHUNK`] bytes) wakes no helper at all. No allocation.
pub fn copy_in_pieces(
    src: &[u8],
    dst: &mut [u8],
    helpers: Helpers,
    on_piece: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    assert_eq!(src.len(), dst.len(), "copy_in_pieces: lengths differ");
    let copy = |off: usize, part: &mut [u8]| copy_streaming_into(part, &src[off..off + part.len()]);
    fill_in_pieces(dst, helpers, &copy, on_piece)
}

/// [`copy_in_pieces`] with the bytes made by `fill(offset, part)`, which writes `dst[offset..
/// offset + part.len()]` (given as `part`; a stripe at a time, on any of the threads) and
/// leaves them in memory, not dirty in its core's cache (streaming stores and a fence), for
/// the upload that `on_piece` queues.
pub fn fill_in_pieces(
    dst: &mut [u8],
    helpers: Helpers,
    fill: &(dyn Fn(usize, &mut [u8]) + Sync),
    mut on_piece: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    let n = dst.len();
    let (bounds, count) = piece_bounds(n);
    // A frame of one piece is one item.
    let stripe = if count > 1 { STRIPE } else { n.max(1) };
    let pieces = Pieces {
        n,
        fill,
        dst: dst.as_mut_ptr(),
        bounds,
        count,
        stripe,
        stripes_left: std::array::from_fn(|k| {
            let len = if k < count {
                bounds[k + 1] - bounds[k]
            } else {
                0
            };
            AtomicUsize::new(len.div_ceil(stripe))
        }),
    };
    let copy = |i: usize| pieces.copy(i);
    let job = Job::new(n.div_ceil(stripe), &copy);
    share(&job, helpers, || pieces.hand_over(&job, &mut on_piece))
}

/// The pieces of one frame's copy (or conversion) into pinned staging.
struct Pieces<'a> {
    /// The bytes to fill (the staging's part that the frame takes).
    n: usize,
    /// Writes a stripe ([`fill_in_pieces`]).
    fill: &'a (dyn Fn(usize, &mut [u8]) + Sync),
    /// The staging buffer (`n` bytes).
    dst: *mut u8,
    /// [`piece_bounds`]: piece k is `bounds[k]..bounds[k + 1]`, k < count.
    bounds: [usize; MAX_PIECES + 1],
    count: usize,
    /// Bytes per item: [`STRIPE`] (every bound but the last is a multiple of it), or the
    /// whole frame when it is one piece.
    stripe: usize,
    /// Per piece, the stripes not copied yet.
    stripes_left: [AtomicUsize; MAX_PIECES],
}

// SAFETY: `dst` points at `n` bytes that `fill_in_pieces` holds by `&mut` until every
// helper has let go of the job (`share` returns); the stripes are disjoint and each is
// written by the one thread that claimed it (`Job`); a piece is only read once the count of
// its stripes left has dropped to 0 (AcqRel decrements, Acquire load).
unsafe impl Sync for Pieces<'_> {}

impl Pieces<'_> {
    /// Fills stripe `i` (claimed by this thread) and counts it in its piece.
    fn copy(&self, i: usize) {
        let off = i * self.stripe;
        let len = self.stripe.min(self.n - off);
        let k = (0..self.count)
            .find(|&k| off < self.bounds[k + 1])
            .expect("a stripe inside the frame");
        // SAFETY: see `impl Sync for Pieces`: stripe i is this thread's alone. Raw pointers
        // because the calling thread uploads finished pieces while others are still being
        // written (measured benefit: docs/performance.md, change 8: 0.229 -> 0.179 ms at
        // 1080p after an idle gap).
        let part = unsafe { std::slice::from_raw_parts_mut(self.dst.add(off), len) };
        (self.fill)(off, part);
        self.stripes_left[k].fetch_sub(1, Ordering::AcqRel);
    }

    /// Piece k's bytes in the staging buffer once they are all there.
    fn finished(&self, k: usize) -> Option<&[u8]> {
        if self.stripes_left[k].load(Ordering::Acquire) != 0 {
            return None;
        }
        let (off, end) = (self.bounds[k], self.bounds[k + 1]);
        // SAFETY: piece k is complete (Acquire above) and nobody writes it again.
        Some(unsafe { std::slice::from_raw_parts(self.dst.add(off), end - off) })
    }

    /// Hands the pieces over in order as they come in, copying whenever none is ready.
    fn hand_over(
        &self,
        job: &Job,
        on_piece: &mut impl FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let (mut handed, mut waits) = (0, 0u32);
        while handed < self.count {
            if let Some(bytes) = self.finished(handed) {
                on_piece(self.bounds[handed], bytes)?;
                handed += 1;
            } else if !job.run_one() {
                // A piece with a stripe whose copy panicked never comes in.
                job.panicked()?;
                waits = waits.wrapping_add(1);
                pause(waits);
            }
        }
        Ok(())
    }
}

/// `dst.copy_from_slice(src)` by `copy_streaming`, on this thread.
pub fn copy_streaming_into(dst: &mut [u8], src: &[u8]) {
    assert_eq!(src.len(), dst.len(), "copy_streaming_into: lengths differ");
    // SAFETY: `dst` is a distinct `&mut` slice of `src.len()` bytes.
    unsafe { copy_streaming(dst.as_mut_ptr(), src) }
}

/// Copies `src` to `dst` with non-temporal (streaming) stores on x86-64, then a store
/// fence, so that the bytes are in memory, not dirty in this core's cache, when the caller's
/// flag says they are there: the GPU's DMA then reads them at full speed. After plain
/// stores the upload of a 1080p frame took 0.09-0.11 ms instead of 0.047 (the DMA waits for
/// the cache lines; docs/performance.md, change 23).
///
/// # Safety
/// `dst` is valid for `src.len()` bytes and does not overlap `src`.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_streaming(dst: *mut u8, src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let n = src.len();
    let head = dst.align_offset(16).min(n);
    let end = head + (n - head) / 64 * 64;
    // SAFETY (all below): in bounds of `src` and `dst` by the arithmetic above; the
    // streaming stores go to 16-byte aligned addresses (`head`); SSE2 is part of x86-64.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
        let mut i = head;
        while i < end {
            let s = src.as_ptr().add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
            let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
            i += 64;
        }
        std::ptr::copy_nonoverlapping(src.as_ptr().add(end), dst.add(end), n - end);
        _mm_sfence();
    }
}

/// [`copy_streaming`] elsewhere: a plain copy (on a Jetson, `cuda.zero_copy` is the path).
///
/// # Safety
/// `dst` is valid for `src.len()` bytes and does not overlap `src`.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_streaming(dst: *mut u8, src: &[u8]) {
    // SAFETY: the caller's.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::driver::crew::tests::{all_slots_free, CREW_TESTS};
    use crate::cuda::driver::crew::CREW_SLOTS;

    fn check(n: usize, helpers: Helpers) {
        let src: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
        let mut dst = vec![0u8; n];
        let mut seen = Vec::new();
        copy_in_pieces(&src, &mut dst, helpers, |off, bytes| {
            // Each piece is complete when handed over.
            assert!(
                bytes == &src[off..off + bytes.len()],
                "{n} bytes, piece at {off}"
            );
            seen.push((off, bytes.len()));
            Ok(())
        })
        .unwrap();
        assert!(dst == src, "{n} bytes, {helpers:?}");
        let (b, count) = piece_bounds(n);
        let want: Vec<(usize, usize)> = (0..count).map(|k| (b[k], b[k + 1] - b[k])).collect();
        assert_eq!(seen, want, "{n} bytes, {helpers:?}");
    }

    /// The pieces cover the frame in order; one piece up to COPY_CHUNK; above it the first is
    /// FIRST_PIECE, each next one twice the one before, the last at most twice the size it
    /// would have had (it takes the rest), every bound but the last a multiple of STRIPE;
    /// never more than MAX_PIECES.
    #[test]
    fn pieces_double_from_the_first() {
        let sizes = [
            1,
            COPY_CHUNK,
            COPY_CHUNK + 1,
            921_600,
            2_073_600,
            6_220_800,
            8_294_400,
        ];
        for n in sizes.into_iter().chain([24_883_200, 1 << 40]) {
            let (b, count) = piece_bounds(n);
            assert!((1..=MAX_PIECES).contains(&count), "{n}: {count} pieces");
            assert_eq!((b[0], b[count]), (0, n));
            if n <= COPY_CHUNK {
                assert_eq!(count, 1);
                continue;
            }
            let mut size = FIRST_PIECE;
            for k in 0..count {
                let len = b[k + 1] - b[k];
                assert_eq!(b[k] % STRIPE, 0, "{n}: bound {k}");
                if k + 1 < count {
                    assert_eq!(len, size, "{n}: piece {k}");
                } else if count < MAX_PIECES {
                    assert!(len > 0 && len <= 2 * size, "{n}: last piece {len}");
                }
                size = (size * 2).min(MAX_PIECE);
            }
        }
        // 1080p mono8: 4 uploads; 4K mono8: 10 of at most 2 MB; 4K bgr8 within the bound.
        assert_eq!(piece_bounds(2_073_600).1, 4);
        let (b, count) = piece_bounds(8_294_400);
        assert_eq!(count, 10);
        assert!(b[count] - b[count - 1] <= 2 * MAX_PIECE);
        assert!(piece_bounds(24_883_200).1 < MAX_PIECES);
    }

    const SIZES: [usize; 6] = [
        0,
        1,
        COPY_CHUNK,
        3 * COPY_CHUNK + 17,
        MAX_PIECES * COPY_CHUNK + 1,
        40 << 20,
    ];

    #[test]
    fn pieces_are_copied_exactly_and_handed_over_in_order() {
        for helpers in [Helpers::ThisThread, Helpers::Pool, Helpers::Crew] {
            for n in SIZES {
                check(n, helpers);
            }
        }
    }

    /// More copies at once than the crew has slots, some after a pause (the crew asleep):
    /// every copy complete, the extra ones on rayon's pool.
    #[test]
    fn crew_serves_concurrent_copies() {
        let _one = CREW_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::scope(|s| {
            for t in 0..CREW_SLOTS + 3 {
                s.spawn(move || {
                    for round in 0..20 {
                        if round % 5 == 4 {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
                        check(3 * COPY_CHUNK + 17 * (t + round), Helpers::Crew);
                    }
                });
            }
        });
    }

    /// An upload that fails mid-copy: the error comes back and the slot is free again.
    #[test]
    fn a_failing_hand_over_releases_the_slot() {
        let _one = CREW_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let src = vec![7u8; 8 * COPY_CHUNK];
        for _ in 0..2 * CREW_SLOTS {
            let mut dst = vec![0u8; src.len()];
            let r = copy_in_pieces(&src, &mut dst, Helpers::Crew, |off, _| {
                if off >= 2 * COPY_CHUNK {
                    Err(crate::Error::Config("upload failed".into()))
                } else {
                    Ok(())
                }
            });
            assert!(r.is_err());
        }
        assert!(all_slots_free());
    }
}
