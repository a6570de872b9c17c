//! Equalises 8-bit gray PGM images with our CLAHE (`cpu::clahe`, clip and grid as given)
//! and writes them as PGM: the other half of scripts/clahe_parity.py, which compares them
//! with OpenCV's (`scripts/vins/track_harness.cpp --clahe`).
//!
//!   cargo run --release --example clahe -- CLIP TILES IN.pgm OUT.pgm [IN.pgm OUT.pgm ...]

use gpu_features::cpu::clahe::{clahe, ClaheScratch};
use gpu_features::image::GrayImage;

fn read_pgm(path: &str) -> Result<GrayImage, String> {
    let b = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    // "P5" w h 255, each separated by whitespace, then one whitespace byte and the pixels.
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        if start == i {
            return Err(format!("{path}: not a binary PGM"));
        }
        fields.push(String::from_utf8_lossy(&b[start..i]).to_string());
    }
    let num = |s: &str| {
        s.parse::<usize>()
            .map_err(|_| format!("{path}: bad header"))
    };
    let (w, h) = (num(&fields[1])?, num(&fields[2])?);
    if fields[0] != "P5" || num(&fields[3])? != 255 || b.len() < i + 1 + w * h {
        return Err(format!("{path}: not an 8-bit binary PGM"));
    }
    Ok(GrayImage {
        width: w,
        height: h,
        data: b[i + 1..i + 1 + w * h].to_vec(),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 || args.len() % 2 != 0 {
        eprintln!("usage: clahe CLIP TILES IN.pgm OUT.pgm [IN.pgm OUT.pgm ...]");
        std::process::exit(2);
    }
    let clip: f64 = args[0].parse().expect("CLIP");
    let tiles: usize = args[1].parse().expect("TILES");
    let (mut out, mut s) = (GrayImage::default(), ClaheScratch::default());
    for pair in args[2..].chunks(2) {
        let img = read_pgm(&pair[0]).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        clahe(&img, clip, tiles, &mut out, &mut s);
        let mut bytes = format!("P5\n{} {}\n255\n", out.width, out.height).into_bytes();
        bytes.extend_from_slice(&out.data);
        std::fs::write(&pair[1], bytes).unwrap_or_else(|e| {
            eprintln!("{}: {e}", pair[1]);
            std::process::exit(1)
        });
    }
}
