//! The pipelines allocate nothing on the host per frame once their buffers have grown: the
//! CPU one on one thread and on its pool, the CUDA one (its host side: selection, keypoints,
//! the crew's copies). This binary's allocator counts every thread's allocations (the
//! pool's workers and the crew do part of the work), so it holds one test that runs both
//! checks in turn: no other test, nor the harness reporting one, allocates beside them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpu_features::config::Config;
use gpu_features::{BackendChoice, BackendKind, Features, GrayImage, ImageView, Pipeline};

mod shared;

struct CountingAlloc;

static COUNT: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only adds to an atomic counter.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        COUNT.fetch_add(1, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        COUNT.fetch_add(1, Ordering::Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        COUNT.fetch_add(1, Ordering::Relaxed);
        System.realloc(p, l, new)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn preset(name: &str) -> Config {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Config::from_file(&root.join(format!("config/{name}.yaml"))).unwrap()
}

/// Allocations per frame of `passes` passes over `frames` after `warm` passes, by a fresh
/// pipeline with `preset` at `threads` threads.
fn per_frame(
    preset: &str,
    threads: u32,
    frames: &[GrayImage],
    warm: usize,
    passes: usize,
) -> Vec<usize> {
    let mut cfg = self::preset(preset);
    cfg.cpu.threads = threads;
    let mut cpu = gpu_features::cpu::CpuPipeline::new();
    let mut out = Features::default();
    let mut counts = Vec::new();
    for pass in 0..warm + passes {
        for img in frames {
            let view = ImageView::mono8(&img.data, img.width, img.height).unwrap();
            let before = COUNT.load(Ordering::Relaxed);
            cpu.process_into(&cfg, &view, &mut out);
            let n = COUNT.load(Ordering::Relaxed) - before;
            assert!(!out.keypoints.is_empty() || out.edges.is_some(), "{preset}");
            if pass >= warm {
                counts.push(n);
            }
        }
    }
    counts
}

#[test]
fn the_pipelines_allocate_nothing_per_frame_once_warm() {
    let frames = shared::sequence();
    the_cpu_pipeline_allocates_nothing_per_frame_once_warm(&frames);
    the_cuda_pipeline_allocates_nothing_on_the_host_per_frame_once_warm(&frames);
}

fn the_cpu_pipeline_allocates_nothing_per_frame_once_warm(frames: &[GrayImage]) {
    // One thread (a small robot's CPU, or the tracker's setting beside a GPU): after two
    // passes over the sequence (ORB-SLAM3's quadtree keeps its buffers per thread, shared
    // by the levels, and reaches its largest within them) a frame reuses every buffer of
    // every stage, for the FAST-based presets (ORB-SLAM3's per-cell FAST included) and
    // Canny.
    for preset in [
        "default",
        "opencv_orb",
        "opencv_fast",
        "opencv_canny",
        "orb_slam3",
    ] {
        let counts = per_frame(preset, 1, frames, 2, 2);
        assert!(
            counts.iter().all(|&n| n == 0),
            "{preset}, one thread: {counts:?}"
        );
    }
    // Two threads: the stages' buffers likewise; what is left is the pool's job queue
    // (rayon's injector takes a new block of 63 slots when one fills; a frame sends it two
    // jobs), so at most one allocation per 31 frames, plus one. ORB-SLAM3's preset is left
    // out: its quadtree's buffers grow on whichever worker gets the largest level first.
    for preset in ["default", "opencv_orb", "opencv_fast", "opencv_canny"] {
        let counts = per_frame(preset, 2, frames, 2, 4);
        let total: usize = counts.iter().sum();
        assert!(
            total <= counts.len() / 31 + 1,
            "{preset}, two threads: {counts:?}"
        );
    }
}

/// The CUDA pipeline's host side, the calling thread and the crew: after two passes over
/// the sequence, nothing, under the GPU selection (default, opencv_orb), the host
/// selection with ORB-SLAM3's per-cell FAST and quadtree (orb_slam3), FAST alone and Canny
/// alone (whose edge map is unpacked into the reused output).
fn the_cuda_pipeline_allocates_nothing_on_the_host_per_frame_once_warm(frames: &[GrayImage]) {
    let test = "the_cuda_pipeline_allocates_nothing_on_the_host_per_frame_once_warm";
    for name in [
        "default",
        "opencv_orb",
        "orb_slam3",
        "opencv_fast",
        "opencv_canny",
    ] {
        let mut p = match Pipeline::new(preset(name), BackendChoice::Cuda) {
            Ok(p) => p,
            Err(e) => return shared::skip_without_gpu(test, &e),
        };
        let mut out = Features::default();
        let mut counts = Vec::new();
        for pass in 0..4 {
            for img in frames {
                let view = ImageView::mono8(&img.data, img.width, img.height).unwrap();
                let before = COUNT.load(Ordering::Relaxed);
                p.process_into(&view, &mut out).unwrap();
                let n = COUNT.load(Ordering::Relaxed) - before;
                assert!(!out.keypoints.is_empty() || out.edges.is_some(), "{name}");
                if pass >= 2 {
                    counts.push(n);
                }
            }
        }
        assert_eq!(p.backend(), BackendKind::Cuda, "{:?}", p.gpu_failure());
        assert!(counts.iter().all(|&n| n == 0), "{name}: {counts:?}");
        eprintln!("{name}: {} frames counted, no allocation", counts.len());
    }
}
