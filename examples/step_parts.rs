//! Where the node's tracking step goes, on the GPU, for a moving camera and for a new scene
//! every frame: the pipeline (config/vins_frontend.yaml: tracks only) with the tracker begun
//! beside it (`Tracker::begin`, as the node runs it), then the tracking step, split into its
//! flow, its new corners and the corners' host parts (queue, wait, keys, spacing:
//! `FrameStats::corner_parts_ms`); then the same frames again with LK's GPU time measured
//! (CUDA events, a pass of its own: the events cost host time). 752x480 mono8 frames: the
//! moving camera pans 2 px a frame over tiles of tests/data/seq; the new scene is a tile of
//! another photo of tests/data every frame.
//!
//! Prints the p50 and p90 of each. `cargo run --release --example step_parts [-- --pace HZ]`
//! (with `--pace`, frames start 1/HZ s apart, as a camera's come to the node).
use std::time::Instant;

use gpu_features::bench::Pacer;
use gpu_features::cpu::decode::load_gray;
use gpu_features::track::{FrameStats, TrackInput, TrackParams, Tracker};
use gpu_features::{BackendChoice, Config, Features, GrayImage, ImageView, Pipeline};

const SIZE: (usize, usize) = (752, 480);

/// `src` tiled over a `SIZE` frame, starting `dx` pixels in.
fn tile(src: &GrayImage, dx: usize) -> GrayImage {
    let (w, h) = SIZE;
    let mut out = GrayImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            out.data[y * w + x] = src.data[(y % src.height) * src.width + (x + dx) % src.width];
        }
    }
    out
}

/// `--pace HZ` from the command line.
fn pace_from_args() -> Option<f64> {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == "--pace")
        .and_then(|i| a.get(i + 1))
        .map(|v| v.parse::<f64>().expect("--pace HZ"))
}

/// p50 / p90 of `v`, as text.
fn p50_p90(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:.3} / {:.3}", v[v.len() / 2], v[v.len() * 9 / 10])
}

/// The frames through the pipeline and the tracker as the node runs them; per frame the
/// pipeline call, then the tracker's stats.
fn run(
    frames: &[GrayImage],
    cfg: &Config,
    hz: Option<f64>,
    time_lk: bool,
) -> Vec<(f64, FrameStats)> {
    let (w, h) = SIZE;
    let params = TrackParams::from_config(&cfg.track);
    let mut pipe = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
    let (mut t, why) = Tracker::for_pipeline(&pipe, params);
    assert!(why.is_none(), "{why:?}");
    t.time_lk_kernel(time_lk);
    let mut out = Features::default();
    let mut pace = Pacer::new(hz);
    let mut rows = Vec::new();
    for round in 0..4 {
        for (k, f) in frames.iter().enumerate() {
            let view = ImageView::new(&f.data, w, h, w, "mono8", false).unwrap();
            let stamp = (round * frames.len() + k) as f64 / 30.0;
            pace.wait();
            let t0 = Instant::now();
            let mut hook = |gray: gpu_features::cuda::DeviceGray<'_>| {
                t.begin(TrackInput::Device(gray, &view), stamp, None, true)
            };
            pipe.process_edges_then(&view, &mut out, None, &mut hook)
                .unwrap();
            let p = t0.elapsed().as_secs_f64() * 1e3;
            let gray = pipe.gray_on_device().unwrap();
            t.track_input(TrackInput::Device(gray, &view), stamp, None);
            if round > 0 {
                rows.push((p, *t.stats()));
            }
        }
    }
    assert_eq!(t.backend(), gpu_features::BackendKind::Cuda);
    rows
}

fn report(name: &str, rows: &[(f64, FrameStats)], lk: &[(f64, FrameStats)]) {
    let col = |f: &dyn Fn(&(f64, FrameStats)) -> f64| {
        let mut v: Vec<f64> = rows.iter().map(f).collect();
        p50_p90(&mut v)
    };
    let with_corners: Vec<_> = rows
        .iter()
        .filter(|r| r.1.corner_candidates > 0)
        .cloned()
        .collect();
    let part = |i: usize| {
        let mut v: Vec<f64> = with_corners
            .iter()
            .map(|r| r.1.corner_parts_ms[i])
            .collect();
        if v.is_empty() {
            "-".to_string()
        } else {
            p50_p90(&mut v)
        }
    };
    let mut cands: Vec<f64> = with_corners
        .iter()
        .map(|r| r.1.corner_candidates as f64)
        .collect();
    let mut kernel: Vec<f64> = lk
        .iter()
        .map(|r| r.1.lk_kernel_ms)
        .filter(|v| v.is_finite())
        .collect();
    println!(
        "{name} ({} frames, {} with new corners):",
        rows.len(),
        with_corners.len()
    );
    println!(
        "  pipeline call {} (begin {})",
        col(&|r| r.0),
        col(&|r| r.1.begin_ms)
    );
    println!(
        "  tracking step {}: flow {}, corners {}",
        col(&|r| r.1.total_ms),
        col(&|r| r.1.flow_ms),
        col(&|r| r.1.detect_ms)
    );
    println!(
        "  corners' host parts: queue {}, wait {}, keys {}, spacing {}; candidates {}",
        part(0),
        part(1),
        part(2),
        part(3),
        if cands.is_empty() {
            "-".into()
        } else {
            p50_p90(&mut cands)
        }
    );
    if !kernel.is_empty() {
        println!("  LK kernel (events, own pass) {}", p50_p90(&mut kernel));
    }
}

fn main() {
    let hz = pace_from_args();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let seq: Vec<GrayImage> = (0..8)
        .map(|k| load_gray(&root.join(format!("tests/data/seq/cockatoo_{k:02}.png"))).unwrap())
        .collect();
    let photos: Vec<GrayImage> = [
        "astronaut",
        "basketball1",
        "box",
        "brick",
        "building",
        "camera",
        "graf1",
        "left01",
    ]
    .iter()
    .map(|n| load_gray(&root.join(format!("tests/data/{n}.png"))).unwrap())
    .collect();
    let cfg = Config::from_file(&root.join("config/vins_frontend.yaml")).unwrap();
    let moving: Vec<GrayImage> = (0..64).map(|k| tile(&seq[k % 8], 2 * k)).collect();
    let new_scene: Vec<GrayImage> = (0..64).map(|k| tile(&photos[k % 8], 13 * k)).collect();
    println!("pace: {hz:?} Hz; ms p50 / p90");
    for (name, frames) in [("moving camera", &moving), ("new scene", &new_scene)] {
        let rows = run(frames, &cfg, hz, false);
        let lk = run(frames, &cfg, hz, true);
        report(name, &rows, &lk);
    }
}
