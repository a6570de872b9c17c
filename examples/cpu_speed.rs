//! CPU speed of FAST and dense Harris (single thread), median of N runs.
//!
//! `cargo run --release --example cpu_speed [runs]` times `fast::detect` (t=20, NMS) and
//! `harris::dense_response` (block 2, ksize 3) on tests/data/graf1.png (800x640) and on a
//! 1920x1080 tiling of it. `cargo run --release --example cpu_speed -- dump FILE` writes
//! every output bit of a sweep of images and parameters to FILE, to compare two builds.

use std::io::Write;
use std::path::Path;

use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::{fast, harris};
use gpu_features::GrayImage;

#[path = "common/mod.rs"]
mod common;
use common::{median_ms, tile, xorshift};

/// A deterministic pseudo-random image (xorshift), optionally quantised to a few levels.
fn noise(w: usize, h: usize, seed: u64, levels: u32) -> GrayImage {
    let mut s = seed | 1;
    let data = (0..w * h)
        .map(|_| {
            let v = (xorshift(&mut s) >> 24) as u32 & 0xFF;
            if levels > 0 {
                (v % levels * (255 / levels.max(2))) as u8
            } else {
                v as u8
            }
        })
        .collect();
    GrayImage::from_vec(w, h, data).unwrap()
}

fn dump(path: &str, root: &Path) {
    let mut imgs = common::fixtures_by_size(root);
    for (i, (w, h)) in [
        (7, 7),
        (8, 9),
        (1, 5),
        (5, 1),
        (2, 2),
        (13, 40),
        (33, 17),
        (64, 64),
        (65, 3),
        (100, 71),
        (129, 33),
        (200, 150),
        (257, 31),
    ]
    .into_iter()
    .enumerate()
    {
        imgs.push(noise(w, h, 1234 + i as u64, 0));
        imgs.push(noise(w, h, 99 + i as u64, 3));
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut resp = Vec::new();
    for img in &imgs {
        writeln!(out, "img {}x{}", img.width, img.height).unwrap();
        for t in [0u8, 1, 7, 10, 20, 40, 90] {
            for nms in [false, true] {
                for c in fast::detect(img, t, nms) {
                    writeln!(out, "{} {} {} {}", c.x, c.y, c.fast_score, c.response).unwrap();
                }
            }
        }
        if img.width < 2 || img.height < 2 {
            continue;
        }
        for (b, k) in [(2, 3), (3, 3), (3, 5), (5, 5), (2, 7), (7, 7)] {
            for kk in [0.04f32, 0.06] {
                harris::dense_response(img, b, k, kk, &mut resp);
                for v in &resp {
                    out.write_all(&v.to_bits().to_le_bytes()).unwrap();
                }
            }
        }
    }
}

fn main() {
    let Some(args) = common::args_unless_dump(dump) else {
        return;
    };
    let runs = common::runs_arg(&args, 21);
    let graf = load_gray(&common::root().join("tests/data/graf1.png")).unwrap();
    let big = tile(&graf, 1920, 1080);
    let mut resp = Vec::new();
    for (name, img) in [("graf1 800x640", &graf), ("tiled 1920x1080", &big)] {
        let n = fast::detect(img, 20, true).len();
        let f = median_ms(runs, || {
            std::hint::black_box(fast::detect(img, 20, true));
        });
        let h = median_ms(runs, || {
            harris::dense_response(img, 2, 3, 0.04, &mut resp);
            std::hint::black_box(&resp);
        });
        println!("{name}: fast t20 nms {f:.3} ms ({n} corners), dense harris b2 k3 {h:.3} ms");
    }
}
