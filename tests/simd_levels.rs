//! Every SIMD level gives the same bytes (`cpu::simd`, "Note: SIMD levels"): each preset's
//! whole CPU pipeline (keypoints, descriptors, edges, pyramid levels) on the real photos of
//! tests/data and on random images of odd sizes, and the feature tracker (mono and stereo)
//! on the real sequence, run at every level this CPU has, equal those of the baseline
//! level, which the exactness suites (`exact_*`) pin against OpenCV and ORB-SLAM3.
//!
//! The same for every thread count (`cpu.threads`, the tracker's `set_threads`).
//!
//! One test function: the level is a process-wide setting (`simd::set_cap`), and this
//! binary holds nothing else that could run beside it.

mod shared;

use std::path::Path;

use gpu_features::config::Config;
use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::simd::{self, Level};
use gpu_features::cpu::CpuPipeline;
use gpu_features::track::{TrackParams, Tracker};
use gpu_features::{GrayImage, ImageView};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One preset on one image: its name, keypoint bits, descriptors, edges, level pixels.
type Run = (String, Vec<[u32; 6]>, Vec<[u8; 32]>, Vec<u8>, Vec<Vec<u8>>);

/// Everything the pipeline and the tracker produced, as comparable values.
#[derive(PartialEq, Debug)]
struct Outputs {
    pipeline: Vec<Run>,
    /// Per frame: (id, x bits, y bits, age) of every track, left then right.
    tracks: Vec<Vec<(u64, u32, u32, u32)>>,
}

fn random_image(w: usize, h: usize, seed: u64) -> GrayImage {
    // Smooth blobs plus noise, so that FAST, Harris and Canny all find something.
    let mut s = seed | 1;
    let data = (0..w * h)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let (x, y) = ((i % w) as f32, (i / w) as f32);
            let base = 128.0 + 90.0 * ((x * 0.11).sin() * (y * 0.07).cos());
            (base + (s >> 60) as f32 * 4.0).clamp(0.0, 255.0) as u8
        })
        .collect();
    GrayImage::from_vec(w, h, data).unwrap()
}

fn images() -> Vec<(String, GrayImage)> {
    let mut out: Vec<(String, GrayImage)> = ["graf1.png", "camera.png", "coffee_odd.png"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                load_gray(&root().join("tests/data").join(n)).unwrap(),
            )
        })
        .collect();
    for (w, h, seed) in [(97, 61, 3), (333, 101, 5), (1, 9, 7), (40, 1, 9)] {
        out.push((format!("random {w}x{h}"), random_image(w, h, seed)));
    }
    out
}

fn run_all(threads: u32) -> Outputs {
    let presets = [
        "default",
        "opencv_fast",
        "opencv_canny",
        "opencv_canny_l1",
        "opencv_orb",
        "orb_slam3",
    ];
    let mut pipeline = Vec::new();
    for p in presets {
        let mut cfg = Config::from_file(&root().join("config").join(format!("{p}.yaml"))).unwrap();
        if p == "orb_slam3" {
            cfg.describe.fma = true; // both rotations
        }
        cfg.cpu.threads = threads;
        let mut cpu = CpuPipeline::new();
        for (name, img) in images() {
            let view = ImageView::mono8(&img.data, img.width, img.height).unwrap();
            let f = cpu.process(&cfg, &view);
            let kps = f.keypoints.iter().map(shared::kp_bits).collect();
            let edges = f.edges.map(|e| e.data).unwrap_or_default();
            let levels = cpu.above().iter().map(|l| l.data.clone()).collect();
            pipeline.push((format!("{p} {name}"), kps, f.descriptors, edges, levels));
        }
    }
    let mut tracks = Vec::new();
    let seq: Vec<GrayImage> = (0..8)
        .map(|i| load_gray(&root().join(format!("tests/data/seq/cockatoo_0{i}.png"))).unwrap())
        .collect();
    let key = |t: &gpu_features::track::Track| (t.id, t.x.to_bits(), t.y.to_bits(), t.age);
    let mut mono = Tracker::new(TrackParams::default());
    mono.set_threads(threads as usize);
    for (k, img) in seq.iter().enumerate() {
        tracks.push(
            mono.track(img, k as f64 / 30.0, None)
                .iter()
                .map(key)
                .collect(),
        );
    }
    let mut stereo = Tracker::new(TrackParams::default());
    stereo.set_threads(threads as usize);
    for (k, img) in seq.iter().enumerate() {
        let (l, r) = shared::stereo_pair(img);
        stereo
            .track_stereo(&l, &r, k as f64 / 30.0, (None, None))
            .unwrap();
        let mut v: Vec<_> = stereo.tracks().iter().map(key).collect();
        v.extend(stereo.right_tracks().iter().map(key));
        tracks.push(v);
    }
    Outputs { pipeline, tracks }
}

#[test]
fn every_simd_level_and_thread_count_gives_the_baseline_bytes() {
    let levels = simd::available();
    eprintln!("levels on this CPU: {levels:?}");
    simd::set_cap(Level::Baseline);
    assert_eq!(simd::level(), Level::Baseline);
    let want = run_all(1);
    let kps: usize = want.pipeline.iter().map(|p| p.1.len()).sum();
    let edges: usize = want
        .pipeline
        .iter()
        .map(|p| p.3.iter().filter(|&&e| e != 0).count())
        .sum();
    let tracked: usize = want.tracks.iter().map(Vec::len).sum();
    assert!(
        kps > 10_000 && edges > 10_000 && tracked > 1_000,
        "{kps} {edges} {tracked}"
    );
    for &l in &levels[1..] {
        simd::set_cap(l);
        assert_eq!(simd::level(), l);
        let got = run_all(1);
        for (g, w) in got.pipeline.iter().zip(&want.pipeline) {
            assert!(g == w, "{:?}: {} differs from baseline", l, g.0);
        }
        assert!(
            got.tracks == want.tracks,
            "{l:?}: tracks differ from baseline"
        );
    }
    // Threads (`cpu.threads`): the same bytes for any count, at the best level.
    simd::set_cap(Level::Avx2);
    for threads in [2, 3, 8] {
        let got = run_all(threads);
        for (g, w) in got.pipeline.iter().zip(&want.pipeline) {
            assert!(g == w, "{threads} threads: {} differs", g.0);
        }
        assert!(
            got.tracks == want.tracks,
            "{threads} threads: tracks differ"
        );
    }
}
