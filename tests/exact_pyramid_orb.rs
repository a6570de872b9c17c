//! Pyramid, orientation and the ORB level loop against OpenCV 5.0 goldens
//! (`scripts/gen_golden.py`).

use std::collections::HashMap;
use std::time::Instant;

use gpu_features::config::{Interpolation, ScoreType, Spread};
use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::{detect_keypoints, orient, pyramid};
use gpu_features::{Config, GrayImage};

mod shared;
use shared::{golden, gray, FIXTURES};

const EXACT_FIXTURES: [&str; 3] = ["camera", "coffee_odd", "graf1"];

/// Rows of a golden CSV as f64 columns (header skipped).
fn csv(stem: &str, file: &str) -> Vec<Vec<f64>> {
    let text = std::fs::read_to_string(golden(stem, file)).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect()
}

/// (max |diff|, differing pixels) of two same-size images.
fn diff(a: &GrayImage, b: &GrayImage) -> (u8, usize) {
    assert_eq!((a.width, a.height), (b.width, b.height));
    a.data.iter().zip(&b.data).fold((0, 0), |(m, n), (&p, &q)| {
        (m.max(p.abs_diff(q)), n + (p != q) as usize)
    })
}

fn check_pyramid(stems: &[&str], interp: Interpolation, tag: &str) {
    let mut worst = 0;
    let mut total = 0;
    let mut size_mismatch = Vec::new();
    for stem in stems {
        let mut levels = vec![gray(stem)];
        pyramid::build(&mut levels, 8, pyramid::Scales::Orb, 1.2, interp);
        // Chain `resize_linear` through the goldens' sizes (each level from our previous one:
        // drift would compound), and check that `build` gives the same images and sizes.
        let mut prev = levels[0].clone();
        let mut same_sizes = true;
        for (i, built) in levels.iter().enumerate().skip(1) {
            let want = load_gray(&golden(stem, &format!("pyr_{tag}_{i}.png"))).unwrap();
            let mut ours = GrayImage::new(want.width, want.height);
            pyramid::resize_linear(&prev, &mut ours, interp);
            let (max, count) = diff(&ours, &want);
            if count > 0 {
                println!("{stem} {tag} level {i}: max diff {max}, {count} pixels differ");
            }
            worst = worst.max(max);
            total += count;
            same_sizes &= (want.width, want.height) == (built.width, built.height);
            if same_sizes {
                assert!(*built == ours, "{stem} level {i}: build != resize chain");
            } else {
                size_mismatch.push(format!("{stem}/{i}"));
            }
            prev = ours;
        }
    }
    println!("{tag}: max diff {worst}, {total} differing pixels over all fixtures and levels");
    assert_eq!((worst, total), (0, 0), "{tag} pyramid is not bit-exact");
    // gen_golden.py sizes levels as ORB does (float 1.2f widened to double).
    assert_eq!(size_mismatch, Vec::<String>::new());
}

#[test]
fn pyramid_linear_is_bit_exact_with_opencv() {
    check_pyramid(&FIXTURES, Interpolation::Linear, "linear");
}

#[test]
fn pyramid_linear_exact_is_bit_exact_with_opencv() {
    check_pyramid(&EXACT_FIXTURES, Interpolation::LinearExact, "exact");
}

#[test]
fn pyramid_1920x1080_sizes_and_timing() {
    // A full-HD frame tiled from a fixture (content matters little for the timing).
    let src = gray("graf1");
    let (w, h) = (1920, 1080);
    let data = (0..w * h)
        .map(|i| src.get((i % w) % src.width, (i / w) % src.height))
        .collect();
    let mut levels = vec![GrayImage::from_vec(w, h, data).unwrap()];
    // OpenCV ORB's level sizes for 1920x1080 (cv2, 8 levels, 1.2).
    let want = [
        (1920, 1080),
        (1600, 900),
        (1333, 750),
        (1111, 625),
        (926, 521),
        (772, 434),
        (643, 362),
        (536, 301),
    ];
    for interp in [Interpolation::Linear, Interpolation::LinearExact] {
        pyramid::build(&mut levels, 8, pyramid::Scales::Orb, 1.2, interp); // warm-up: allocations
        let runs = 10;
        let t = Instant::now();
        for _ in 0..runs {
            pyramid::build(&mut levels, 8, pyramid::Scales::Orb, 1.2, interp);
        }
        let ms = t.elapsed().as_secs_f64() * 1e3 / runs as f64;
        println!("pyramid 1920x1080, 8 levels, {interp:?}: {ms:.2} ms");
        let sizes: Vec<_> = levels.iter().map(|l| (l.width, l.height)).collect();
        assert_eq!(sizes, want);
    }
}

#[test]
fn orientation_is_bit_exact_at_opencv_keypoints() {
    // IC_Angle alone, at the positions OpenCV's single-level ORB reported.
    let umax = orient::circle_extents(15);
    let mut n = 0;
    for stem in FIXTURES {
        let img = gray(stem);
        for r in csv(stem, "orb_l1.csv") {
            let (x, y, angle) = (r[0] as u32, r[1] as u32, r[3] as f32);
            let got = orient::ic_angle(&img, x, y, &umax);
            assert_eq!(
                got.to_bits(),
                angle.to_bits(),
                "{stem} ({x},{y}): {got} vs {angle}"
            );
            n += 1;
        }
    }
    assert!(n > 10_000, "only {n} keypoints checked");
}

/// OpenCV `ORB_create(nfeatures, 1.2, levels, 31, 0, 2, HARRIS_SCORE, 31, 20)`.
fn orb_config(levels: u32, max_keypoints: u32) -> Config {
    let mut cfg = Config::default();
    cfg.pyramid.levels = levels;
    cfg.pyramid.scale_factor = 1.2;
    cfg.pyramid.interpolation = Interpolation::LinearExact;
    cfg.detector.fast_threshold = 20;
    cfg.detector.nonmax_suppression = true;
    cfg.detector.border = 31;
    cfg.detector.score = ScoreType::Harris;
    cfg.detector.harris_block_size = 7;
    cfg.detector.harris_k = 0.04;
    cfg.select.max_keypoints = max_keypoints;
    cfg.select.spread = Spread::None;
    cfg.orient.enabled = true;
    cfg.orient.patch_size = 31;
    cfg.canny.enabled = false;
    cfg.validate().unwrap();
    cfg
}

fn pyramid_of(stem: &str, cfg: &Config) -> Vec<GrayImage> {
    let mut levels = vec![gray(stem)];
    pyramid::build(
        &mut levels,
        cfg.pyramid.levels as usize,
        cfg.pyramid.scales,
        cfg.pyramid.scale_factor,
        cfg.pyramid.interpolation,
    );
    levels
}

#[test]
fn orb_single_level_matches_opencv() {
    // No budget: every FAST corner off the border, Harris response and angle.
    let cfg = orb_config(1, 0);
    let (mut checked, mut exact_resp) = (0usize, 0usize);
    for stem in FIXTURES {
        let kps = detect_keypoints(&cfg, &pyramid_of(stem, &cfg));
        let want = csv(stem, "orb_l1.csv");
        let mut ours: HashMap<(u32, u32), _> = HashMap::new();
        for k in &kps {
            ours.insert((k.x as u32, k.y as u32), k);
            assert_eq!(k.size, 31.0);
            assert_eq!(k.octave, 0);
        }
        assert_eq!(ours.len(), kps.len(), "{stem}: duplicate positions");
        assert_eq!(kps.len(), want.len(), "{stem}: keypoint count");
        for r in &want {
            let (x, y) = (r[0] as u32, r[1] as u32);
            let k = ours
                .get(&(x, y))
                .unwrap_or_else(|| panic!("{stem}: OpenCV keypoint ({x},{y}) missing"));
            // Angles: exact (same integer moments, same float polynomial).
            assert_eq!(
                k.angle.to_bits(),
                (r[3] as f32).to_bits(),
                "{stem} ({x},{y})"
            );
            let (got, exp) = (k.response as f64, r[2]);
            exact_resp += (k.response == exp as f32) as usize;
            checked += 1;
            assert!(
                (got - exp).abs() <= 1e-5 * exp.abs().max(1e-12),
                "{stem} ({x},{y}): response {got} vs {exp}"
            );
        }
    }
    println!("orb_l1: {checked} keypoints, {exact_resp} with a bit-exact response");
}

#[test]
fn orb_default_reproduces_opencv() {
    // cv::ORB_create() defaults: nfeatures = 500, 8 levels, 1.2, Harris, 31/31/20.
    check_orb(&orb_config(8, 500), "orb_default.csv");
}

#[test]
fn opencv_orb_preset_reproduces_orb_2000() {
    let path = format!("{}/config/opencv_orb.yaml", env!("CARGO_MANIFEST_DIR"));
    let cfg = gpu_features::Config::from_file(std::path::Path::new(&path)).unwrap();
    check_orb(&cfg, "orb_2000.csv");
}

fn check_orb(cfg: &gpu_features::Config, golden: &str) {
    //
    // Measured: every OpenCV keypoint of every fixture is reproduced, bit for bit in x, y
    // (level-0 coordinates), octave, angle and size, with the same count, so this asserts
    // equality. What it takes (each was a measured miss before):
    // - level scales from the float factor widened to double, as ORB's float API does
    //   (`pyramid::level_scale`); the double 1.2 moves every keypoint of octaves 3..7;
    // - the pre-Harris cut keeps every tie of the 2n-th FAST score as OpenCV's retainBest
    //   does (with exactly 2n kept: 4851/4908 = 98.8%).
    // Still different by design: the final cut on the Harris score keeps exactly n (ties by
    // (y, x)) where OpenCV keeps all ties; no fixture has a Harris tie at the cut.
    let (mut matched, mut total, mut bit_exact_response) = (0usize, 0usize, 0usize);
    for stem in FIXTURES {
        let kps = detect_keypoints(cfg, &pyramid_of(stem, cfg));
        let want = csv(stem, golden);
        // Exact key: level-0 coordinates as f32 bits, octave, angle bits, size bits.
        let key = |x: f32, y: f32, o: i32, a: f32, s: f32| {
            (x.to_bits(), y.to_bits(), o, a.to_bits(), s.to_bits())
        };
        let ours: HashMap<_, f32> = kps
            .iter()
            .map(|k| (key(k.x, k.y, k.octave, k.angle, k.size), k.response))
            .collect();
        let mut hit = 0;
        for r in &want {
            let k = key(
                r[0] as f32,
                r[1] as f32,
                r[5] as i32,
                r[3] as f32,
                r[4] as f32,
            );
            if let Some(&resp) = ours.get(&k) {
                hit += 1;
                let exp = r[2];
                assert!(
                    (resp as f64 - exp).abs() <= 1e-5 * exp.abs(),
                    "{stem} {r:?}: response {resp}"
                );
                bit_exact_response += (resp == exp as f32) as usize;
            }
        }
        println!(
            "{stem}: {hit}/{} OpenCV keypoints reproduced exactly ({} ours)",
            want.len(),
            kps.len()
        );
        assert_eq!(kps.len(), want.len(), "{stem}: keypoint count");
        matched += hit;
        total += want.len();
    }
    println!(
        "{golden}: {matched}/{total} reproduced, {bit_exact_response} with a bit-exact response"
    );
    assert_eq!(matched, total, "OpenCV ORB keypoints not reproduced");
}

#[test]
fn orb_slam3_style_budget_border_and_spread() {
    // ORB-SLAM3-like: per-cell FAST with the low-threshold retry, quadtree, FAST score.
    let mut cfg = orb_config(8, 1000);
    cfg.pyramid.interpolation = Interpolation::Linear;
    cfg.detector.border = 19;
    cfg.detector.low_threshold_retry = true;
    cfg.detector.min_fast_threshold = 7;
    cfg.detector.score = ScoreType::Fast;
    cfg.select.spread = Spread::Quadtree;
    cfg.validate().unwrap();
    let per_level = gpu_features::select::features_per_level(1000, 8, 1.2);
    let mut none_cfg = cfg.clone();
    none_cfg.select.spread = Spread::None;
    for stem in ["graf1", "left01", "box"] {
        let levels = pyramid_of(stem, &cfg);
        let kps = detect_keypoints(&cfg, &levels);
        assert_eq!(
            kps,
            detect_keypoints(&cfg, &levels),
            "{stem}: not deterministic"
        );
        for (l, img) in levels.iter().enumerate() {
            let on_level: Vec<_> = kps.iter().filter(|k| k.octave == l as i32).collect();
            // ORB-SLAM3's DistributeOctTree stops on the first split that reaches the
            // budget, so up to two more nodes than asked (its keypoints are checked against
            // ORB-SLAM3's own code by scripts/orb-slam3/extractor_parity.py).
            assert!(
                on_level.len() <= per_level[l] + 2,
                "{stem} level {l}: over budget"
            );
            let s = pyramid::level_scale(pyramid::Scales::Orb, 1.2, l);
            for k in on_level {
                let (x, y) = ((k.x / s).round() as usize, (k.y / s).round() as usize);
                assert!(
                    (19..img.width - 19).contains(&x) && (19..img.height - 19).contains(&y),
                    "{stem} level {l}: ({x},{y}) inside the border"
                );
            }
        }
        // Same candidates, spread none (a config `validate` rejects, fine for a comparison):
        // the quadtree covers more 16x16 blocks of level 0.
        let none = detect_keypoints(&none_cfg, &levels);
        let blocks = |v: &[gpu_features::Keypoint]| {
            let mut b: Vec<_> = v
                .iter()
                .filter(|k| k.octave == 0)
                .map(|k| (k.x as u32 / 16, k.y as u32 / 16))
                .collect();
            b.sort_unstable();
            b.dedup();
            b.len()
        };
        println!(
            "{stem}: level-0 blocks covered: quadtree {}, none {}",
            blocks(&kps),
            blocks(&none)
        );
        assert!(
            blocks(&kps) > blocks(&none),
            "{stem}: quadtree does not spread"
        );
    }
}
