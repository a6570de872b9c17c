//! What beginning a frame beside the detection costs and saves (`Tracker::begin` called from
//! `Pipeline::process_edges_then`, what the node does), on the GPU: a 752x480 mono8 pan over
//! the real sequence tests/data/seq, config/vins_frontend.yaml.
//! 1. Per frame, the pipeline's call and the rest of the tracking step (`track_input`),
//!    without the begin (the tracker after the pipeline) and with it.
//! 2. The host time of each GPU call the begin makes, one by one on the same frames, in its
//!    order: the frame's device copy with the LK pyramid's graph (`build_from_device`), the
//!    corner map's mark, LK's launch (points up, kernel, flows down) and the corner map's
//!    launches.
//!
//! Prints the median and p90 ms of each. `cargo run --release --example begin_cost`.
use std::time::Instant;

use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::gftt::{good_features_to_track, GfttParams, GfttScratch};
use gpu_features::cpu::lk::LkParams;
use gpu_features::cuda::gftt::GpuGftt;
use gpu_features::cuda::lk::{GpuFlowPyramid, GpuLk};
use gpu_features::track::{TrackInput, TrackParams, Tracker};
use gpu_features::{BackendChoice, Config, Features, GrayImage, ImageView, Pipeline};

const SIZE: (usize, usize) = (752, 480);

/// 64 frames of a pan, 2 px per frame, tiled from the sequence's frames.
fn pan(seq: &[GrayImage]) -> Vec<GrayImage> {
    let (w, h) = SIZE;
    (0..64)
        .map(|k| {
            let src = &seq[k % seq.len()];
            let mut out = GrayImage::new(w, h);
            for y in 0..h {
                for x in 0..w {
                    out.data[y * w + x] =
                        src.data[(y % src.height) * src.width + (x + 2 * k) % src.width];
                }
            }
            out
        })
        .collect()
}

/// Median and p90 of `ms`, as text.
fn p50_p90(ms: &mut [f64]) -> String {
    ms.sort_by(f64::total_cmp);
    format!("{:.3} / {:.3}", ms[ms.len() / 2], ms[ms.len() * 9 / 10])
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Part 1: the pipeline's call and the tracking step, without and with the begin.
fn node_path(frames: &[GrayImage], cfg: &Config, params: TrackParams) {
    let (w, h) = SIZE;
    for early in [false, true] {
        let mut pipe = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
        let (mut t, why) = Tracker::for_pipeline(&pipe, params);
        assert!(why.is_none(), "{why:?}");
        let mut out = Features::default();
        let (mut pipeline, mut begin, mut track) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..5 {
            for (k, f) in frames.iter().enumerate() {
                let view = ImageView::new(&f.data, w, h, w, "mono8", false).unwrap();
                let stamp = (round * frames.len() + k) as f64 / 30.0;
                let t0 = Instant::now();
                if early {
                    let mut hook = |gray: gpu_features::cuda::DeviceGray<'_>| {
                        t.begin(TrackInput::Device(gray, &view), stamp, None, true)
                    };
                    pipe.process_edges_then(&view, &mut out, None, &mut hook)
                        .unwrap();
                } else {
                    pipe.process_into(&view, &mut out).unwrap();
                }
                let p = ms(t0);
                let t1 = Instant::now();
                let gray = pipe.gray_on_device().unwrap();
                t.track_input(TrackInput::Device(gray, &view), stamp, None);
                if round > 0 {
                    pipeline.push(p);
                    track.push(ms(t1));
                    begin.push(if early { t.stats().begin_ms } else { 0.0 });
                }
            }
        }
        assert_eq!(t.backend(), gpu_features::BackendKind::Cuda);
        println!(
            "{}: pipeline call {} (of which the begin {}), tracking step {} ms p50 / p90",
            if early {
                "begun beside the detection"
            } else {
                "tracker after the pipeline"
            },
            p50_p90(&mut pipeline),
            p50_p90(&mut begin),
            p50_p90(&mut track)
        );
    }
}

/// Part 2: the begin's GPU calls one by one, host time each.
fn calls(frames: &[GrayImage], cfg: &Config) {
    let (w, h) = SIZE;
    let mut pipe = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
    let gpu = pipe.gpu_session().expect("the CUDA backend");
    let mut out = Features::default();
    let p = LkParams::default();
    let back = LkParams { max_level: 1, ..p };
    let g = GfttParams {
        max_corners: 150,
        min_distance: 30.0,
        ..Default::default()
    };
    let mut pts = Vec::new();
    good_features_to_track(&frames[0], &g, None, &mut GfttScratch::default(), &mut pts);
    let (mut prev, mut cur) = (GpuFlowPyramid::new(), GpuFlowPyramid::new());
    let mut lk = GpuLk::new(&gpu, 256).unwrap();
    let mut gftt = GpuGftt::new(&gpu, w, h).unwrap();
    let names = [
        "copy + pyramid graph",
        "corner map mark",
        "LK launch",
        "corner map launches",
    ];
    let mut t: [Vec<f64>; 4] = Default::default();
    let (mut fwd, mut bwd) = (Vec::new(), Vec::new());
    for round in 0..5 {
        for f in frames {
            let view = ImageView::new(&f.data, w, h, w, "mono8", false).unwrap();
            pipe.process_into(&view, &mut out).unwrap();
            let gray = pipe.gray_on_device().unwrap();
            gftt.settle(&gpu).unwrap();
            std::mem::swap(&mut prev, &mut cur);
            let t0 = Instant::now();
            cur.build_from_device(&gpu, gray, p.window, p.max_level)
                .unwrap();
            let d0 = ms(t0);
            let t1 = Instant::now();
            gftt.mark_image(&gpu, (w, h)).unwrap();
            let d1 = ms(t1);
            if prev.max_level() == 0 {
                continue; // the first frame: nothing to track from
            }
            let t2 = Instant::now();
            let mut nothing = || Ok(());
            lk.launch(
                &gpu,
                (&prev, &cur),
                &pts,
                None,
                &p,
                Some((&back, true)),
                &mut nothing,
            )
            .unwrap();
            let d2 = ms(t2);
            let t3 = Instant::now();
            gftt.queue_map(&gpu, cur.level0().unwrap(), &GfttParams::default())
                .unwrap();
            let d3 = ms(t3);
            lk.collect(&gpu, &mut fwd, &mut bwd).unwrap();
            cur.wait_source().unwrap();
            if round > 0 {
                for (v, d) in t.iter_mut().zip([d0, d1, d2, d3]) {
                    v.push(d);
                }
            }
        }
    }
    let mut row = format!(
        "the begin's calls, host ms p50 / p90 ({} points):",
        pts.len()
    );
    for (name, v) in names.iter().zip(t.iter_mut()) {
        row += &format!(" {name} {};", p50_p90(v));
    }
    println!("{row}");
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let seq: Vec<GrayImage> = (0..8)
        .map(|k| load_gray(&root.join(format!("tests/data/seq/cockatoo_{k:02}.png"))).unwrap())
        .collect();
    let cfg = Config::from_file(&root.join("config/vins_frontend.yaml")).unwrap();
    let params = TrackParams::from_config(&cfg.track);
    let frames = pan(&seq);
    node_path(&frames, &cfg, params);
    calls(&frames, &cfg);
}
