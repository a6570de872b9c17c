//! The memory floor under a colour frame's decode: how long `--threads` threads take to read
//! a frame of `--bytes` once, right after another thread has written it (the middleware's
//! take), one frame every 1/`--rate` s as a camera sends them (`--rate 0`: back to back).
//! The pipeline's decode reads a bgr8 frame once (the crew converts it to gray during its
//! copy into pinned memory), so its excess over mono8's is at least the difference between
//! reading 6 MB and reading 2 MB here (docs/performance.md, "For the node").
//!
//! ```sh
//! cargo run --release --example read_floor -- --bytes 6220800,2073600 --threads 9,16 --rate 60
//! ```
//!
//! Per frame: the writer copies a source of the frame's size into the frame (as the take
//! copies the message out of the shared-memory segment), then releases the readers waiting
//! on a barrier; each reads its contiguous share (8 bytes at a time, summed so that the
//! reads stay) and meets the others on a second barrier. The time from the writer's release
//! to the last reader's arrival, p50 / p90 in ms over `--frames` frames, is printed per size
//! and thread count. The barrier's own wake-up is inside it, as the crew's is in the decode.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use gpu_features::report::pct;

#[path = "common/mod.rs"]
mod common;
use common::named_arg;

fn list(s: &str, name: &str) -> Vec<usize> {
    s.split(',')
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: not a number: {v:?}"))
        })
        .collect()
}

/// Reads `bytes` 8 at a time and returns their wrapping sum.
fn read_all(bytes: &[u8]) -> u64 {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .fold(0u64, u64::wrapping_add)
}

/// Milliseconds of each frame's read by `threads` threads (this one the writer).
fn run(bytes: usize, threads: usize, rate: f64, frames: usize) -> Vec<f64> {
    let source: Vec<u8> = (0..bytes).map(|i| (i * 131 % 251) as u8).collect();
    let mut frame = vec![0u8; bytes];
    let share = bytes.div_ceil(threads).next_multiple_of(64);
    let start = Barrier::new(threads + 1);
    let end = Barrier::new(threads + 1);
    // The frame never moves: the writer and the readers all use this one address.
    let at = frame.as_mut_ptr() as usize;
    let stop = AtomicBool::new(false);
    let mut ms = Vec::with_capacity(frames);
    std::thread::scope(|s| {
        for k in 0..threads {
            let (start, end, stop) = (&start, &end, &stop);
            s.spawn(move || loop {
                start.wait();
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let lo = (k * share).min(bytes);
                let hi = ((k + 1) * share).min(bytes);
                // SAFETY: the writer does not touch the frame between the two barriers,
                // and [lo, hi) lies inside it.
                let part =
                    unsafe { std::slice::from_raw_parts((at as *const u8).add(lo), hi - lo) };
                black_box(read_all(part));
                end.wait();
            });
        }
        let period = (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate));
        let mut next = Instant::now();
        for round in 0..frames as u64 + 5 {
            if let Some(p) = period {
                next += p;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            // SAFETY: the readers are between frames (waiting on `start`), and the frame
            // holds `bytes` bytes, as the source does.
            unsafe { std::ptr::copy_nonoverlapping(source.as_ptr(), at as *mut u8, bytes) };
            let t = Instant::now();
            start.wait();
            end.wait();
            if round >= 5 {
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        stop.store(true, Ordering::Release);
        start.wait();
    });
    ms
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes = list(&named_arg(&args, "--bytes", "6220800,2073600"), "--bytes");
    let threads = list(&named_arg(&args, "--threads", "9"), "--threads");
    let rate: f64 = named_arg(&args, "--rate", "60")
        .parse()
        .expect("--rate: a number");
    let frames: usize = named_arg(&args, "--frames", "300")
        .parse()
        .expect("--frames: a number");
    println!("| bytes | threads | rate | read p50 (p90) ms |");
    println!("|---:|---:|---:|---:|");
    for &n in &threads {
        for &b in &sizes {
            let mut ms = run(b, n.max(1), rate, frames);
            ms.sort_by(f64::total_cmp);
            println!(
                "| {b} | {n} | {} | {:.3} ({:.3}) |",
                if rate > 0.0 {
                    format!("{rate} Hz")
                } else {
                    "back to back".into()
                },
                pct(&ms, 50.0),
                pct(&ms, 90.0)
            );
        }
    }
}
