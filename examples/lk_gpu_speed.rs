//! GPU LK speed on the real sequence (needs a CUDA device):
//! `cargo run --release --example lk_gpu_speed`. Per frame pair, wall time of: the next
//! frame's pyramid (upload + levels), its derivatives, the forward track (3 levels) and the
//! flow-back track (1 level, in the same launch) of the previous frame's GFTT corners, against the CPU reference
//! doing the same on one thread.
use std::time::Instant;

use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::gftt::{good_features_to_track, GfttParams, GfttScratch};
use gpu_features::cpu::lk::{track, FlowPyramid, LkParams, LkScratch};
use gpu_features::cuda::lk::{GpuFlowPyramid, GpuLk};
use gpu_features::cuda::Gpu;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let gpu = Gpu::new().expect("a CUDA device");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/seq");
    let frames: Vec<_> = (0..8)
        .map(|k| load_gray(&dir.join(format!("cockatoo_{k:02}.png"))).unwrap())
        .collect();
    for n_pts in [150usize, 1000] {
        let g = GfttParams {
            max_corners: n_pts,
            min_distance: if n_pts > 150 { 5.0 } else { 30.0 },
            ..Default::default()
        };
        let p = LkParams::default();
        let back = LkParams { max_level: 1, ..p };
        let (mut ga, mut gb) = (GpuFlowPyramid::new(), GpuFlowPyramid::new());
        let (mut ca, mut cb) = (FlowPyramid::default(), FlowPyramid::default());
        let mut glk = GpuLk::new(&gpu, n_pts).unwrap();
        let (mut gf, mut gr, mut cf, mut cr) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut s = LkScratch::default();
        let mut gs = GfttScratch::default();
        let (mut gt, mut ct, mut np) = (Vec::new(), Vec::new(), 0);
        for round in 0..20 {
            for k in 0..7 {
                let mut pts = Vec::new();
                good_features_to_track(&frames[k], &g, None, &mut gs, &mut pts);
                ga.build(&gpu, &frames[k], 21, 3).unwrap();
                ga.ensure_derivatives(&gpu).unwrap();
                gpu.sync().unwrap();
                let t0 = Instant::now();
                gb.build(&gpu, &frames[k + 1], 21, 3).unwrap();
                gb.ensure_derivatives(&gpu).unwrap();
                // Forward and flow back in one launch, as the tracker runs them.
                glk.track(
                    &gpu,
                    &ga,
                    &gb,
                    &pts,
                    None,
                    &p,
                    Some((&back, true)),
                    &mut gf,
                    &mut gr,
                )
                .unwrap();
                let t1 = t0.elapsed().as_secs_f64() * 1e3;
                if round > 2 {
                    gt.push(t1);
                }
                if round == 0 {
                    ca.build(&frames[k], 21, 3);
                    ca.ensure_derivatives();
                    let t0 = Instant::now();
                    cb.build(&frames[k + 1], 21, 3);
                    cb.ensure_derivatives();
                    track(&ca, &cb, &pts, None, &p, &mut s, &mut cf);
                    let fwd: Vec<(f32, f32)> = cf.iter().map(|f| (f.x, f.y)).collect();
                    track(&cb, &ca, &fwd, Some(&pts), &back, &mut s, &mut cr);
                    ct.push(t0.elapsed().as_secs_f64() * 1e3);
                    assert!(cf
                        .iter()
                        .zip(&gf)
                        .all(|(a, b)| a.x.to_bits() == b.x.to_bits() && a.status == b.status));
                    np += pts.len();
                }
            }
        }
        let (g_ms, c_ms) = (median(gt), median(ct));
        println!(
            "640x360, {} points per frame: LK forward + flow back with the next pyramid: GPU {g_ms:.3} ms, CPU (1 thread) {c_ms:.2} ms, {:.0}x ({})",
            np / 7,
            c_ms / g_ms,
            gpu.name
        );
    }
}
