//! The test binary's allocator: the system's, recording per thread the largest single
//! allocation (to catch corrupt length fields that make a decoder reserve wildly) and the
//! number of allocations (to check that a frame allocates nothing). Included with
//! `#[path]` by the tests that need it (it installs the `#[global_allocator]`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct CountingAlloc;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = PEAK.try_with(|p| {
        if size > p.get() {
            p.set(size)
        }
    });
    let _ = COUNT.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: forwards to the system allocator; only records sizes and a count in const
// thread-locals.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new);
        System.realloc(p, l, new)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Runs `f` and returns its result with the largest single allocation it made.
#[allow(dead_code)]
pub fn peak_alloc<T>(f: impl FnOnce() -> T) -> (T, usize) {
    PEAK.with(|p| p.set(0));
    let r = f();
    (r, PEAK.with(|p| p.get()))
}

/// Runs `f` and returns its result with the number of allocations (and reallocations) it
/// made on this thread.
pub fn count_allocs<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = COUNT.with(|c| c.get());
    let r = f();
    (r, COUNT.with(|c| c.get()) - before)
}
