//! Lifts pixels through a camodocal camera file as our tracker does with `track.lifting:
//! camodocal` (what VINS keeps: `cv::Point2f(x / z, y / z)`), printing each float's bit
//! pattern: the other half of scripts/lift_parity.py, which compares it with camodocal's
//! own `liftProjective` (scripts/vins/lift_harness.cpp).
//!
//!   cargo run --release --example lift -- CAMERA.yaml < points.txt > lifted.txt
//! points.txt: "u v" per line; lifted.txt: "xbits ybits" in hex per line.

use std::io::{BufRead, Write};

use gpu_features::camera::{camodocal, Lifting};
use nalgebra::Point2;

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        eprintln!("usage: lift CAMERA.yaml < points");
        std::process::exit(2)
    });
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    let cam = camodocal::from_yaml(&text)
        .unwrap_or_else(|e| {
            eprintln!("{path}: {e}");
            std::process::exit(1)
        })
        .lifted(Lifting::Camodocal);
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let v: Vec<f64> = line
            .split_whitespace()
            .filter_map(|s| s.parse().ok())
            .collect();
        if v.len() != 2 {
            continue;
        }
        let p = cam
            .undistort(Point2::new(v[0], v[1]))
            .unwrap_or(Point2::new(f64::NAN, f64::NAN));
        writeln!(
            out,
            "{:08x} {:08x}",
            (p.x as f32).to_bits(),
            (p.y as f32).to_bits()
        )
        .unwrap();
    }
}
