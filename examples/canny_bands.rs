//! `canny::canny_banded` on a rayon pool of T threads (`T`, default 2) in B bands (`B`,
//! default T, as the pipeline)
//! with OpenCV's Canny settings of `config/opencv_canny.yaml` (50 / 150, L2, no blur), on
//! centre crops of the bench-data photo at 1280x720, 1920x1080 and 3840x2160: the minimum
//! and median of N runs each, and the edge pixels. The minimum is the number to compare two
//! builds by on a shared machine.
//!
//! `T=2 cargo run --release --example canny_bands [runs] [PHOTO]`; OpenCV's on the same
//! crops: `T=2 python3 scripts/cv_canny_speed.py [runs] [PHOTO]`.

use std::time::Instant;

use gpu_features::config::CannyConfig;
use gpu_features::cpu::canny::{canny_banded, CannyScratch};
use gpu_features::cpu::decode::load_gray;
use gpu_features::GrayImage;

#[path = "common/mod.rs"]
mod common;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = common::runs_arg(&args, 300);
    let photo = args.get(2).cloned().unwrap_or_else(|| {
        let p = common::root().join("bench-data/Kleiber_by_Lukas_Baubkus.jpg");
        p.display().to_string()
    });
    let src = load_gray(std::path::Path::new(&photo)).expect("photo (scripts/fetch-bench-data.sh)");
    let env = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let threads = env("T", 2);
    let bands = env("B", threads);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let cfg = CannyConfig {
        enabled: true,
        low_threshold: 50.0,
        high_threshold: 150.0,
        l2_gradient: true,
        blur_ksize: 0,
        ..CannyConfig::default()
    };
    for (w, h) in [(1280, 720), (1920, 1080), (3840, 2160)] {
        assert!(
            src.width >= w && src.height >= h,
            "the photo is smaller than {w}x{h}"
        );
        let (x0, y0) = ((src.width - w) / 2, (src.height - h) / 2);
        let img = common::crop(&src, x0, y0, w, h);
        let (mut out, mut scratch) = (GrayImage::default(), CannyScratch::default());
        let mut ms = Vec::with_capacity(runs);
        pool.install(|| {
            for _ in 0..runs {
                let t = Instant::now();
                canny_banded(&img, &cfg, &mut out, &mut scratch, bands);
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        });
        ms.sort_by(|a, b| a.total_cmp(b));
        let edges = out.data.iter().filter(|&&v| v == 255).count();
        println!(
            "{w}x{h} {threads} threads, {bands} bands: {edges} edge pixels, min {:.3} ms, median {:.3} ms",
            ms[0],
            ms[ms.len() / 2]
        );
    }
}
