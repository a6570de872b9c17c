//! CPU speed of the pyramid and Canny stages (single thread), median of N runs.
//!
//! `cargo run --release --example cpu_stages [runs]` times `pyramid::build` (8 levels,
//! scale 1.2, both interpolations) and `canny::canny` (L1 / L2, without and with a 5x5
//! Gaussian pre-blur, thresholds 50 / 150) on tests/data/graf1.png (800x640) and on a
//! mirror-tiled 1920x1080 version of it, plus the Canny sub-stages (blur, Sobel, NMS,
//! hysteresis) on their own.
//!
//! `cargo run --release --example cpu_stages -- dump FILE` writes every output bit (as
//! 64-bit hashes) of a sweep of images and parameters to FILE, to compare two builds: all
//! fixtures and ~80 random images of 1..300 px sides (odd included), pyramids and single
//! resizes (down and up) in both interpolations, Canny L1/L2 at several thresholds with
//! blur sizes 0/3/5/7, and the intermediate Sobel / NMS maps.

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::io::Write;
use std::path::Path;

use gpu_features::config::{CannyConfig, Interpolation};
use gpu_features::cpu::blur::{gaussian_blur, BlurScratch};
use gpu_features::cpu::canny::{
    canny, hysteresis, nms_classify, sobel_magnitude, thresholds, CannyScratch, Gradients,
};
use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::pyramid;
use gpu_features::GrayImage;

#[path = "common/mod.rs"]
mod common;
use common::{median_ms, tile};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        common::xorshift(&mut self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        (self.next() >> 11) % n
    }
}

/// Random content of a few kinds: white noise, few levels, smooth ramps with noise, blocks.
fn random_image(w: usize, h: usize, rng: &mut Rng) -> GrayImage {
    let kind = rng.below(4);
    let mut data = Vec::with_capacity(w * h);
    let (a, b) = (rng.below(7) as usize + 1, rng.below(5) as usize + 1);
    for y in 0..h {
        for x in 0..w {
            let r = rng.next() >> 24;
            let v = match kind {
                0 => r & 0xFF,
                1 => (r % 3) * 127,
                2 => ((x * a + y * b) as u64 * 3 + (r & 15)) & 0xFF,
                _ => {
                    if ((x / (a + 2)) + (y / (b + 2))) % 2 == 0 {
                        230
                    } else {
                        20 + (r & 7)
                    }
                }
            };
            data.push(v as u8);
        }
    }
    GrayImage::from_vec(w, h, data).unwrap()
}

fn cfg(lo: f64, hi: f64, l2: bool, blur_ksize: u32, blur_sigma: f64) -> CannyConfig {
    CannyConfig {
        enabled: true,
        low_threshold: lo,
        high_threshold: hi,
        l2_gradient: l2,
        blur_ksize,
        blur_sigma,
    }
}

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(b);
    h.finish()
}

fn hash_i16(v: &[i16]) -> u64 {
    let mut h = DefaultHasher::new();
    for x in v {
        h.write_i16(*x);
    }
    h.finish()
}

fn hash_i32(v: &[i32]) -> u64 {
    let mut h = DefaultHasher::new();
    for x in v {
        h.write_i32(*x);
    }
    h.finish()
}

/// The pyramids (both interpolations, three scales) and four resizes of `img` to sizes drawn
/// from `rng`, as lines of `out`.
fn dump_pyramids(out: &mut impl Write, img: &GrayImage, rng: &mut Rng) {
    let (w, h) = (img.width, img.height);
    for interp in [Interpolation::Linear, Interpolation::LinearExact] {
        for scale in [1.2f32, 1.5, 2.0] {
            let mut levels = vec![img.clone()];
            pyramid::build(
                &mut levels,
                8,
                gpu_features::levels::Scales::Orb,
                scale,
                interp,
            );
            for l in &levels[1..] {
                writeln!(
                    out,
                    "pyr {interp:?} {scale} {}x{} {:016x}",
                    l.width,
                    l.height,
                    hash_bytes(&l.data)
                )
                .unwrap();
            }
        }
        // Single resizes to random sizes, down and up.
        for _ in 0..4 {
            let dw = (rng.below(2 * w as u64 + 3) as usize + 1).min(700);
            let dh = (rng.below(2 * h as u64 + 3) as usize + 1).min(700);
            let mut dst = GrayImage::new(dw, dh);
            pyramid::resize_linear(img, &mut dst, interp);
            writeln!(
                out,
                "resize {interp:?} {dw}x{dh} {:016x}",
                hash_bytes(&dst.data)
            )
            .unwrap();
        }
    }
}

fn dump(path: &str, root: &Path) {
    let mut imgs = Vec::new();
    let names = common::fixture_paths(root);
    for p in &names {
        imgs.push(load_gray(p).unwrap());
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for &(w, h) in &[(1, 1), (1, 7), (7, 1), (2, 2), (3, 3), (2, 5), (17, 2)] {
        imgs.push(random_image(w, h, &mut rng));
    }
    for _ in 0..80 {
        let w = rng.below(300) as usize + 1;
        let h = rng.below(300) as usize + 1;
        imgs.push(random_image(w, h, &mut rng));
    }
    let n_fixtures = names.len();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut scratch = CannyScratch::default();
    let mut edges = GrayImage::default();
    let mut grad = Gradients::default();
    let mut class = Vec::new();
    for (idx, img) in imgs.iter().enumerate() {
        let (w, h) = (img.width, img.height);
        writeln!(out, "img {idx} {w}x{h} {:016x}", hash_bytes(&img.data)).unwrap();
        dump_pyramids(&mut out, img, &mut rng);
        // Canny.
        let threshold_sets: &[(f64, f64)] = if idx < n_fixtures {
            &[(50.0, 150.0), (10.0, 40.0), (100.0, 300.0)]
        } else {
            &[
                (50.0, 150.0),
                (10.0, 40.0),
                (0.0, 0.0),
                (300.0, 100.0),
                (1.0, 1e9),
            ]
        };
        for l2 in [false, true] {
            for &(lo, hi) in threshold_sets {
                for (k, sigma) in [(0u32, 0.0f64), (3, 0.0), (5, 0.0), (7, 0.0), (5, 1.7)] {
                    let c = cfg(lo, hi, l2, k, sigma);
                    canny(img, &c, &mut edges, &mut scratch);
                    writeln!(
                        out,
                        "canny {lo} {hi} {l2} {k} {sigma} {:016x}",
                        hash_bytes(&edges.data)
                    )
                    .unwrap();
                }
            }
            // Intermediates, as the public stage functions give them.
            sobel_magnitude(img.view(), l2, &mut grad);
            writeln!(
                out,
                "sobel {l2} {:016x} {:016x} {:016x}",
                hash_i16(&grad.dx),
                hash_i16(&grad.dy),
                hash_i32(&grad.mag)
            )
            .unwrap();
            let (lo, hi) = thresholds(&cfg(20.0, 60.0, l2, 0, 0.0));
            nms_classify(&grad, lo, hi, &mut class);
            writeln!(out, "nms {l2} {:016x}", hash_bytes(&class)).unwrap();
            let mut stack = Vec::new();
            hysteresis(w, h, &mut class, &mut stack, &mut edges);
            writeln!(
                out,
                "hyst {l2} {:016x} {:016x}",
                hash_bytes(&class),
                hash_bytes(&edges.data)
            )
            .unwrap();
        }
        for k in [3usize, 5, 7, 9, 11] {
            let mut b = GrayImage::default();
            gaussian_blur(img, k, 0.0, &mut b, &mut BlurScratch::default());
            writeln!(out, "blur {k} {:016x}", hash_bytes(&b.data)).unwrap();
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
    for (name, img) in [("800x640", &graf), ("1920x1080", &big)] {
        let mut levels = vec![img.clone()];
        let mut line = format!("{name}: pyramid 8x1.2");
        for interp in [Interpolation::Linear, Interpolation::LinearExact] {
            let t = median_ms(runs, || {
                pyramid::build(
                    &mut levels,
                    8,
                    gpu_features::levels::Scales::Orb,
                    1.2,
                    interp,
                );
                std::hint::black_box(&levels);
            });
            line += &format!(" {interp:?} {t:.3} ms");
        }
        println!("{line}");
        let mut scratch = CannyScratch::default();
        let mut out = GrayImage::default();
        let mut line = format!("{name}: canny 50/150");
        for (label, l2, k) in [
            ("L1", false, 0),
            ("L2", true, 0),
            ("L1+blur5", false, 5),
            ("L2+blur5", true, 5),
        ] {
            let c = cfg(50.0, 150.0, l2, k, 0.0);
            let t = median_ms(runs, || {
                canny(img, &c, &mut out, &mut scratch);
                std::hint::black_box(&out);
            });
            line += &format!(" {label} {t:.3} ms");
        }
        println!("{line}");
        // Sub-stages (L2, thresholds 50/150).
        let mut blurred = GrayImage::default();
        let mut bs = BlurScratch::default();
        let tb = median_ms(runs, || {
            gaussian_blur(img, 5, 0.0, &mut blurred, &mut bs);
        });
        let mut g = Gradients::default();
        let ts = median_ms(runs, || sobel_magnitude(img.view(), true, &mut g));
        let (lo, hi) = thresholds(&cfg(50.0, 150.0, true, 0, 0.0));
        let mut class = Vec::new();
        let tn = median_ms(runs, || nms_classify(&g, lo, hi, &mut class));
        let mut stack = Vec::new();
        let mut cls2 = class.clone();
        let th = median_ms(runs, || {
            cls2.copy_from_slice(&class);
            hysteresis(img.width, img.height, &mut cls2, &mut stack, &mut out);
        });
        println!(
            "{name}: stages blur5 {tb:.3} ms, sobel+mag(L2) {ts:.3} ms, nms {tn:.3} ms, \
             hysteresis {th:.3} ms (incl. class copy)"
        );
    }
}
