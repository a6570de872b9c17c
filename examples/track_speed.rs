//! CPU tracker speed on the real sequence: `cargo run --release --example track_speed`.
//! Prints the median time per frame of `Tracker::track` (after the first frame), for 150 and
//! 1000 features, with the LK stage on the CPU and (with a CUDA device) on the GPU.
use std::time::Instant;

use gpu_features::cpu::decode::load_gray;
use gpu_features::track::{TrackParams, Tracker};

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/seq");
    let mut frames = Vec::new();
    for k in 0..8 {
        frames.push(load_gray(&dir.join(format!("cockatoo_{k:02}.png"))).unwrap());
    }
    for (max, dist, gpu) in [
        (150usize, 30.0, false),
        (1000, 10.0, false),
        (150, 30.0, true),
        (1000, 10.0, true),
    ] {
        // VINS-Fusion's settings (no F test), as scripts/bench_vins_opencv.py runs OpenCV.
        let params = TrackParams {
            max_features: max,
            min_distance: dist,
            ransac_threshold: 0.0,
            ..Default::default()
        };
        let mut t = if gpu {
            let (t, why) = Tracker::with_cuda(params);
            if let Some(why) = why {
                println!("no GPU tracker: {why}");
                continue;
            }
            t
        } else {
            Tracker::new(params)
        };
        let mut times = Vec::new();
        for round in 0..5 {
            for (k, f) in frames.iter().enumerate() {
                let t0 = Instant::now();
                let n = t.track(f, (round * 8 + k) as f64 / 30.0, None).len();
                if k > 0 {
                    times.push((t0.elapsed().as_secs_f64() * 1e3, n));
                }
            }
            t.clear();
        }
        times.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (ms, _) = times[times.len() / 2];
        let n: usize = times.iter().map(|t| t.1).sum::<usize>() / times.len();
        println!(
            "640x360, max_features {max}, LK on {}: median {ms:.2} ms per frame, {n} tracks on average (1 CPU thread)",
            t.backend().name()
        );
    }
}
