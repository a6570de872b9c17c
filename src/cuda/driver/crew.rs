//! The crew: a few threads of our own that help the calling thread with the host work of a
//! frame, split into numbered items (the pieces of the frame's copy into pinned memory,
//! `staging`; the bands of the edge map's unpack, `canny`).
//!
//! The crew sleeps on one futex between frames, so that one call wakes it all; rayon's
//! pool, kept for comparison ([`Helpers::Pool`]), wakes its threads one after the other and
//! parks the calling thread until the work is done. Measured on the H100 machine
//! (docs/performance.md, changes 23 and 24). Several pipelines post their work in one of
//! [`CREW_SLOTS`] slots; work that finds every slot taken goes to rayon's pool.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::error::Result;

/// Most crew threads of the automatic size (8 threads copied 2 MB fastest on the 16-core
/// H100 machine).
const CREW_MAX: usize = 8;
/// Most jobs the crew helps with at once (several pipelines).
pub const CREW_SLOTS: usize = 8;
/// The crew's size asked for (`cuda.crew_threads`; 0 = automatic), read when it starts.
static CREW_THREADS: AtomicUsize = AtomicUsize::new(0);
/// The first CUDA pipeline's GPU is integrated (Jetson): the automatic size and pre-wake
/// are the CPU-sparing ones ([`auto_threads`], [`prewake_us`]).
static INTEGRATED: AtomicBool = AtomicBool::new(false);
/// Most crew threads of the automatic size on an integrated GPU, whose cores the estimator
/// needs: on the H200 machine (16 cores, 1080p 30 Hz, docs/jetson.md) one or two threads
/// cost the node 0.9-1.2 ms of CPU a frame less than eight with the pre-wake spin, for
/// 0.05-0.3 ms more latency.
const CREW_MAX_INTEGRATED: usize = 2;
/// `cuda.prewake_us: -1` (auto) on a discrete GPU; an integrated one gets 0.
const PREWAKE_AUTO_US: u64 = 200;

/// Asks for `n` crew threads (0 = automatic, [`auto_threads`]) for a pipeline on an
/// `integrated` GPU or not. Takes effect only before the crew's first use (the first CUDA
/// pipeline's frame); later calls change nothing.
pub fn set_threads(n: usize, integrated: bool) {
    if CREW.get().is_none() {
        CREW_THREADS.store(n, Ordering::SeqCst);
        INTEGRATED.store(integrated, Ordering::SeqCst);
    }
}

/// The automatic crew size for `cores`: half of them, at most `CREW_MAX` (8); on an
/// integrated GPU a quarter, at most `CREW_MAX_INTEGRATED` (2), at least 1.
pub fn auto_threads(cores: usize, integrated: bool) -> usize {
    if integrated {
        (cores / 4).clamp(1, CREW_MAX_INTEGRATED)
    } else {
        (cores / 2).clamp(1, CREW_MAX)
    }
}

/// Who helps the calling thread with a [`Job`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Helpers {
    /// Nobody: the calling thread runs every item.
    ThisThread,
    /// Rayon's global pool.
    Pool,
    /// The crew (the pipeline's choice).
    Crew,
}

/// Items `0..count`, each run once by whichever thread claims it first. A panic inside an
/// item is caught here and only marks the job ([`Job::panicked`]): the item still counts as
/// done, so nobody waits forever for it, and the crew thread that ran it lives on.
pub struct Job<'a> {
    count: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    panicked: AtomicBool,
    run: &'a (dyn Fn(usize) + Sync),
}

impl<'a> Job<'a> {
    pub fn new(count: usize, run: &'a (dyn Fn(usize) + Sync)) -> Self {
        Job {
            count,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            run,
        }
    }

    /// Claims the next item and runs it; false when none was left.
    pub fn run_one(&self) -> bool {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        if k >= self.count {
            return false;
        }
        let item = std::panic::AssertUnwindSafe(|| (self.run)(k));
        if std::panic::catch_unwind(item).is_err() {
            self.panicked.store(true, Ordering::Release);
        }
        self.done.fetch_add(1, Ordering::Release);
        true
    }

    /// Whether every item has run (the items' writes are visible to this thread then).
    pub fn all_done(&self) -> bool {
        self.done.load(Ordering::Acquire) == self.count
    }

    /// An error if an item panicked: a CUDA-side error, so that the pipeline redoes the
    /// frame on the CPU.
    pub fn panicked(&self) -> Result<()> {
        if self.panicked.load(Ordering::Acquire) {
            return Err(crate::Error::Cuda(
                "a thread of the frame's host work panicked".into(),
            ));
        }
        Ok(())
    }

    fn unclaimed(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.count
    }
}

/// Runs `this_thread` while `helpers` run items of `job`; returns when `this_thread` does
/// and no helper touches `job` any more. `this_thread` is expected to claim items too, and
/// to wait for whatever it needs of them.
pub fn share<R>(job: &Job, helpers: Helpers, this_thread: impl FnOnce() -> R) -> R {
    if helpers == Helpers::ThisThread || job.count < 2 {
        return this_thread();
    }
    if helpers == Helpers::Crew {
        if let Some(posted) = Crew::global().and_then(|c| c.post(job)) {
            let out = this_thread();
            drop(posted); // waits until no crew thread looks at `job`
            return out;
        }
    }
    let spawned = (job.count - 1).min(rayon::current_num_threads());
    rayon::in_place_scope(|s| {
        for _ in 0..spawned {
            s.spawn(|_| while job.run_one() {});
        }
        this_thread()
    })
}

/// `f(0)`, ..., `f(count - 1)` on this thread and `helpers`; the first error, if any, once
/// all have run (a panic in `f`: [`Job::panicked`]).
pub fn for_each(
    count: usize,
    helpers: Helpers,
    f: impl Fn(usize) -> Result<()> + Sync,
) -> Result<()> {
    let failed = Mutex::new(None);
    let run = |k: usize| {
        if let Err(e) = f(k) {
            failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        }
    };
    let job = Job::new(count, &run);
    share(&job, helpers, || {
        let mut waits = 0u32;
        while !job.all_done() {
            if !job.run_one() {
                waits = waits.wrapping_add(1);
                pause(waits);
            }
        }
    });
    let panicked = job.panicked();
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => panicked,
    }
}

/// A short wait in a loop that waits for another thread: a spin, and every 128th time a
/// yield, in case that thread is not running (more threads than cores).
pub fn pause(waits: u32) {
    if waits % 128 == 0 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// One job posted to the crew. `users` counts the crew threads looking at `job`; a thread
/// counts itself before it reads `job`, and the poster clears `job` before it waits for
/// `users` to drop to zero, so no thread can reach a job whose caller has returned.
struct Slot {
    taken: AtomicBool,
    users: AtomicUsize,
    job: AtomicPtr<Job<'static>>,
}

impl Slot {
    /// Runs `f` on the posted job, if any, while counted in `users`.
    fn with_job<T>(&self, f: impl FnOnce(&Job) -> T) -> Option<T> {
        self.users.fetch_add(1, Ordering::SeqCst);
        let p = self.job.load(Ordering::SeqCst);
        // SAFETY: a non-null `job` stays alive while `users` counts this thread (see Slot).
        let out = (!p.is_null()).then(|| f(unsafe { &*p }));
        self.users.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

/// The crew: threads that run items of the jobs posted in `slots`.
struct Crew {
    slots: [Slot; CREW_SLOTS],
    /// Crew threads asleep or about to sleep.
    sleepers: AtomicUsize,
    /// The futex the crew sleeps on: bumped by each post that finds sleepers, so one call
    /// wakes them all (no mutex for the woken threads to queue on).
    wake: AtomicU32,
    /// Crew threads started.
    threads: AtomicUsize,
    /// Until when (ns on [`clock_ns`]'s clock) a crew thread without work spins instead of
    /// sleeping: set by [`prewake`].
    spin_until: AtomicU64,
}

/// Nanoseconds since the first call (the crew's clock for [`prewake`]).
fn clock_ns() -> u64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

/// Wakes the sleeping crew ahead of work that is about to come (a frame taken from the
/// middleware, not yet handed to its pipeline): until `spin` has passed, a crew thread
/// without work spins instead of going back to sleep, so the frame's copy does not wait
/// for the threads to wake. Does nothing when the crew has not started.
pub fn prewake(spin: std::time::Duration) {
    let Some(crew) = CREW.get().copied().flatten() else {
        return;
    };
    let until = clock_ns() + spin.as_nanos() as u64;
    crew.spin_until.fetch_max(until, Ordering::SeqCst);
    if crew.sleepers.load(Ordering::SeqCst) > 0 {
        crew.wake.fetch_add(1, Ordering::SeqCst);
        atomic_wait::wake_all(&crew.wake);
    }
}

/// [`prewake`] for `cuda.prewake_us` microseconds; 0 (the setting's "off") does nothing.
pub fn prewake_us(us: i32) {
    let us = match us {
        // auto: the spin costs CPU a Jetson's estimator needs (docs/jetson.md)
        ..0 if INTEGRATED.load(Ordering::SeqCst) => 0,
        ..0 => PREWAKE_AUTO_US,
        us => us as u64,
    };
    if us > 0 {
        prewake(std::time::Duration::from_micros(us));
    }
}

/// The process's crew once started ([`Crew::global`]).
static CREW: OnceLock<Option<&'static Crew>> = OnceLock::new();

/// A job in one of the crew's slots; taken back (after every helper let go) on drop.
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
    /// The process's crew, started on first use: [`set_threads`]' size, or half the cores,
    /// at most [`CREW_MAX`] threads. None if no thread could be started.
    fn global() -> Option<&'static Crew> {
        *CREW.get_or_init(|| {
            let crew: &'static Crew = Box::leak(Box::new(Crew {
                slots: std::array::from_fn(|_| Slot {
                    taken: AtomicBool::new(false),
                    users: AtomicUsize::new(0),
                    job: AtomicPtr::new(std::ptr::null_mut()),
                }),
                sleepers: AtomicUsize::new(0),
                wake: AtomicU32::new(0),
                threads: AtomicUsize::new(0),
                spin_until: AtomicU64::new(0),
            }));
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let size = match CREW_THREADS.load(Ordering::SeqCst) {
                0 => auto_threads(cores, INTEGRATED.load(Ordering::SeqCst)),
                n => n,
            };
            let started = (0..size)
                .filter(|k| {
                    let ok = std::thread::Builder::new()
                        .name(format!("gf-crew-{k}"))
                        .spawn(move || crew.serve())
                        .is_ok();
                    crew.threads.fetch_add(ok as usize, Ordering::SeqCst);
                    ok
                })
                .count();
            (started > 0).then_some(crew)
        })
    }

    /// Posts `job` in a free slot and wakes the sleeping crew; None when all are taken.
    fn post(&'static self, job: &Job) -> Option<Posted> {
        let slot = self.slots.iter().find(|s| {
            s.taken
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })?;
        // The lifetime is erased here and restored by `Posted`'s drop (see Slot).
        let job = job as *const Job as *mut Job<'static>;
        slot.job.store(job, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.wake.fetch_add(1, Ordering::SeqCst);
            atomic_wait::wake_all(&self.wake);
        }
        Some(Posted { slot })
    }

    /// Whether a posted job has items left to claim. An empty slot is passed over without
    /// counting in its `users` (its load is SeqCst, as `with_job`'s, so that a sleeper and
    /// a poster cannot both miss each other: see `serve`).
    fn any_unclaimed(&self) -> bool {
        self.slots.iter().any(|s| {
            !s.job.load(Ordering::SeqCst).is_null()
                && s.with_job(|job| job.unclaimed()).unwrap_or(false)
        })
    }

    /// A crew thread: runs items of the posted jobs; sleeps when there are none, unless
    /// [`prewake`] asked it to spin for one. (Staying awake for a while after every job did
    /// not pay: change 23; woken ahead of a frame's copy it does: change 68.)
    fn serve(&'static self) {
        loop {
            let mut worked = false;
            for slot in &self.slots {
                worked |= slot
                    .with_job(|job| {
                        let mut any = false;
                        while job.run_one() {
                            any = true;
                        }
                        any
                    })
                    .unwrap_or(false);
            }
            if worked {
                continue;
            }
            // Woken ahead of a job (`prewake`): spin for it until the deadline, until a slot
            // holds items left to claim.
            let mut found = false;
            while clock_ns() < self.spin_until.load(Ordering::Relaxed) {
                found = self.any_unclaimed();
                if found {
                    break;
                }
                std::hint::spin_loop();
            }
            if found {
                continue;
            }
            let seen = self.wake.load(Ordering::SeqCst);
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            // A job posted before the count above is seen here; one posted after it sees
            // the count and bumps `wake`, so the wait below returns at once.
            if !self.any_unclaimed() {
                atomic_wait::wait(&self.wake, seen);
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The crew tests share the process's crew.
    pub(crate) static CREW_TESTS: Mutex<()> = Mutex::new(());

    /// Whether no job is posted (none of the caller's, under [`CREW_TESTS`]).
    pub(crate) fn all_slots_free() -> bool {
        let crew = Crew::global().expect("crew started");
        crew.slots.iter().all(|s| !s.taken.load(Ordering::SeqCst))
    }

    /// Polls `f` every millisecond for up to `secs` seconds; whether it became true.
    fn within(secs: f64, f: impl Fn() -> bool) -> bool {
        let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
        while std::time::Instant::now() < end {
            if f() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        f()
    }

    /// `prewake` wakes the whole sleeping crew, which stays awake (spinning, none asleep)
    /// until the deadline, runs a job posted meanwhile, and goes back to sleep after it.
    #[test]
    fn prewake_keeps_the_crew_awake_until_its_deadline() {
        let _one = CREW_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let crew = Crew::global().expect("crew started");
        let n = crew.threads.load(Ordering::SeqCst);
        let asleep = || crew.sleepers.load(Ordering::SeqCst) == n;
        assert!(within(10.0, asleep), "the idle crew sleeps");
        prewake(std::time::Duration::from_secs(3));
        assert!(
            within(1.0, || crew.sleepers.load(Ordering::SeqCst) == 0),
            "every crew thread woke"
        );
        let hits: Vec<AtomicUsize> = (0..16).map(|_| AtomicUsize::new(0)).collect();
        for_each(16, Helpers::Crew, |k| {
            hits[k].fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        assert_eq!(
            crew.sleepers.load(Ordering::SeqCst),
            0,
            "still spinning before the deadline"
        );
        assert!(within(10.0, asleep), "asleep again after the deadline");
        assert!(all_slots_free());
    }

    /// Every item runs exactly once, with each kind of helpers, more jobs at once than the
    /// crew has slots, some after a pause (the crew asleep); errors and panics come back as
    /// errors, and the crew survives them.
    #[test]
    fn the_automatic_size_spares_an_integrated_gpus_cores() {
        // discrete: half the cores, 1..=8
        assert_eq!(
            [1, 2, 6, 12, 16, 64].map(|c| auto_threads(c, false)),
            [1, 1, 3, 6, 8, 8]
        );
        // integrated (Orin Nano 6 cores, AGX Orin 12): a quarter, 1..=2
        assert_eq!(
            [1, 4, 6, 8, 12, 16].map(|c| auto_threads(c, true)),
            [1, 1, 1, 2, 2, 2]
        );
    }

    #[test]
    fn for_each_runs_every_item_once() {
        let _one = CREW_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::scope(|s| {
            for t in 0..CREW_SLOTS + 3 {
                s.spawn(move || {
                    for round in 0..20usize {
                        if round % 5 == 4 {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
                        let helpers = [Helpers::Crew, Helpers::Pool, Helpers::ThisThread][t % 3];
                        let n = 1 + (t * 7 + round * 3) % 40;
                        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                        let r = for_each(n, helpers, |k| {
                            hits[k].fetch_add(1, Ordering::Relaxed);
                            match (k == n / 2, round % 4) {
                                (true, 1) => Err(crate::Error::Config(format!("item {k}"))),
                                (true, 3) => panic!("item {k} panics (on purpose)"),
                                _ => Ok(()),
                            }
                        });
                        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
                        assert_eq!(r.is_err(), round % 2 == 1, "{helpers:?} {n}");
                    }
                });
            }
        });
        assert!(all_slots_free());
    }
}
