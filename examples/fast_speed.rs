//! CPU FAST (`cpu::fast::detect`, threshold 20, NMS) on one thread: the median and the
//! minimum of N runs per size, on a bench-data photo (else tests/data/graf1.png) tiled to
//! 1280x720, 1920x1080 and 3840x2160; then the whole CPU pipeline with
//! config/opencv_fast.yaml on the same frames as mono8 messages (what `bench` times against
//! cv::FAST). The minimum is the number to compare two builds by on a machine shared with
//! others (its medians wander). Last, `fast::detect` on each quarter of the 3840x2160 frame
//! (1920x1080 each) with its corners before and after suppression: where the corners are
//! dense the time goes with their number, not the pixels (`scripts/cv_fast_speed.py` times
//! `cv::FAST` on the same frames).
//!
//! `cargo run --release --example fast_speed [runs] [PHOTO]`

use std::time::Instant;

use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::{fast, CpuPipeline};
use gpu_features::{Config, Features, ImageView};

#[path = "common/mod.rs"]
mod common;
use common::tile;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = common::runs_arg(&args, 200);
    let photo = args.get(2).cloned().unwrap_or_else(|| {
        let b = common::root().join("bench-data/Kleiber_by_Lukas_Baubkus.jpg");
        let t = common::root().join("tests/data/graf1.png");
        if b.exists() { b } else { t }.display().to_string()
    });
    let src = load_gray(std::path::Path::new(&photo)).expect("photo");
    let mut cfg = Config::from_file(&common::root().join("config/opencv_fast.yaml")).unwrap();
    cfg.cpu.threads = 1;
    let (mut cpu, mut out) = (CpuPipeline::new(), Features::default());
    for (w, h) in [(1280, 720), (1920, 1080), (3840, 2160)] {
        let img = tile(&src, w, h);
        let mut ms: Vec<f64> = Vec::with_capacity(runs);
        let mut n = 0;
        for _ in 0..runs {
            let t = Instant::now();
            n = fast::detect(&img, 20, true).len();
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let report = |what: &str, ms: &mut Vec<f64>, n: usize| {
            ms.sort_by(|a, b| a.total_cmp(b));
            println!(
                "{w}x{h} {what}: {n} corners, median {:.3} ms, min {:.3} ms",
                ms[ms.len() / 2],
                ms[0]
            );
        };
        report("fast::detect", &mut ms, n);
        let view = ImageView::mono8(&img.data, w, h).unwrap();
        ms.clear();
        for _ in 0..runs {
            let t = Instant::now();
            cpu.process_into(&cfg, &view, &mut out);
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        report("pipeline", &mut ms, out.keypoints.len());
    }
    let big = tile(&src, 3840, 2160);
    for (x0, y0) in [(0, 0), (1920, 0), (0, 1080), (1920, 1080)] {
        let q = common::crop(&big, x0, y0, 1920, 1080);
        let all = fast::detect(&q, 20, false).len();
        let mut min = f64::MAX;
        let mut n = 0;
        for _ in 0..runs {
            let t = Instant::now();
            n = fast::detect(&q, 20, true).len();
            min = min.min(t.elapsed().as_secs_f64() * 1e3);
        }
        println!(
            "3840x2160 quarter at ({x0}, {y0}) fast::detect: {all} corners before suppression, \
             {n} after, min {min:.3} ms"
        );
    }
}
