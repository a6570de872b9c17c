//! The node's tracking path per frame, on the GPU: the pipeline (config/vins_frontend.yaml:
//! tracks only, so the pipeline decodes and little else) then the tracker, the tracker fed
//! (a) the message as the node fed it before: converted to gray on the host and uploaded
//! again (`Tracker::track_view`), (b) the pipeline's gray image on the GPU
//! (`TrackInput::Device`). Camera pans over the real sequence's frames, mono8 and bgr8,
//! 752x480 and 1920x1080 (crops / tiles of tests/data/seq). Prints the median and p90 ms
//! per frame of each, same process. `cargo run --release --example track_shared_speed`.
use std::time::Instant;

use gpu_features::image::load_gray;
use gpu_features::track::{TrackInput, TrackParams, Tracker};
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

fn main() {
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
            let frames: Vec<Vec<u8>> = (0..64)
                .map(|k| {
                    let g = tile(&seq[k % 8], w, h, 2 * k);
                    match bpp {
                        1 => g.data,
                        _ => g
                            .data
                            .iter()
                            .flat_map(|&v| [v, v / 3 + 40, 255 - v])
                            .collect(),
                    }
                })
                .collect();
            let mut row = format!("{w}x{h} {enc}:");
            for shared in [false, true] {
                let mut pipe = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
                let (mut t, why) = Tracker::with_cuda(params);
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
                ms.sort_by(f64::total_cmp);
                let (p50, p90) = (ms[ms.len() / 2], ms[ms.len() * 9 / 10]);
                let what = if shared { "shared" } else { "own upload" };
                row += &format!(" {what} {p50:.3} / {p90:.3} ms;");
            }
            println!("{row}");
        }
    }
}
