//! `cpu::canny` against OpenCV: every fixture's Canny goldens pixel for pixel, small
//! synthetic cases pinned to OpenCV results (degenerate sizes, threshold quirks, blur
//! kernels), and hysteresis connectivity against an independent naive BFS.
//!
//! The synthetic expectations (`CANNY_CASES`, `BLUR_CASES`) are `(edge count, FNV-1a 64 of
//! the output bytes)` from opencv-python 5.0.0 (`cv2.setNumThreads(1)`), computed on the
//! images built by `lcg_image`, `checker` and `spiral` below, mirrored in Python as:
//!
//! ```python
//! e = cv2.Canny(cv2.GaussianBlur(img, (k, k), sigma) if k else img, lo, hi,
//!               apertureSize=3, L2gradient=l2)
//! b = cv2.GaussianBlur(img, (k, k), sigma)
//! ```

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Instant;

use gpu_features::config::CannyConfig;
use gpu_features::cpu::blur::{gaussian_blur, gaussian_kernel_fixed, BlurScratch};
use gpu_features::cpu::canny::{
    canny, canny_banded, hysteresis, nms_classify, sobel_magnitude, thresholds, CannyScratch,
    Gradients, NONE, STRONG, WEAK,
};
use gpu_features::GrayImage;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Gray PNGs load as L8 unchanged (no colour conversion involved).
fn load_png(path: &Path) -> GrayImage {
    let img = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_luma8();
    let (w, h) = img.dimensions();
    GrayImage::from_vec(w as usize, h as usize, img.into_raw()).unwrap()
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

fn run(img: &GrayImage, c: &CannyConfig) -> GrayImage {
    let mut out = GrayImage::default();
    canny(img, c, &mut out, &mut CannyScratch::default());
    out
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

fn count(img: &GrayImage) -> usize {
    img.data.iter().filter(|&&v| v != 0).count()
}

/// Noise (0..63, from a 32-bit LCG) on a 150-step checkerboard of 8x8 blocks.
fn lcg_image(w: usize, h: usize, seed: u32) -> GrayImage {
    let mut s = seed;
    let mut img = GrayImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            let base = if (x / 8 + y / 8) % 2 == 0 { 0 } else { 150 };
            img.data[y * w + x] = base + ((s >> 24) & 63) as u8;
        }
    }
    img
}

/// Noise-free 0/100 checkerboard of 8x8 blocks: plateaus of exactly tied magnitudes.
fn checker(w: usize, h: usize) -> GrayImage {
    let mut img = GrayImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            img.data[y * w + x] = if (x / 8 + y / 8) % 2 == 1 { 100 } else { 0 };
        }
    }
    img
}

/// A 1-pixel square spiral line (value 40, weak edges) on 0 in a 128x128 image, whose
/// first 6 pixels are 200 (strong edges): one strong seed, then thousands of weak pixels.
fn spiral() -> GrayImage {
    let n = 128;
    let mut img = GrayImage::new(n, n);
    let (mut x, mut y) = (4i64, 4i64);
    let dirs = [(1, 0), (0, 1), (-1, 0), (0, -1)];
    let mut lengths = vec![120, 120, 120];
    let mut l = 114;
    while l >= 6 {
        lengths.extend([l, l]);
        l -= 6;
    }
    let mut step = 0;
    for (i, &len) in lengths.iter().enumerate() {
        let (dx, dy) = dirs[i % 4];
        for _ in 0..len {
            img.data[y as usize * n + x as usize] = if step < 6 { 200 } else { 40 };
            x += dx;
            y += dy;
            step += 1;
        }
    }
    img
}

fn synthetic(name: &str) -> GrayImage {
    match name {
        "noise" => lcg_image(37, 29, 7),
        "checker" => checker(40, 24),
        "spiral" => spiral(),
        "one" => lcg_image(1, 1, 1),
        "row" => lcg_image(7, 1, 2),
        "col" => lcg_image(1, 7, 3),
        "two" => lcg_image(2, 2, 4),
        "three" => lcg_image(3, 3, 5),
        "uniform" => GrayImage::from_vec(16, 16, vec![77; 256]).unwrap(),
        _ => unreachable!("{name}"),
    }
}

/// Every fixture x every Canny golden of `scripts/gen_golden.py`, pixel for pixel.
#[test]
fn canny_matches_opencv_goldens() {
    let cases = [
        ("canny_50_150_l2.png", cfg(50.0, 150.0, true, 0, 0.0)),
        ("canny_50_150_l1.png", cfg(50.0, 150.0, false, 0, 0.0)),
        ("canny_20_60_l2.png", cfg(20.0, 60.0, true, 0, 0.0)),
        ("canny_100_250_l1.png", cfg(100.0, 250.0, false, 0, 0.0)),
        ("canny_blur5_50_150_l2.png", cfg(50.0, 150.0, true, 5, 0.0)),
    ];
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("gray.png").exists())
        .collect();
    fixtures.sort();
    assert!(fixtures.len() >= 10, "fixtures missing: {fixtures:?}");
    let mut failures = Vec::new();
    let mut checked = 0;
    // One scratch across fixtures of different sizes: reuse must not leak state.
    let mut scratch = CannyScratch::default();
    let mut out = GrayImage::default();
    for dir in &fixtures {
        let gray = load_png(&dir.join("gray.png"));
        for (file, c) in &cases {
            let want = load_png(&dir.join(file));
            canny(&gray, c, &mut out, &mut scratch);
            assert_eq!((out.width, out.height), (want.width, want.height));
            let diff = out
                .data
                .iter()
                .zip(&want.data)
                .filter(|(a, b)| a != b)
                .count();
            if diff > 0 {
                failures.push(format!(
                    "{}/{file}: {diff} differing pixels (ours {} edges, OpenCV {})",
                    dir.file_name().unwrap().to_string_lossy(),
                    count(&out),
                    count(&want)
                ));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, fixtures.len() * cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `(image, low, high, L2, blur ksize, blur sigma, OpenCV edge count, FNV of OpenCV map)`.
#[allow(clippy::type_complexity)]
const CANNY_CASES: &[(&str, f64, f64, bool, u32, f64, usize, u64)] = &[
    ("noise", 50.0, 150.0, true, 0, 0.0, 335, 0xdef2639dd3a4904c),
    ("noise", 50.0, 150.0, false, 0, 0.0, 369, 0xb717506e68a662da),
    // Fractional thresholds: floor(20.5^2), floor(60.7^2).
    ("noise", 20.5, 60.7, true, 0, 0.0, 391, 0x22b903c42480dac8),
    // low > high: OpenCV swaps them (same map as 50/150).
    ("noise", 150.0, 50.0, true, 0, 0.0, 335, 0xdef2639dd3a4904c),
    ("noise", 0.0, 0.0, false, 0, 0.0, 379, 0xf6210ca5c796a08c),
    // An L1 threshold beyond i32 (see `huge_thresholds`).
    ("noise", 10.0, 3e9, false, 0, 0.0, 0, 0x34d622e63423171f),
    ("noise", 3e9, 3e9, false, 0, 0.0, 0, 0x34d622e63423171f),
    ("noise", 30.0, 90.0, true, 3, 0.0, 226, 0x76d630875da29b99),
    ("noise", 30.0, 90.0, true, 5, 0.0, 227, 0x1ca4748eb90acac8),
    ("noise", 30.0, 90.0, false, 7, 1.3, 218, 0xd35d31af3036e017),
    ("noise", 20.0, 60.0, true, 11, 0.0, 241, 0x6fba2e5b46ca5c9c),
    ("noise", 10.0, 30.0, true, 31, 5.0, 42, 0x1fbc31a3dbe14509),
    ("noise", 30.0, 90.0, true, 9, 0.5, 333, 0xaf47be870460db26),
    // Exact magnitude ties (the > / >= rules).
    (
        "checker",
        50.0,
        150.0,
        true,
        0,
        0.0,
        144,
        0xc4e6b629149f4c65,
    ),
    (
        "checker",
        50.0,
        150.0,
        false,
        0,
        0.0,
        144,
        0xc4e6b629149f4c65,
    ),
    (
        "checker",
        300.0,
        500.0,
        false,
        0,
        0.0,
        0,
        0xc42a06f7e7a28e25,
    ),
    (
        "spiral",
        50.0,
        300.0,
        true,
        0,
        0.0,
        5243,
        0x7cedd7e71bad4ddc,
    ),
    // Degenerate sizes (replicated Sobel border, magnitude-0 NMS border).
    ("one", 20.0, 60.0, true, 0, 0.0, 0, 0xaf63bd4c8601b7df),
    ("row", 20.0, 60.0, true, 0, 0.0, 2, 0x83f6fc103590499f),
    ("col", 20.0, 60.0, true, 0, 0.0, 2, 0x5a24bbe0c74370d7),
    ("two", 20.0, 60.0, true, 0, 0.0, 2, 0x988ce9653d8437db),
    ("three", 20.0, 60.0, true, 0, 0.0, 5, 0x2c92c3cb047a97b6),
    ("three", 20.0, 60.0, false, 0, 0.0, 4, 0x6cc34e9af6906439),
    // Blur kernels wider than the image (REFLECT_101 folds more than once).
    ("row", 20.0, 60.0, true, 5, 0.0, 0, 0x778b1a14b6876aa7),
    ("two", 5.0, 10.0, true, 7, 0.0, 0, 0x4d25767f9dce13f5),
    ("three", 5.0, 10.0, false, 5, 0.0, 5, 0x33a0e5e034a0d5ba),
    ("uniform", 0.0, 0.0, true, 0, 0.0, 0, 0xd80ac658736bb725),
    ("uniform", 0.0, 0.0, false, 5, 0.0, 0, 0xd80ac658736bb725),
];

#[test]
fn canny_matches_opencv_on_synthetic_cases() {
    let mut failures = Vec::new();
    for &(name, lo, hi, l2, k, sigma, want_count, want_hash) in CANNY_CASES {
        let img = synthetic(name);
        let out = run(&img, &cfg(lo, hi, l2, k, sigma));
        assert_eq!((out.width, out.height), (img.width, img.height));
        assert!(out.data.iter().all(|&v| v == 0 || v == 255));
        if (count(&out), fnv(&out.data)) != (want_count, want_hash) {
            failures.push(format!(
                "{name} {lo}/{hi} l2={l2} blur {k}/{sigma}: {} edges (OpenCV {want_count}), \
                 hash {:#018x} (OpenCV {want_hash:#018x})",
                count(&out),
                fnv(&out.data)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `(image, ksize, sigma, FNV of cv2.GaussianBlur output)`.
const BLUR_CASES: &[(&str, usize, f64, u64)] = &[
    ("noise", 3, 0.0, 0xb140a18185ab3c4f),
    ("noise", 5, 0.0, 0x043024c1c0c52ef3),
    ("noise", 7, 0.0, 0xe8aaa3c8649f2d6b),
    ("noise", 9, 0.0, 0x7362d83518541eb0),
    ("noise", 11, 0.0, 0xad4b3f45cdaecdae),
    ("noise", 7, 1.3, 0xcc1bfb8801d4f2fe),
    ("noise", 31, 5.0, 0xe995daa6f5a98086),
    ("noise", 9, 0.5, 0x86da2bcc55560063),
    ("noise", 15, 2.2, 0x6ab7de49f88621fc),
    ("noise", 5, 0.8, 0xc4893f1724166942),
    ("row", 5, 0.0, 0xa3acc7af71d76641),
    ("col", 7, 0.0, 0xddaa03a5820657be),
    ("two", 7, 0.0, 0x3833f57439ba7db5),
    ("three", 5, 0.0, 0x99e5db0e90f26248),
    ("one", 3, 0.0, 0xaf63b14c8601a37b),
    ("three", 31, 3.0, 0xef5ab14cd800a4b5),
];

#[test]
fn gaussian_blur_is_bit_exact() {
    let mut failures = Vec::new();
    let mut s = BlurScratch::default();
    let mut out = GrayImage::default();
    for &(name, k, sigma, want) in BLUR_CASES {
        let img = synthetic(name);
        gaussian_blur(&img, k, sigma, &mut out, &mut s);
        if fnv(&out.data) != want {
            failures.push(format!("{name} k={k} sigma={sigma}: {:?}", out.data));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The fixed-point kernels always sum to exactly 1.0 (256).
    for k in (1..=31).step_by(2) {
        for sigma in [0.0, 0.3, 1.0, 2.5, 8.0] {
            let kern = gaussian_kernel_fixed(k, sigma);
            assert_eq!(kern.iter().sum::<u32>(), 256, "k={k} sigma={sigma}");
        }
    }
    assert_eq!(gaussian_kernel_fixed(5, 0.0), [16, 64, 96, 64, 16]);
}

#[test]
fn threshold_rules() {
    // Swapped, squared for L2 (clamped to 32767 first), floored; out of i32 -> i32::MIN.
    assert_eq!(thresholds(&cfg(150.0, 50.0, true, 0, 0.0)), (2500, 22500));
    assert_eq!(thresholds(&cfg(20.5, 60.7, true, 0, 0.0)), (420, 3684));
    assert_eq!(thresholds(&cfg(50.9, 150.2, false, 0, 0.0)), (50, 150));
    assert_eq!(
        thresholds(&cfg(1e6, 1e6, true, 0, 0.0)),
        (32767 * 32767, 32767 * 32767)
    );
    assert_eq!(thresholds(&cfg(10.0, 3e9, false, 0, 0.0)), (10, i32::MAX));
}

/// L1 thresholds beyond i32 saturate: no edges, as cv2 gives with the golden generator's
/// settings (IPP, one thread). OpenCV's plain C++ path (several threads or IPP off) wraps
/// them to i32::MIN instead and returns the 0/0 map; that overflow is not reproduced.
/// Measured with cv2 on camera: 10/2.2e9 and 3e9/3e9 give 0 edges, 0/0 gives 86922.
#[test]
fn huge_thresholds() {
    let gray = load_png(&golden_dir().join("camera/gray.png"));
    assert_eq!(count(&run(&gray, &cfg(10.0, 2.2e9, false, 0, 0.0))), 0);
    assert_eq!(count(&run(&gray, &cfg(3e9, 3e9, false, 0, 0.0))), 0);
    assert_eq!(count(&run(&gray, &cfg(0.0, 0.0, false, 0, 0.0))), 86922);
    // Just inside i32: still a plain threshold above every magnitude.
    assert_eq!(count(&run(&gray, &cfg(10.0, 2e9, false, 0, 0.0))), 0);
}

/// Naive hysteresis: BFS over (x, y) with explicit bounds checks on an unpadded class map.
/// Returns the edge set and the largest BFS depth reached.
fn naive_hysteresis(w: usize, h: usize, class: &[u8]) -> (Vec<bool>, usize) {
    let mut edge = vec![false; w * h];
    let mut depth = vec![0usize; w * h];
    let mut q = VecDeque::new();
    for i in 0..w * h {
        if class[i] == STRONG {
            edge[i] = true;
            q.push_back(i);
        }
    }
    let mut max_depth = 0;
    while let Some(i) = q.pop_front() {
        let (x, y) = ((i % w) as i64, (i / w) as i64);
        for dy in -1..=1 {
            for dx in -1..=1 {
                let (nx, ny) = (x + dx, y + dy);
                if nx < 0 || ny < 0 || nx >= w as i64 || ny >= h as i64 {
                    continue;
                }
                let n = ny as usize * w + nx as usize;
                if class[n] == WEAK && !edge[n] {
                    edge[n] = true;
                    depth[n] = depth[i] + 1;
                    max_depth = max_depth.max(depth[n]);
                    q.push_back(n);
                }
            }
        }
    }
    (edge, max_depth)
}

/// Unpads a `(w + 2) x (h + 2)` class map.
fn unpad(w: usize, h: usize, padded: &[u8]) -> Vec<u8> {
    (0..h)
        .flat_map(|y| padded[(y + 1) * (w + 2) + 1..(y + 1) * (w + 2) + 1 + w].to_vec())
        .collect()
}

/// The spiral: one strong seed, a weak chain thousands of pixels long winding in all four
/// directions. Any fixed number of propagation passes stops short; the flood fill must
/// reach the end, as OpenCV does (5243 edges) and as the naive BFS does.
#[test]
fn hysteresis_follows_the_whole_spiral() {
    let img = spiral();
    let (w, h) = (img.width, img.height);
    let c = cfg(50.0, 300.0, true, 0, 0.0);
    let mut g = Gradients::default();
    sobel_magnitude(img.view(), true, &mut g);
    let (low, high) = thresholds(&c);
    let mut class = Vec::new();
    nms_classify(&g, low, high, &mut class);
    let classes = unpad(w, h, &class);
    let strong = classes.iter().filter(|&&v| v == STRONG).count();
    let weak = classes.iter().filter(|&&v| v == WEAK).count();
    let (want, depth) = naive_hysteresis(w, h, &classes);
    // The chain is long and mostly weak: a few-pass scheme could not cover it.
    assert!(strong < 50 && weak > 5000, "strong {strong} weak {weak}");
    assert!(depth > 2000, "BFS depth {depth}");

    let mut out = GrayImage::default();
    let mut stack = Vec::new();
    hysteresis(w, h, &mut class, &mut stack, &mut out);
    let diff = (0..w * h)
        .filter(|&i| (out.data[i] == 255) != want[i])
        .count();
    assert_eq!(diff, 0, "{diff} pixels differ from the naive BFS");
    assert_eq!(count(&out), 5243, "OpenCV's edge count");

    // In bands of rows the chain leaves and re-enters every band many times, and most
    // bands hold no strong pixel: the join from the bands' edge rows must give the same map.
    let mut whole = GrayImage::default();
    canny(&img, &c, &mut whole, &mut CannyScratch::default());
    assert_eq!(count(&whole), 5243);
    for bands in [2, 3, 5, 16, 64] {
        let mut got = GrayImage::default();
        canny_banded(&img, &c, &mut got, &mut CannyScratch::default(), bands);
        assert!(got == whole, "bands {bands}: {} edges", count(&got));
    }
}

/// Hysteresis alone on a hand-built class map: a boustrophedon snake of weak pixels (on the
/// image border too) whose far end touches one strong pixel only diagonally, and a separate
/// weak blob that touches nothing and must stay off.
#[test]
fn hysteresis_is_exact_on_a_snake() {
    let (w, h, sw) = (61, 42, 50);
    let mut classes = vec![NONE; w * h];
    // Rows 0, 2, ..., 40 weak over columns 0..sw, joined alternately at the right / left.
    for y in (0..h).step_by(2) {
        classes[y * w..y * w + sw].fill(WEAK);
        if y + 2 < h {
            let x = if (y / 2) % 2 == 0 { sw - 1 } else { 0 };
            classes[(y + 1) * w + x] = WEAK;
        }
    }
    let snake = classes.iter().filter(|&&v| v == WEAK).count();
    // The seed, on the bottom row: touches only the snake's end (sw-1, 40), diagonally.
    classes[41 * w + sw] = STRONG;
    // The isolated blob, 5 columns right of the snake.
    for y in 10..13 {
        classes[y * w + 55..y * w + 59].fill(WEAK);
    }
    let (want, depth) = naive_hysteresis(w, h, &classes);
    assert!(depth > 1000, "BFS depth {depth}");

    let pad = |classes: &[u8]| {
        let mut padded = vec![NONE; (w + 2) * (h + 2)];
        for y in 0..h {
            padded[(y + 1) * (w + 2) + 1..(y + 1) * (w + 2) + 1 + w]
                .copy_from_slice(&classes[y * w..(y + 1) * w]);
        }
        padded
    };
    let mut out = GrayImage::default();
    hysteresis(w, h, &mut pad(&classes), &mut Vec::new(), &mut out);
    let diff = (0..w * h)
        .filter(|&i| (out.data[i] == 255) != want[i])
        .count();
    assert_eq!(diff, 0, "{diff} pixels differ from the naive BFS");
    assert_eq!(count(&out), snake + 1);
    assert!((10..13).all(|y| out.row(y)[55..59].iter().all(|&v| v == 0)));
    // Without the seed nothing is an edge.
    classes[41 * w + sw] = WEAK;
    hysteresis(w, h, &mut pad(&classes), &mut Vec::new(), &mut out);
    assert_eq!(count(&out), 0);
}

#[test]
fn degenerate_inputs() {
    // Empty image: empty map, no panic.
    let out = run(&GrayImage::default(), &CannyConfig::default());
    assert_eq!((out.width, out.height, out.data.len()), (0, 0, 0));
    // Uniform images have no gradient, whatever the thresholds.
    for (w, h) in [(1, 1), (1, 9), (9, 1), (2, 2), (16, 16)] {
        let img = GrayImage::from_vec(w, h, vec![200; w * h]).unwrap();
        for l2 in [false, true] {
            let out = run(&img, &cfg(0.0, 0.0, l2, 0, 0.0));
            assert_eq!((out.width, out.height), (w, h));
            assert_eq!(count(&out), 0, "{w}x{h} l2={l2}");
        }
    }
    // low > high is swapped, on a real image too.
    let gray = load_png(&golden_dir().join("box/gray.png"));
    assert_eq!(
        run(&gray, &cfg(150.0, 50.0, false, 0, 0.0)),
        run(&gray, &cfg(50.0, 150.0, false, 0, 0.0))
    );
}

/// Scratch reuse across resolutions and configs gives the same maps as fresh scratch.
#[test]
fn scratch_reuse_is_stateless() {
    let big = load_png(&golden_dir().join("graf1/gray.png"));
    let small = synthetic("three");
    let noise = synthetic("noise");
    let mut s = CannyScratch::default();
    let mut out = GrayImage::default();
    for (img, c) in [
        (&big, cfg(50.0, 150.0, true, 0, 0.0)),
        (&small, cfg(20.0, 60.0, true, 0, 0.0)),
        (&noise, cfg(30.0, 90.0, false, 7, 1.3)),
        (&big, cfg(50.0, 150.0, true, 5, 0.0)),
        (&noise, cfg(30.0, 90.0, true, 5, 0.0)),
        (&big, cfg(20.0, 60.0, false, 0, 0.0)),
    ] {
        canny(img, &c, &mut out, &mut s);
        assert_eq!(out, run(img, &c));
    }
}

/// Timing on an 800x640 fixture (run with `--ignored --nocapture`); still checks the map.
#[test]
#[ignore]
fn time_canny_800x640() {
    let gray = load_png(&golden_dir().join("graf1/gray.png"));
    assert_eq!((gray.width, gray.height), (800, 640));
    for (file, c) in [
        ("canny_50_150_l2.png", cfg(50.0, 150.0, true, 0, 0.0)),
        ("canny_blur5_50_150_l2.png", cfg(50.0, 150.0, true, 5, 0.0)),
    ] {
        let mut s = CannyScratch::default();
        let mut out = GrayImage::default();
        canny(&gray, &c, &mut out, &mut s);
        let n = 50;
        let t = Instant::now();
        for _ in 0..n {
            canny(&gray, &c, &mut out, &mut s);
        }
        let ms = t.elapsed().as_secs_f64() * 1e3 / n as f64;
        println!("{file}: {ms:.3} ms per frame");
        assert_eq!(out, load_png(&golden_dir().join("graf1").join(file)));
    }
}
