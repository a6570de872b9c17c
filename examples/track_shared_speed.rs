//! The node's tracking path per frame, on the GPU: the pipeline (config/vins_frontend.yaml:
//! tracks only, so the pipeline decodes and little else) then the tracker, the tracker fed
//! (a) the message as the node fed it before: converted to gray on the host and uploaded
//! again (`Tracker::track_view`), (b) the pipeline's gray image on the GPU
//! (`TrackInput::Device`) in a GPU session of the tracker's own, (c) the same in the
//! pipeline's session (`Tracker::for_pipeline`). Camera pans over the real sequence's frames, mono8 and bgr8,
//! 752x480 and 1920x1080 (crops / tiles of tests/data/seq). Prints the median and p90 ms
//! per frame of each, same process. Then stereo (the node's `track.stereo`): the second
//! camera's frame handed over (a) decoded to gray on the host, the tracker uploading it
//! (`Tracker::track_right`), (b) kept on the GPU from that camera's pipeline
//! (`Pipeline::keep_gray`, `RightInput::Device`): the hand-over (the second camera's
//! worker) and the right step (the first's) apart.
//! `cargo run --release --example track_shared_speed [-- --pace HZ]` (with `--pace`, frames
//! start 1/HZ s apart, as a camera's come to the node: the GPU and the CPU idle between).
use std::time::Instant;

use gpu_features::bench::Pacer;
use gpu_features::cpu::decode::load_gray;
use gpu_features::track::{RightInput, TrackInput, TrackParams, Tracker};
use gpu_features::{BackendChoice, Config, Features, GrayImage, ImageView, Pipeline};

fn tile(src: &GrayImage, w: usize, h: usize, dx: usize) -> GrayImage {
    let mut out = GrayImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            out.data[y * w + x] = src.data[(y % src.height) * src.width + (x + dx) % src.width];
        }
    }
    out
}

/// `--pace HZ` from the command line (as `gpu_features bench --pace`).
fn pace_from_args() -> Pacer {
    let a: Vec<String> = std::env::args().collect();
    let hz = a
        .iter()
        .position(|x| x == "--pace")
        .and_then(|i| a.get(i + 1))
        .map(|v| v.parse::<f64>().expect("--pace HZ"));
    Pacer::new(hz)
}

/// Median and p90 of `ms`.
fn p50_p90(ms: &mut [f64]) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], ms[ms.len() * 9 / 10])
}

/// The frames of a pan, `w x h`, in `enc` (`bpp` bytes per pixel), starting `dx0` pixels in.
fn pan(seq: &[GrayImage], (w, h): (usize, usize), bpp: usize, dx0: usize) -> Vec<Vec<u8>> {
    (0..64)
        .map(|k| {
            let g = tile(&seq[k % 8], w, h, dx0 + 2 * k);
            match bpp {
                1 => g.data,
                _ => g
                    .data
                    .iter()
                    .flat_map(|&v| [v, v / 3 + 40, 255 - v])
                    .collect(),
            }
        })
        .collect()
}

/// Stereo: the pair's right frame 8 px to the right; hand-over and right step per frame.
fn stereo(seq: &[GrayImage], cfg: &Config, params: TrackParams, pace: &mut Pacer) {
    for (w, h) in [(752, 480), (1920, 1080)] {
        for (enc, bpp) in [("mono8", 1), ("bgr8", 3)] {
            let (left, right) = (pan(seq, (w, h), bpp, 0), pan(seq, (w, h), bpp, 8));
            let mut row = format!("stereo {w}x{h} {enc}, hand-over / right step p50 (p90):");
            for on_device in [false, true] {
                let mut lp = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
                let mut rp = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
                let (mut t, _) = Tracker::with_cuda(params);
                let (mut out, mut gray, mut kept) =
                    (Features::default(), GrayImage::default(), None);
                let (mut hand, mut step) = (Vec::new(), Vec::new());
                for round in 0..4 {
                    for (k, (l, r)) in left.iter().zip(&right).enumerate() {
                        let lv = ImageView::new(l, w, h, w * bpp, enc, false).unwrap();
                        let rv = ImageView::new(r, w, h, w * bpp, enc, false).unwrap();
                        let stamp = (round * left.len() + k) as f64 / 30.0;
                        pace.wait();
                        rp.process_into(&rv, &mut out).unwrap();
                        let t0 = Instant::now();
                        let input = if on_device {
                            assert!(rp.keep_gray(&mut kept).unwrap());
                            RightInput::Device(kept.as_ref().unwrap().gray())
                        } else {
                            gpu_features::cpu::decode::decode(&rv, &mut gray);
                            RightInput::Gray(&gray)
                        };
                        let handed = t0.elapsed().as_secs_f64() * 1e3;
                        lp.process_into(&lv, &mut out).unwrap();
                        let g = lp.gray_on_device().unwrap();
                        t.track_input(TrackInput::Device(g, &lv), stamp, None);
                        let t1 = Instant::now();
                        t.track_right_input(input, None).unwrap();
                        if round > 0 {
                            hand.push(handed);
                            step.push(t1.elapsed().as_secs_f64() * 1e3);
                        }
                    }
                }
                assert_eq!(t.backend(), gpu_features::BackendKind::Cuda);
                let ((h50, h90), (s50, s90)) = (p50_p90(&mut hand), p50_p90(&mut step));
                let what = if on_device { "kept on the GPU" } else { "host" };
                row += &format!(" {what} {h50:.3} ({h90:.3}) / {s50:.3} ({s90:.3}) ms;");
            }
            println!("{row}");
        }
    }
}

fn main() {
    let mut pace = pace_from_args();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/seq");
    let seq: Vec<GrayImage> = (0..8)
        .map(|k| load_gray(&dir.join(format!("cockatoo_{k:02}.png"))).unwrap())
        .collect();
    let cfg = Config::from_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/vins_frontend.yaml"),
    )
    .unwrap();
    let params = TrackParams::from_config(&cfg.track);
    for (w, h) in [(752, 480), (1920, 1080)] {
        for (enc, bpp) in [("mono8", 1), ("bgr8", 3)] {
            let frames = pan(&seq, (w, h), bpp, 0);
            let mut row = format!("{w}x{h} {enc}:");
            // The tracker uploading the frame itself, reading the pipeline's gray image in a
            // GPU session of its own, and in the pipeline's session (one context, its work
            // on the pipeline's streams: what the CLI, the replay and the node run).
            for (shared, one_session) in [(false, false), (true, false), (true, true)] {
                let mut pipe = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
                let (mut t, why) = if one_session {
                    Tracker::for_pipeline(&pipe, params)
                } else {
                    Tracker::with_cuda(params)
                };
                if let Some(why) = why {
                    println!("no GPU tracker: {why}");
                    return;
                }
                let mut out = Features::default();
                let mut ms = Vec::new();
                for round in 0..4 {
                    for (k, f) in frames.iter().enumerate() {
                        let view = ImageView::new(f, w, h, w * bpp, enc, false).unwrap();
                        let stamp = (round * frames.len() + k) as f64 / 30.0;
                        pace.wait();
                        let t0 = Instant::now();
                        pipe.process_into(&view, &mut out).unwrap();
                        let input = match (shared, pipe.gray_on_device()) {
                            (true, Some(g)) => TrackInput::Device(g, &view),
                            _ => TrackInput::View(&view),
                        };
                        t.track_input(input, stamp, None);
                        if round > 0 {
                            ms.push(t0.elapsed().as_secs_f64() * 1e3);
                        }
                    }
                }
                let (p50, p90) = p50_p90(&mut ms);
                let what = match (shared, one_session) {
                    (false, _) => "own upload",
                    (true, false) => "shared gray, own session",
                    (true, true) => "one session",
                };
                row += &format!(" {what} {p50:.3} / {p90:.3} ms;");
            }
            println!("{row}");
        }
    }
    stereo(&seq, &cfg, params, &mut pace);
}
