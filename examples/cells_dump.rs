//! `cpu::cells::fast_in_cells` (ORB-SLAM3's per-cell FAST with the low-threshold retry):
//! output dump and speed.
//!
//! `cargo run --release --example cells_dump -- dump FILE` writes every output bit of a sweep
//! (tests/data fixtures and pseudo-random images of odd sizes; threshold pairs, cell sizes,
//! borders, NMS on and off) to FILE, to compare two builds byte for byte.
//! `cargo run --release --example cells_dump [runs]` times it (iniTh 20, minTh 7, NMS,
//! cell 30, border 19) against `fast::detect` at 7 on a mirror tiling of graf1 and on the
//! bench-data photos, at 1280x720 and 1920x1080, median of `runs` (11) runs.

use std::io::Write;
use std::path::Path;

use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::{cells, fast};
use gpu_features::GrayImage;

#[path = "common/mod.rs"]
mod common;
use common::{median_ms, tile, xorshift};

/// Pseudo-random image (xorshift): full range, a few grey levels, or low contrast varying
/// over the image (some cells empty at the high threshold, some not).
fn noise(w: usize, h: usize, seed: u64, kind: u32) -> GrayImage {
    let mut s = seed | 1;
    let data = (0..w * h)
        .map(|i| {
            let v = (xorshift(&mut s) >> 24) as u32 & 0xFF;
            let (x, y) = (i % w, i / w);
            match kind {
                0 => v as u8,
                1 => (v % 3 * 100) as u8,
                2 => (v % 5 * 60) as u8,
                _ => {
                    let amp = 4 + ((x / 23 + y / 17) * 37 % 120) as u32;
                    (128 - amp / 2 + v * amp / 256) as u8
                }
            }
        })
        .collect();
    GrayImage::from_vec(w, h, data).unwrap()
}

fn dump(path: &str, root: &Path) {
    let mut imgs = common::fixtures_by_size(root);
    let mut s = 0x9e3779b97f4a7c15u64;
    for i in 0..24u64 {
        xorshift(&mut s);
        // Odd sizes 20..300.
        let w = 20 + (s % 140) as usize * 2 + 1;
        let h = 20 + (s >> 20) as usize % 140 * 2 + 1;
        imgs.push(noise(w.min(299), h.min(299), 77 + i, (i % 4) as u32));
    }
    for (w, h) in [
        (1, 1),
        (7, 7),
        (12, 13),
        (37, 40),
        (38, 60),
        (40, 40),
        (45, 300),
    ] {
        imgs.push(noise(w, h, 5 + w as u64, 3));
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for img in &imgs {
        writeln!(out, "img {}x{}", img.width, img.height).unwrap();
        for (ini, lo) in [(20, 7), (40, 5), (12, 12), (7, 20), (20, 0), (0, 0), (1, 1)] {
            for nms in [false, true] {
                for cell in [1, 8, 16, 30, 64] {
                    if cell == 1 && img.width * img.height > 300 * 300 {
                        continue;
                    }
                    for border in [0, 3, 19, 31] {
                        let got = cells::fast_in_cells(img, ini, lo, nms, cell, border);
                        writeln!(
                            out,
                            "{ini} {lo} {nms} {cell} {border}: {} corners",
                            got.len()
                        )
                        .unwrap();
                        for c in got {
                            writeln!(
                                out,
                                "{} {} {} {:08x}",
                                c.x,
                                c.y,
                                c.fast_score,
                                c.response.to_bits()
                            )
                            .unwrap();
                        }
                    }
                }
            }
        }
    }
}

fn main() {
    let Some(args) = common::args_unless_dump(dump) else {
        return;
    };
    let root = common::root();
    let runs = common::runs_arg(&args, 11);
    let mut srcs = vec![("graf1".to_string(), root.join("tests/data/graf1.png"))];
    if let Ok(dir) = std::fs::read_dir(root.join("bench-data")) {
        let mut photos: Vec<_> = dir
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
            .collect();
        photos.sort();
        for p in photos
            .into_iter()
            .take(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3))
        {
            srcs.push((p.file_stem().unwrap().to_string_lossy().into_owned(), p));
        }
    }
    for (name, path) in srcs {
        let src = load_gray(&path).unwrap();
        for (w, h) in [(1280, 720), (1920, 1080)] {
            let img = tile(&src, w, h);
            let n = cells::fast_in_cells(&img, 20, 7, true, 30, 19).len();
            let cells = median_ms(runs, || {
                std::hint::black_box(cells::fast_in_cells(&img, 20, 7, true, 30, 19));
            });
            let plain = median_ms(runs, || {
                std::hint::black_box(fast::detect(&img, 7, true));
            });
            let plain_no = median_ms(runs, || {
                std::hint::black_box(fast::detect(&img, 7, false));
            });
            println!(
                "{name} ({}x{}) {w}x{h}: fast_in_cells(20,7,nms,30,19) {cells:.3} ms ({n} corners); \
                 fast::detect t7 nms {plain:.3} ms, no nms {plain_no:.3} ms",
                src.width, src.height
            );
        }
    }
}
