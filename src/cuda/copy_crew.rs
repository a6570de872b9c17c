//! The frame's copy into pinned staging in pieces, shared by the calling thread and helpers,
//! each piece handed back to the caller (for its upload) as soon as it is in.
//!
//! The helpers are the copy crew: a few threads of our own, asleep on one futex between
//! copies, so that a frame wakes them all with one call (rayon's pool, kept for comparison,
//! wakes its threads one after the other). The bytes are written with streaming stores
//! ([`copy_streaming`]): the upload then reads them from memory, not from dirty cache lines.
//! Measured on the H100 machine (docs/performance.md, change 23): a 1080p mono8 frame's copy
//! and upload 0.17-0.18 ms on rayon's pool with plain stores, 0.09 ms now.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::error::Result;

/// Smallest piece of a parallel copy: large enough to amortise a hand-over and an upload
/// call, small enough to spread a 1080p mono8 frame (2 MB) over 8 threads.
pub const COPY_CHUNK: usize = 256 << 10;
/// Most pieces per frame (a 4K bgr8 frame, 24 MB, goes in 16 pieces of 1.5 MB).
pub const MAX_PIECES: usize = 16;
/// Most copy crew threads (8 threads copied 2 MB fastest on the 16-core H100 machine).
const CREW_MAX: usize = 8;
/// Most copies the crew helps at once (several pipelines); a copy that finds every slot
/// taken gets rayon's pool instead.
const CREW_SLOTS: usize = 8;

/// Piece size of [`copy_in_pieces`] for `n` bytes.
pub fn piece_bytes(n: usize) -> usize {
    COPY_CHUNK.max(n.div_ceil(MAX_PIECES))
}

/// Who helps the calling thread copy the pieces of [`copy_in_pieces`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyCrew {
    /// Nobody: the calling thread copies piece after piece.
    ThisThread,
    /// Rayon's global pool.
    Pool,
    /// The copy crew (the pipeline's choice).
    Crew,
}

/// Copies `src` into `dst` (same length) in [`piece_bytes`] pieces shared by this thread and
/// `crew`, and calls `on_piece(offset, bytes)` on this thread for each piece, in order, as
/// soon as it is in. This thread copies too whenever it has nothing to hand over: the copy
/// finishes even when every helper is busy or the caller is the pool's only thread. No
/// allocation.
pub fn copy_in_pieces(
    src: &[u8],
    dst: &mut [u8],
    crew: CopyCrew,
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
    if crew == CopyCrew::ThisThread || pieces.count < 2 {
        return pieces.hand_over(&mut on_piece);
    }
    if crew == CopyCrew::Crew {
        if let Some(_posted) = Crew::global().and_then(|c| c.post(&pieces)) {
            // `_posted` drops first: no helper touches `pieces` after it.
            return pieces.hand_over(&mut on_piece);
        }
    }
    let helpers = (pieces.count - 1).min(rayon::current_num_threads());
    rayon::in_place_scope(|s| {
        for _ in 0..helpers {
            s.spawn(|_| while pieces.copy_one() {});
        }
        pieces.hand_over(&mut on_piece)
    })
}

/// The staging buffer's address, shared by the threads of one copy ([`Pieces`]).
#[derive(Clone, Copy)]
struct SendPtr(*mut u8);

/// The pieces of one frame's copy into pinned staging, claimed by whichever thread comes.
struct Pieces<'a> {
    src: &'a [u8],
    dst: SendPtr,
    piece: usize,
    count: usize,
    next: AtomicUsize,
    done: [AtomicBool; MAX_PIECES],
}

// SAFETY: `dst` points at `src.len()` bytes that `copy_in_pieces` holds by `&mut` until
// every helper has let go of the `Pieces` (the rayon scope's end, or `Posted`'s drop); the
// pieces are disjoint and each is written by the one thread that claimed it (`next`), then
// only read after its Release flag.
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
        unsafe { copy_streaming(self.dst.0.add(off), part) };
        self.done[k].store(true, Ordering::Release);
        true
    }

    /// Whether some piece is not claimed yet.
    fn unclaimed(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.count
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

    /// Hands the pieces over in order as they come in, copying whenever none is ready.
    fn hand_over(&self, on_piece: &mut impl FnMut(usize, &[u8]) -> Result<()>) -> Result<()> {
        let (mut handed, mut waits) = (0, 0u32);
        while handed < self.count {
            if let Some(bytes) = self.finished(handed) {
                on_piece(handed * self.piece, bytes)?;
                handed += 1;
            } else if !self.copy_one() {
                waits = waits.wrapping_add(1);
                pause(waits);
            }
        }
        Ok(())
    }
}

/// `dst.copy_from_slice(src)` by [`copy_streaming`], on this thread.
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

/// A short wait in a loop that waits for another thread: a spin, and every 128th time a
/// yield, in case that thread is not running (more threads than cores).
fn pause(waits: u32) {
    if waits % 128 == 0 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// One copy posted to the crew. `users` counts the crew threads looking at `job`; a thread
/// counts itself before it reads `job`, and the poster clears `job` before it waits for
/// `users` to drop to zero, so no thread can reach a copy whose caller has returned.
struct Slot {
    taken: AtomicBool,
    users: AtomicUsize,
    job: AtomicPtr<Pieces<'static>>,
}

impl Slot {
    /// Runs `f` on the posted copy, if any, while counted in `users`.
    fn with_job<T>(&self, f: impl FnOnce(&Pieces) -> T) -> Option<T> {
        self.users.fetch_add(1, Ordering::SeqCst);
        let p = self.job.load(Ordering::SeqCst);
        // SAFETY: a non-null `job` stays alive while `users` counts this thread (see Slot).
        let out = (!p.is_null()).then(|| f(unsafe { &*p }));
        self.users.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

/// The copy crew: threads that help with the copies posted in `slots`.
struct Crew {
    slots: [Slot; CREW_SLOTS],
    /// Crew threads asleep or about to sleep.
    sleepers: AtomicUsize,
    /// The futex the crew sleeps on: bumped by each post that finds sleepers, so one call
    /// wakes them all (no mutex for the woken threads to queue on).
    wake: AtomicU32,
}

/// A copy in one of the crew's slots; taken back (after every helper let go) on drop.
struct Posted {
    slot: &'static Slot,
}

impl Drop for Posted {
    fn drop(&mut self) {
        self.slot.job.store(std::ptr::null_mut(), Ordering::SeqCst);
        let mut waits = 0u32;
        while self.slot.users.load(Ordering::SeqCst) != 0 {
            waits = waits.wrapping_add(1);
            pause(waits);
        }
        self.slot.taken.store(false, Ordering::Release);
    }
}

impl Crew {
    /// The process's crew, started on first use: half the cores, at most [`CREW_MAX`]
    /// threads. None if no thread could be started.
    fn global() -> Option<&'static Crew> {
        static CREW: OnceLock<Option<&'static Crew>> = OnceLock::new();
        *CREW.get_or_init(|| {
            let crew: &'static Crew = Box::leak(Box::new(Crew {
                slots: std::array::from_fn(|_| Slot {
                    taken: AtomicBool::new(false),
                    users: AtomicUsize::new(0),
                    job: AtomicPtr::new(std::ptr::null_mut()),
                }),
                sleepers: AtomicUsize::new(0),
                wake: AtomicU32::new(0),
            }));
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let started = (0..(cores / 2).clamp(1, CREW_MAX))
                .filter(|k| {
                    std::thread::Builder::new()
                        .name(format!("gf-copy-{k}"))
                        .spawn(move || crew.serve())
                        .is_ok()
                })
                .count();
            (started > 0).then_some(crew)
        })
    }

    /// Posts `pieces` in a free slot and wakes the sleeping crew; None when all are taken.
    fn post(&'static self, pieces: &Pieces) -> Option<Posted> {
        let slot = self.slots.iter().find(|s| {
            s.taken
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })?;
        // The lifetime is erased here and restored by `Posted`'s drop (see Slot).
        let job = pieces as *const Pieces as *mut Pieces<'static>;
        slot.job.store(job, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.wake.fetch_add(1, Ordering::SeqCst);
            atomic_wait::wake_all(&self.wake);
        }
        Some(Posted { slot })
    }

    /// A crew thread: copies pieces of the posted copies; sleeps when there are none.
    /// (Staying awake for a while after a copy did not pay: change 23.)
    fn serve(&'static self) {
        loop {
            let mut worked = false;
            for slot in &self.slots {
                worked |= slot
                    .with_job(|p| {
                        let mut any = false;
                        while p.copy_one() {
                            any = true;
                        }
                        any
                    })
                    .unwrap_or(false);
            }
            if worked {
                continue;
            }
            let seen = self.wake.load(Ordering::SeqCst);
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            // A copy posted before the count above is seen here; one posted after it sees
            // the count and bumps `wake`, so the wait below returns at once.
            let pending = self
                .slots
                .iter()
                .any(|s| s.with_job(|p| p.unclaimed()).unwrap_or(false));
            if !pending {
                atomic_wait::wait(&self.wake, seen);
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(n: usize, crew: CopyCrew) {
        let src: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
        let mut dst = vec![0u8; n];
        let mut seen = Vec::new();
        copy_in_pieces(&src, &mut dst, crew, |off, bytes| {
            // Each piece is complete when handed over.
            assert!(
                bytes == &src[off..off + bytes.len()],
                "{n} bytes, piece at {off}"
            );
            seen.push((off, bytes.len()));
            Ok(())
        })
        .unwrap();
        assert!(dst == src, "{n} bytes, {crew:?}");
        let piece = piece_bytes(n);
        let want: Vec<(usize, usize)> = (0..n.div_ceil(piece))
            .map(|k| (k * piece, piece.min(n - k * piece)))
            .collect();
        assert_eq!(seen, want, "{n} bytes, {crew:?}");
        assert!(seen.len() <= MAX_PIECES);
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
        for crew in [CopyCrew::ThisThread, CopyCrew::Pool, CopyCrew::Crew] {
            for n in SIZES {
                check(n, crew);
            }
        }
    }

    /// The crew tests share the process's crew.
    static CREW_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
                        check(3 * COPY_CHUNK + 17 * (t + round), CopyCrew::Crew);
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
            let r = copy_in_pieces(&src, &mut dst, CopyCrew::Crew, |off, _| {
                if off >= 2 * COPY_CHUNK {
                    Err(crate::Error::Config("upload failed".into()))
                } else {
                    Ok(())
                }
            });
            assert!(r.is_err());
        }
        let crew = Crew::global().expect("crew started");
        assert!(crew.slots.iter().all(|s| !s.taken.load(Ordering::SeqCst)));
    }
}
