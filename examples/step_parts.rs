//! Where the node's tracking step goes, on the GPU, for a moving camera and for a new scene
//! every frame: the pipeline (config/vins_frontend.yaml: tracks only) with the tracker begun
//! beside it (`Tracker::begin`, as the node runs it), then the tracking step, split into its
//! flow, its new corners and the corners' host parts (queue, wait, keys, spacing:
//! `FrameStats::corner_parts_ms`); then the same frames again with LK's GPU time measured
//! (CUDA events, a pass of its own: the events cost host time). 752x480 mono8 frames: the
//! moving camera pans 2 px a frame over tiles of tests/data/seq; the new scene is a tile of
//! another photo of tests/data every frame.
//!
//! Prints the p50 and p90 of each. `cargo run --release --example step_parts [-- --pace HZ]
//! [--pan IMAGE] [--warm-us US]`: with `--pace`, frames start 1/HZ s apart, as a camera's
//! come to the node; with `--pan`, the moving camera is `scripts/node-vins-bench.sh`'s (60
//! crops of IMAGE, 3 px right and 2 down a frame, as `gpu_features_load --pan 3,2
//! --distinct 60` makes them); with `--warm-us` (paced only), a one-byte device memset and
//! its wait US before each frame's start, then sleep (examples/paced_floor.rs: what a
//! round trip ahead of a frame buys).
use std::time::Instant;

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

/// Frame `d` of the load generator's pan over `photo` (`--pan 3,2 --distinct 60`): the
/// `SIZE` crop from the pan's origin (centred where it fits) + d * (3, 2), wrapping.
fn pan_frame(photo: &GrayImage, d: usize) -> GrayImage {
    let (w, h) = SIZE;
    let (pw, ph) = (photo.width, photo.height);
    let ox = pw.saturating_sub(w + 3 * 60) / 2 + 3 * d;
    let oy = ph.saturating_sub(h + 2 * 60) / 2 + 2 * d;
    let mut out = GrayImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            out.data[y * w + x] = photo.data[((y + oy) % ph) * pw + (x + ox) % pw];
        }
    }
    out
}

/// `NAME VALUE` from the command line.
fn arg<T: std::str::FromStr>(name: &str) -> Option<T> {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1))
        .map(|v| v.parse::<T>().unwrap_or_else(|_| panic!("{name}: {v}")))
}

/// Frames 1/`hz` s apart (none: back to back), each optionally preceded by a device round
/// trip `warm_us` before its start.
struct Pace {
    period: Option<std::time::Duration>,
    warm: Option<(std::time::Duration, gpu_features::cuda::driver::DevBuf<u8>)>,
    next: Option<Instant>,
}

impl Pace {
    fn new(hz: Option<f64>, warm_us: Option<u64>, pipe: &Pipeline) -> Pace {
        let warm = warm_us.filter(|_| hz.is_some()).map(|us| {
            let gpu = pipe.gpu_session().expect("the CUDA backend");
            let buf = gpu_features::cuda::driver::DevBuf::new(&gpu.ctx, 4).unwrap();
            (std::time::Duration::from_micros(us), buf)
        });
        Pace {
            period: hz.map(|h| std::time::Duration::from_secs_f64(1.0 / h)),
            warm,
            next: None,
        }
    }

    /// Sleeps until the next frame's start (the round trip on the way).
    fn wait(&mut self) {
        let Some(period) = self.period else { return };
        let sleep_until = |t: Instant| {
            if let Some(d) = t.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        };
        if let Some(next) = self.next {
            if let Some((lead, buf)) = &self.warm {
                sleep_until(next - *lead);
                buf.fill_sync(0..4, 0).unwrap();
            }
            sleep_until(next);
        }
        self.next = Some(Instant::now() + period);
    }
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
    (hz, warm_us): (Option<f64>, Option<u64>),
    time_lk: bool,
) -> Vec<(f64, FrameStats)> {
    let (w, h) = SIZE;
    let params = TrackParams::from_config(&cfg.track);
    let mut pipe = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
    let (mut t, why) = Tracker::for_pipeline(&pipe, params);
    assert!(why.is_none(), "{why:?}");
    t.time_lk_kernel(time_lk);
    let mut out = Features::default();
    let mut pace = Pace::new(hz, warm_us, &pipe);
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
    let hz = arg::<f64>("--pace");
    let warm_us = arg::<u64>("--warm-us");
    let pan = arg::<std::path::PathBuf>("--pan");
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
    let moving: Vec<GrayImage> = match &pan {
        Some(p) => {
            let photo = load_gray(p).unwrap();
            (0..60).map(|d| pan_frame(&photo, d)).collect()
        }
        None => (0..64).map(|k| tile(&seq[k % 8], 2 * k)).collect(),
    };
    let new_scene: Vec<GrayImage> = (0..64).map(|k| tile(&photos[k % 8], 13 * k)).collect();
    println!("pace: {hz:?} Hz, warm-up {warm_us:?} us ahead, pan {pan:?}; ms p50 / p90");
    for (name, frames) in [("moving camera", &moving), ("new scene", &new_scene)] {
        let rows = run(frames, &cfg, (hz, warm_us), false);
        let lk = run(frames, &cfg, (hz, warm_us), true);
        report(name, &rows, &lk);
    }
}
