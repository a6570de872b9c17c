//! The CUDA backend against the CPU reference on the real fixtures in tests/data: decode
//! (every encoding), pyramid, FAST + NMS + Harris score + orientation (every candidate, then
//! with ORB's budget), and Canny (L1/L2, several thresholds, with blur). Everything must be
//! identical, floats bit for bit.
//!
//! Without a usable GPU each test prints `SKIPPED: no CUDA device: <reason>` and returns.
#![cfg(feature = "cuda")]

use std::path::{Path, PathBuf};

use gpu_features::config::{Config, DetectorMethod, Interpolation, ScoreType, Spread, ZeroCopy};
use gpu_features::cpu::CpuPipeline;
use gpu_features::cuda::CudaPipeline;
use gpu_features::features::AFTER_DECODE_STAGE;
use gpu_features::image::{load_view_owned, Encoding, GrayImage, ImageView, OwnedFrame};
use gpu_features::{BackendChoice, Features, Pipeline};
use shared::kp_bits;

mod shared;
#[path = "../src/cuda/test_images.rs"]
mod test_images;

fn gpu(test: &str) -> Option<CudaPipeline> {
    match CudaPipeline::new() {
        Ok(p) => {
            let m = &p.gpu().module;
            eprintln!(
                "{test}: {} ({}, kernels {} in {:.1} ms)",
                p.gpu().name,
                m.arch,
                if m.from_cache {
                    "from cache"
                } else {
                    "compiled"
                },
                m.ms
            );
            Some(p)
        }
        Err(e) => {
            shared::skip_without_gpu(test, &e);
            None
        }
    }
}

fn fixtures() -> Vec<(String, OwnedFrame)> {
    // The test binary may run from a copy of the repository on the GPU machine.
    let dir = if Path::new("tests/data").is_dir() {
        PathBuf::from("tests/data")
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
    };
    shared::png_files(&dir)
        .into_iter()
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, load_view_owned(&p).unwrap())
        })
        .collect()
}

/// Names the keypoints that only one backend has, to make a mismatch readable.
fn keypoint_diff(cpu: &Features, gpu: &Features) -> String {
    let a: std::collections::BTreeSet<_> = cpu.keypoints.iter().map(kp_bits).collect();
    let b: std::collections::BTreeSet<_> = gpu.keypoints.iter().map(kp_bits).collect();
    let show = |v: &[u32; 6]| {
        format!(
            "(oct {} x {} y {} r {:e} a {})",
            v[5],
            f32::from_bits(v[0]),
            f32::from_bits(v[1]),
            f32::from_bits(v[2]),
            f32::from_bits(v[4])
        )
    };
    let only_cpu: Vec<_> = a.difference(&b).take(6).map(show).collect();
    let only_gpu: Vec<_> = b.difference(&a).take(6).map(show).collect();
    format!(
        "{} only on cpu, e.g. {only_cpu:?}; {} only on gpu, e.g. {only_gpu:?}",
        a.difference(&b).count(),
        b.difference(&a).count()
    )
}

fn compare(what: &str, cpu: &Features, gpu: &Features) {
    assert_eq!(cpu.level_sizes, gpu.level_sizes, "{what}: level sizes");
    let same = cpu.keypoints.len() == gpu.keypoints.len()
        && cpu
            .keypoints
            .iter()
            .zip(&gpu.keypoints)
            .all(|(a, b)| kp_bits(a) == kp_bits(b));
    assert!(
        same,
        "{what}: keypoints differ: {}",
        keypoint_diff(cpu, gpu)
    );
    assert_eq!(
        cpu.keypoints.len(),
        gpu.keypoints.len(),
        "{what}: keypoint count"
    );
    for (i, (a, b)) in cpu.keypoints.iter().zip(&gpu.keypoints).enumerate() {
        assert_eq!(
            kp_bits(a),
            kp_bits(b),
            "{what}: keypoint {i}: cpu {a:?} gpu {b:?}"
        );
    }
    assert_eq!(
        cpu.descriptors.len(),
        gpu.descriptors.len(),
        "{what}: descriptor count"
    );
    let bad: Vec<usize> = (0..cpu.descriptors.len())
        .filter(|&i| cpu.descriptors[i] != gpu.descriptors[i])
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: {} of {} descriptors differ, first: keypoint {:?} cpu {:02x?} gpu {:02x?}",
        bad.len(),
        cpu.descriptors.len(),
        bad.first().map(|&i| cpu.keypoints[i]),
        bad.first().map(|&i| cpu.descriptors[i]),
        bad.first().map(|&i| gpu.descriptors[i]),
    );
    match (&cpu.edges, &gpu.edges) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            assert_eq!(
                (a.width, a.height),
                (b.width, b.height),
                "{what}: edge size"
            );
            assert_eq!(
                (a.data.len(), b.data.len()),
                (a.width * a.height, b.width * b.height),
                "{what}: edge map length"
            );
            let diff = a.data.iter().zip(&b.data).filter(|(x, y)| x != y).count();
            let first = a.data.iter().zip(&b.data).position(|(x, y)| x != y);
            assert_eq!(
                diff,
                0,
                "{what}: {diff} edge pixels differ, first at {:?}",
                first.map(|i| (i % a.width, i / a.width))
            );
        }
        _ => panic!("{what}: edges present on one backend only"),
    }
}

fn run_both(gpu: &mut CudaPipeline, cfg: &Config, view: &ImageView) -> (Features, Features) {
    let mut cpu = CpuPipeline::new();
    let c = cpu.process(cfg, view);
    let g = gpu.process(cfg, view).expect("gpu process");
    (c, g)
}

/// Runs `base` with each of `budgets` on both backends through `process_into`, the outputs
/// reused, and compares them (`{what}/budget {budget}`); returns the GPU keypoint counts.
fn compare_budgets(
    g: &mut CudaPipeline,
    cpu: &mut CpuPipeline,
    (fc, fg): &mut (Features, Features),
    view: &ImageView,
    base: &Config,
    budgets: &[u32],
    what: &str,
) -> Vec<usize> {
    let mut counts = Vec::new();
    for &budget in budgets {
        let mut cfg = base.clone();
        cfg.select.max_keypoints = budget;
        cpu.process_into(&cfg, view, fc);
        g.process_into(&cfg, view, fg).expect("gpu process_into");
        compare(&format!("{what}/budget {budget}"), fc, fg);
        counts.push(fg.keypoints.len());
    }
    counts
}

/// Every fixture with every config of `bases` and every budget ([`compare_budgets`]);
/// returns the number of cases.
fn compare_budgets_on_fixtures(
    g: &mut CudaPipeline,
    bases: &[(impl std::fmt::Display, Config)],
    budgets: &[u32],
) -> usize {
    let mut cpu = CpuPipeline::new();
    let mut out = (Features::default(), Features::default());
    let mut cases = 0;
    for (name, frame) in fixtures() {
        let view = frame.view().unwrap();
        for (cname, base) in bases {
            let what = format!("{name}/{cname}");
            let counts = compare_budgets(g, &mut cpu, &mut out, &view, base, budgets, &what);
            cases += counts.len();
            eprintln!("{what}: identical for budgets {budgets:?}: {counts:?} keypoints");
        }
    }
    cases
}

/// A periodic pattern of 5x5 bright squares every 16 pixels: every interior corner has the
/// same FAST score and Harris response.
fn squares(w: usize, h: usize) -> Vec<u8> {
    let mut img = vec![40u8; w * h];
    for y in 0..h {
        for x in 0..w {
            if x % 16 >= 5 && x % 16 < 10 && y % 16 >= 5 && y % 16 < 10 {
                img[y * w + x] = 200;
            }
        }
    }
    img
}

/// One pyramid level, FAST score, every candidate, no orientation, no Canny.
fn fast_only(threshold: u32, nms: bool) -> Config {
    let mut cfg = Config::default();
    cfg.pyramid.levels = 1;
    cfg.select.max_keypoints = 0;
    cfg.detector.score = ScoreType::Fast;
    cfg.detector.fast_threshold = threshold;
    cfg.detector.nonmax_suppression = nms;
    cfg.detector.border = 3;
    cfg.orient.enabled = false;
    cfg.canny.enabled = false;
    cfg
}

fn configs() -> Vec<(&'static str, Config)> {
    let mut out = Vec::new();
    let mut all = Config::default();
    all.select.max_keypoints = 0;
    out.push(("all-candidates", all.clone()));
    out.push(("default", Config::default()));
    let mut c = all.clone();
    c.detector.score = ScoreType::Fast;
    c.orient.enabled = false;
    c.canny.l2_gradient = false;
    out.push(("fast-score-no-orient-l1", c));
    let mut c = all.clone();
    c.detector.nonmax_suppression = false;
    c.detector.fast_threshold = 40;
    c.canny.low_threshold = 20.0;
    c.canny.high_threshold = 60.0;
    out.push(("no-nms-t40-canny20-60", c));
    let mut c = all.clone();
    c.detector.fast_threshold = 10;
    c.pyramid.interpolation = Interpolation::LinearExact;
    c.canny.blur_ksize = 5;
    out.push(("t10-exact-blur5", c));
    let mut c = Config::default();
    c.canny.low_threshold = 100.0;
    c.canny.high_threshold = 250.0;
    c.canny.l2_gradient = false;
    c.select.max_keypoints = 500;
    c.detector.harris_block_size = 9;
    c.detector.border = 20;
    c.orient.patch_size = 21;
    c.describe.enabled = false; // ORB's pattern is for a 31-pixel patch
    out.push(("budget500-b9-canny100-250", c));
    let mut c = Config::default();
    c.select.spread = Spread::Grid;
    c.canny.blur_ksize = 7;
    c.canny.blur_sigma = 1.7;
    out.push(("grid-blur7", c));
    let mut c = Config::default();
    c.detector.method = DetectorMethod::None;
    out.push(("edges-only", c));
    let mut c = Config::default();
    c.detector.method = DetectorMethod::Harris;
    out.push(("dense-harris", c));
    let mut c = Config::default();
    c.select.spread = Spread::Quadtree;
    c.detector.low_threshold_retry = true;
    c.canny.enabled = false;
    out.push(("quadtree-retry-host", c));
    let mut c = Config::default();
    c.pyramid.interpolation = Interpolation::LinearExact;
    c.canny.enabled = false;
    out.push(("opencv-orb-detect-and-compute", c));
    let mut c = Config::default();
    c.detector.border = 4;
    c.orient.enabled = false;
    out.push(("describe-near-edges-no-orient", c));
    out
}

#[test]
fn pipeline_matches_cpu_on_fixtures() {
    let Some(mut g) = gpu("pipeline_matches_cpu_on_fixtures") else {
        return;
    };
    for (name, frame) in fixtures() {
        let view = frame.view().unwrap();
        for (cname, cfg) in configs() {
            let what = format!("{name}/{cname}");
            let (c, gf) = run_both(&mut g, &cfg, &view);
            compare(&what, &c, &gf);
            eprintln!(
                "{what}: {} keypoints, {} descriptors, {} edge pixels identical",
                gf.keypoints.len(),
                gf.descriptors.len(),
                gf.edges
                    .as_ref()
                    .map_or(0, |e| e.data.iter().filter(|&&v| v != 0).count())
            );
        }
    }
}

#[test]
fn canny_matches_cpu_on_fixtures() {
    let Some(mut g) = gpu("canny_matches_cpu_on_fixtures") else {
        return;
    };
    let cases: [(f64, f64, bool, u32, f64); 7] = [
        (50.0, 150.0, true, 0, 0.0),
        (50.0, 150.0, false, 0, 0.0),
        (20.0, 60.0, true, 0, 0.0),
        (100.0, 250.0, false, 0, 0.0),
        (50.0, 150.0, true, 5, 0.0),
        (30.0, 90.0, true, 7, 1.7),
        (150.0, 50.0, false, 3, 0.0),
    ];
    for (name, frame) in fixtures() {
        let view = frame.view().unwrap();
        for (lo, hi, l2, k, sigma) in cases {
            let mut cfg = Config::default();
            cfg.detector.method = DetectorMethod::None;
            cfg.canny.low_threshold = lo;
            cfg.canny.high_threshold = hi;
            cfg.canny.l2_gradient = l2;
            cfg.canny.blur_ksize = k;
            cfg.canny.blur_sigma = sigma;
            let (c, gf) = run_both(&mut g, &cfg, &view);
            compare(
                &format!("{name}/canny {lo} {hi} l2={l2} blur {k} {sigma}"),
                &c,
                &gf,
            );
        }
        eprintln!("{name}: canny identical in 7 configurations");
    }
}

#[test]
fn pyramid_matches_cpu_on_fixtures() {
    let Some(mut g) = gpu("pyramid_matches_cpu_on_fixtures") else {
        return;
    };
    // 1.2 (ORB's) and 1.5 build two levels per launch, 2.0 one level per launch
    // (src/cuda/pyramid.rs, two_level_fits); 9 levels end on a lone last level. Up to 2.0
    // a thread's 4 pixels come from words, 3.0 takes the per-pixel path (note "four pixels
    // from two rows of words" in kernels/pyramid.cu).
    for (name, frame) in fixtures() {
        let view = frame.view().unwrap();
        for (scale, n) in [(1.2f32, 8u32), (1.2, 9), (1.5, 8), (2.0, 6), (3.0, 4)] {
            for interp in [Interpolation::Linear, Interpolation::LinearExact] {
                let mut cfg = Config::default();
                cfg.pyramid.interpolation = interp;
                cfg.pyramid.scale_factor = scale;
                cfg.pyramid.levels = n;
                cfg.canny.enabled = false;
                cfg.detector.score = ScoreType::Fast;
                let mut levels = vec![GrayImage::default()];
                gpu_features::cpu::decode::decode(&view, &mut levels[0]);
                gpu_features::cpu::pyramid::build(
                    &mut levels,
                    n as usize,
                    gpu_features::levels::Scales::Orb,
                    scale,
                    interp,
                );
                g.process(&cfg, &view).unwrap();
                let gl = g.download_levels().unwrap();
                assert_eq!(levels.len(), gl.len());
                for (l, (a, b)) in levels.iter().zip(&gl).enumerate() {
                    let what = format!("{name} scale {scale} {interp:?} level {l}");
                    assert_eq!((a.width, a.height), (b.width, b.height), "{what}");
                    let diff = a.data.iter().zip(&b.data).filter(|(x, y)| x != y).count();
                    assert_eq!(diff, 0, "{what}: {diff} pixels differ");
                }
            }
        }
        eprintln!("{name}: pyramid identical (scales 1.2, 1.5, 2.0; linear, linear_exact)");
    }
}

/// Re-encodes a gray-or-rgb fixture into `enc` (deterministic synthetic chroma/alpha/low
/// byte where the encoding has more information than the file).
fn encode(frame: &OwnedFrame, enc: Encoding, big_endian: bool) -> (Vec<u8>, usize) {
    let (w, h) = (frame.width, frame.height);
    let rgb = |x: usize, y: usize| -> [u8; 3] {
        match frame.encoding {
            Encoding::Rgb8 => {
                let i = 3 * (y * w + x);
                [frame.data[i], frame.data[i + 1], frame.data[i + 2]]
            }
            _ => {
                let v = frame.data[y * w + x];
                [
                    v,
                    v.wrapping_add((x * 7) as u8),
                    v.wrapping_sub((y * 3) as u8),
                ]
            }
        }
    };
    let bpp = enc.bytes_per_pixel();
    // Padded rows, to exercise `step`.
    let step = w * bpp + 5;
    let mut out = vec![0u8; step * h];
    for y in 0..h {
        for x in 0..w {
            let [r, g, b] = rgb(x, y);
            let o = &mut out[y * step + x * bpp..y * step + (x + 1) * bpp];
            match enc {
                Encoding::Mono8 => o[0] = g,
                Encoding::Mono16 => {
                    let v = (g as u16) << 8 | (r as u16 ^ (x as u16 & 0xff));
                    o.copy_from_slice(&if big_endian {
                        v.to_be_bytes()
                    } else {
                        v.to_le_bytes()
                    });
                }
                Encoding::Rgb8 => o.copy_from_slice(&[r, g, b]),
                Encoding::Bgr8 => o.copy_from_slice(&[b, g, r]),
                Encoding::Rgba8 => o.copy_from_slice(&[r, g, b, 7]),
                Encoding::Bgra8 => o.copy_from_slice(&[b, g, r, 200]),
                Encoding::Uyvy => o.copy_from_slice(&[b, g]),
                Encoding::Yuyv => o.copy_from_slice(&[g, r]),
            }
        }
    }
    (out, step)
}

/// The GPU's level 0 against the CPU's decode of `view`; panics with the first differences.
fn check_decode(g: &mut CudaPipeline, cfg: &Config, what: &str, view: &ImageView, data: &[u8]) {
    let mut cpu = GrayImage::default();
    gpu_features::cpu::decode::decode(view, &mut cpu);
    g.process(cfg, view).unwrap();
    let gl = g.download_levels().unwrap();
    if cpu != gl[0] {
        let (w, step, bpp) = (view.width(), view.step(), view.encoding().bytes_per_pixel());
        let bad: Vec<_> = cpu
            .data
            .iter()
            .zip(&gl[0].data)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(8)
            .map(|(i, (a, b))| {
                let (x, y) = (i % w, i / w);
                let raw = &data[y * step + x * bpp..y * step + (x + 1) * bpp];
                format!("({x},{y}) cpu {a} gpu {b} raw {raw:?}")
            })
            .collect();
        panic!("{what}: {bad:?}");
    }
}

#[test]
fn decode_matches_cpu_for_every_encoding() {
    let Some(mut g) = gpu("decode_matches_cpu_for_every_encoding") else {
        return;
    };
    let mut cfg = Config::default();
    cfg.detector.method = DetectorMethod::None;
    cfg.canny.enabled = false;
    for (name, frame) in fixtures().into_iter().take(4) {
        // Uploaded raw, uploaded after the crew's conversion to gray (cuda.host_gray: the
        // colour encodings), and read in place from mapped memory (cuda.zero_copy).
        let paths = [
            (ZeroCopy::Off, false),
            (ZeroCopy::Off, true),
            (ZeroCopy::On, true),
        ];
        for (zero_copy, host_gray) in paths {
            cfg.cuda.zero_copy = zero_copy;
            cfg.cuda.host_gray = host_gray;
            for enc in Encoding::ALL {
                for be in [false, true] {
                    if be && enc != Encoding::Mono16 {
                        continue;
                    }
                    let (data, step) = encode(&frame, enc, be);
                    let view =
                        ImageView::with_encoding(&data, frame.width, frame.height, step, enc, be)
                            .unwrap();
                    let what = format!("{name} {enc:?} big_endian={be} {zero_copy:?} {host_gray}");
                    check_decode(&mut g, &cfg, &what, &view, &data);
                }
            }
            // Packed mono8 (uploaded, or copied by copy_frame16), one column narrower so
            // that the byte count is not a multiple of 16.
            let (padded, step) = encode(&frame, Encoding::Mono8, false);
            let w = frame.width - 1;
            let packed: Vec<u8> = padded.chunks(step).flat_map(|r| &r[..w]).copied().collect();
            let view = ImageView::new(&packed, w, frame.height, w, "mono8", false).unwrap();
            let what = format!("{name} packed mono8 {w}x{} {zero_copy:?}", frame.height);
            check_decode(&mut g, &cfg, &what, &view, &packed);
            // Colour frames one column narrower too: rows that do not end on a 32-pixel
            // step, and a stripe boundary inside a row.
            let (rgb, step) = encode(&frame, Encoding::Bgr8, false);
            let narrow: Vec<u8> = rgb
                .chunks(step)
                .flat_map(|r| &r[..3 * w])
                .copied()
                .collect();
            let view = ImageView::new(&narrow, w, frame.height, 3 * w, "bgr8", false).unwrap();
            let what_bgr = format!(
                "{name} packed bgr8 {w}x{} {zero_copy:?} {host_gray}",
                frame.height
            );
            check_decode(&mut g, &cfg, &what_bgr, &view, &narrow);
        }
        eprintln!(
            "{name}: decode identical for every encoding, uploaded raw, converted on the host \
             and zero-copy"
        );
    }
}

#[test]
fn deterministic_and_survives_resolution_changes() {
    let Some(mut g) = gpu("deterministic_and_survives_resolution_changes") else {
        return;
    };
    let fx = fixtures();
    let cfg = Config::default();
    let mut first = Vec::new();
    for (_, frame) in &fx {
        let f = g.process(&cfg, &frame.view().unwrap()).unwrap();
        first.push(f);
    }
    // Again, in reverse order (every frame a resolution change), each after the warm-up
    // round trip the node makes before a frame it expects: identical results.
    for (i, (name, frame)) in fx.iter().enumerate().rev() {
        g.warm().unwrap();
        let f = g.process(&cfg, &frame.view().unwrap()).unwrap();
        let a: Vec<_> = first[i].keypoints.iter().map(kp_bits).collect();
        let b: Vec<_> = f.keypoints.iter().map(kp_bits).collect();
        assert_eq!(a, b, "{name}: keypoints changed between runs");
        assert_eq!(
            first[i].edges, f.edges,
            "{name}: edges changed between runs"
        );
        eprintln!("{name}: stage times (ms, informative only) {:?}", f.timings);
    }
    // Into one reused `Features` whose edge map holds stale bytes (and, every other frame,
    // the wrong length): every byte is rewritten, the length is w*h.
    let mut reused = Features::default();
    for (k, (i, (name, frame))) in fx
        .iter()
        .enumerate()
        .chain(fx.iter().enumerate())
        .enumerate()
    {
        if let Some(e) = reused.edges.as_mut() {
            e.data.fill(0x5a);
            if k % 2 == 1 {
                e.data.extend_from_slice(&[0x5a; 77]);
            }
        }
        g.process_into(&cfg, &frame.view().unwrap(), &mut reused)
            .unwrap();
        assert_eq!(
            first[i].edges, reused.edges,
            "{name}: edges differ when written into a reused Features"
        );
    }
}

/// `cuda.warm_ahead_us` resolved on this GPU: auto is 500 us on a discrete GPU and none on
/// an integrated one, 0 is none, a value is itself; none on the CPU backend.
#[test]
fn warm_ahead_resolves_per_gpu_and_setting() {
    let Some(g) = gpu("warm_ahead_resolves_per_gpu_and_setting") else {
        return;
    };
    let integrated = g.gpu().integrated;
    drop(g);
    let us = |v: &str, choice| {
        let cfg = Config::default()
            .with_value("cuda.warm_ahead_us", v)
            .unwrap();
        let p = Pipeline::new(cfg, choice).unwrap();
        p.warm_ahead().map(|d| d.as_micros())
    };
    let auto = (!integrated).then_some(500);
    assert_eq!(us("-1", BackendChoice::Cuda), auto);
    assert_eq!(us("0", BackendChoice::Cuda), None);
    assert_eq!(us("1200", BackendChoice::Cuda), Some(1200));
    assert_eq!(us("1200", BackendChoice::Cpu), None);
    // The warm-up itself, on the pipeline's GPU and on the CPU (where it does nothing).
    for choice in [BackendChoice::Cuda, BackendChoice::Cpu] {
        let mut p = Pipeline::new(Config::default(), choice).unwrap();
        p.warm_gpu();
        assert!(p.gpu_failure().is_none());
    }
}

#[test]
fn fast_candidates_match_cpu_fast() {
    let Some(mut g) = gpu("fast_candidates_match_cpu_fast") else {
        return;
    };
    for (name, frame) in fixtures() {
        let view = frame.view().unwrap();
        for (t, nms) in [(20u32, true), (10, true), (40, false)] {
            let cfg = fast_only(t, nms);
            let mut gray = GrayImage::default();
            gpu_features::cpu::decode::decode(&view, &mut gray);
            let cpu: Vec<(u32, u32, f32)> = gpu_features::cpu::fast::detect(&gray, t as u8, nms)
                .into_iter()
                .filter(|c| c.x >= 3 && c.y >= 3)
                .map(|c| (c.x, c.y, c.response))
                .collect();
            let f = g.process(&cfg, &view).unwrap();
            let gk: Vec<(u32, u32, f32)> = f
                .keypoints
                .iter()
                .map(|k| (k.x as u32, k.y as u32, k.response))
                .collect();
            assert_eq!(
                cpu.len(),
                gk.len(),
                "{name} t{t} nms={nms}: counts; first cpu {:?} first gpu {:?}",
                &cpu[..cpu.len().min(12)],
                &gk[..gk.len().min(12)]
            );
            assert_eq!(cpu, gk, "{name} t{t} nms={nms}");
        }
        eprintln!("{name}: FAST candidates identical (t20 nms, t10 nms, t40 no nms)");
    }
}

/// Two synthetic corners whose circles hold equal-score neighbours: FAST scores and the
/// strict NMS (equal neighbours suppress each other), with and without NMS.
#[test]
fn fast_synthetic_scores_and_nms() {
    let Some(mut g) = gpu("fast_synthetic_scores_and_nms") else {
        return;
    };
    let (w, h) = (64usize, 48usize);
    let mut img = vec![100u8; w * h];
    let circle = gpu_features::cpu::fast::CIRCLE;
    for (cx, cy) in [(20i32, 20i32), (45, 30)] {
        for (k, &(dx, dy)) in circle.iter().enumerate().take(9) {
            img[((cy + dy) as usize) * w + (cx + dx) as usize] = if k == 4 { 125 } else { 140 };
        }
    }
    let gray = GrayImage::from_vec(w, h, img.clone()).unwrap();
    let view = ImageView::mono8(&img, w, h).unwrap();
    for nms in [true, false] {
        let cfg = fast_only(10, nms);
        let f = g.process(&cfg, &view).unwrap();
        let gk: Vec<_> = f.keypoints.iter().map(|k| (k.x, k.y, k.response)).collect();
        let ck: Vec<_> = gpu_features::cpu::fast::detect(&gray, 10, nms)
            .iter()
            .map(|c| (c.x as f32, c.y as f32, c.response))
            .collect();
        assert_eq!(ck, gk, "nms={nms}");
    }
}

/// Detector configs for the selection tests (Canny off: it is covered above).
fn selection_bases() -> Vec<(&'static str, Config)> {
    let mut base = Config::default();
    base.canny.enabled = false;
    let mut out = vec![("harris-orient", base.clone())];
    let mut c = base.clone();
    c.detector.score = ScoreType::Fast;
    c.orient.enabled = false;
    out.push(("fast-score-no-orient", c));
    let mut c = base.clone();
    c.detector.nonmax_suppression = false;
    c.detector.fast_threshold = 30;
    out.push(("no-nms-t30", c));
    let mut c = base.clone();
    c.detector.fast_threshold = 8;
    c.detector.harris_block_size = 9;
    c.detector.border = 16;
    c.orient.patch_size = 21;
    c.pyramid.levels = 4;
    c.pyramid.scale_factor = 1.5;
    out.push(("t8-b9-p21-l4-s1.5", c));
    out
}

const BUDGETS: [u32; 8] = [0, 1, 7, 100, 500, 2000, 5000, 100_000];

/// The GPU budget selection (`spread: none`: 2n pre-cut by FAST score with ties, top n by
/// response with (y, x) tie-break, ordered compaction, orientation of the kept corners)
/// against `select::select_level`, through `process_into` with reused outputs.
#[test]
fn gpu_selection_matches_cpu_for_budgets() {
    let Some(mut g) = gpu("gpu_selection_matches_cpu_for_budgets") else {
        return;
    };
    let cases = compare_budgets_on_fixtures(&mut g, &selection_bases(), &BUDGETS);
    eprintln!("gpu selection: {cases} cases identical");
}

/// A periodic pattern: every interior corner has the same FAST score and Harris response,
/// so the budget is decided by the (y, x) tie-break alone (and the 2n pre-cut by its ties).
#[test]
fn gpu_selection_breaks_ties_like_cpu() {
    let Some(mut g) = gpu("gpu_selection_breaks_ties_like_cpu") else {
        return;
    };
    let (w, h) = (333usize, 251usize);
    let img = squares(w, h);
    let view = ImageView::mono8(&img, w, h).unwrap();
    let mut cpu = CpuPipeline::new();
    let mut out = (Features::default(), Features::default());
    for (cname, base) in selection_bases() {
        for levels in [1, 3] {
            let mut cfg = base.clone();
            cfg.pyramid.levels = levels;
            cfg.detector.border = cfg.detector.border.min(16);
            let what = format!("ties/{cname}/levels {levels}");
            let budgets = [1, 2, 3, 7, 50, 101, 400, 1000];
            compare_budgets(&mut g, &mut cpu, &mut out, &view, &cfg, &budgets, &what);
        }
    }
    eprintln!("ties: identical for every budget");
}

/// Stage times on the 800x640 fixture (informative only): median of 50 frames after a
/// warm-up, outputs reused; the default (ORB) config and dense Harris.
#[test]
fn stage_times_default_config() {
    let Some(mut g) = gpu("stage_times_default_config") else {
        return;
    };
    let fx = fixtures();
    let (name, frame) = fx.iter().find(|(n, _)| n == "graf1").unwrap();
    let view = frame.view().unwrap();
    let mut dense = Config::default();
    dense.detector.method = DetectorMethod::Harris;
    for (cname, cfg) in [("default", Config::default()), ("dense-harris", dense)] {
        let mut f = Features::default();
        for _ in 0..5 {
            g.process_into(&cfg, &view, &mut f).unwrap();
        }
        let mut per_stage: Vec<(&'static str, Vec<f64>)> = Vec::new();
        let mut wall = Vec::new();
        for _ in 0..50 {
            let t = std::time::Instant::now();
            g.process_into(&cfg, &view, &mut f).unwrap();
            wall.push(t.elapsed().as_secs_f64() * 1e3);
            // Keyed by name: only every `cuda.stage_timings`-th frame has the GPU stages.
            for s in &f.timings {
                match per_stage.iter_mut().find(|(n, _)| *n == s.stage) {
                    Some((_, v)) => v.push(s.ms),
                    None => per_stage.push((s.stage, vec![s.ms])),
                }
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let stages: Vec<String> = per_stage
            .iter_mut()
            .map(|(s, v)| format!("{s} {:.3}", median(v)))
            .collect();
        eprintln!(
            "{name} {}x{} {cname}: {} keypoints; median ms: {}; wall {:.3}",
            frame.width,
            frame.height,
            f.keypoints.len(),
            stages.join(", "),
            median(&mut wall)
        );
    }
}

/// Dense Harris (`detector.method: harris`: cv::cornerHarris + 3x3 NMS + quality) on the GPU
/// against `cpu::harris::dense_corners` and the selection, bit for bit.
#[test]
fn dense_harris_matches_cpu() {
    let Some(mut g) = gpu("dense_harris_matches_cpu") else {
        return;
    };
    let mut cpu = CpuPipeline::new();
    let (mut fc, mut fg) = (Features::default(), Features::default());
    let cases: [(u32, u32, f32, u32, bool, u32); 7] = [
        (2, 3, 0.01, 0, true, 31),
        (2, 3, 0.01, 500, true, 31),
        (3, 5, 0.05, 2000, false, 8),
        (5, 7, 0.01, 100, true, 20),
        (1, 3, 0.02, 0, false, 3),
        (7, 3, 0.001, 7, false, 5),
        (2, 7, 0.01, 5000, true, 31),
    ];
    for (name, frame) in fixtures() {
        let view = frame.view().unwrap();
        let mut counts = Vec::new();
        for (block, ksize, quality, budget, orient, border) in cases {
            let mut cfg = Config::default();
            cfg.canny.enabled = false;
            cfg.detector.method = DetectorMethod::Harris;
            cfg.detector.dense_block_size = block;
            cfg.detector.dense_ksize = ksize;
            cfg.detector.dense_quality = quality;
            cfg.detector.border = border;
            cfg.orient.enabled = orient;
            cfg.select.max_keypoints = budget;
            cpu.process_into(&cfg, &view, &mut fc);
            g.process_into(&cfg, &view, &mut fg).unwrap();
            compare(
                &format!("{name}/dense b{block} k{ksize} q{quality} n{budget} border {border}"),
                &fc,
                &fg,
            );
            counts.push(fg.keypoints.len());
        }
        eprintln!("{name}: dense harris identical in 7 configurations: {counts:?} keypoints");
    }
}

/// config/orb_slam3.yaml, as shipped.
fn orb_slam3() -> Config {
    let c = Config::from_yaml(include_str!("../config/orb_slam3.yaml")).unwrap();
    c.validate().unwrap();
    c
}

/// Variants of the ORB-SLAM3 preset: retry on/off, FMA, OpenCV's scales and blur,
/// FAST/Harris score, thresholds, NMS, cell sizes, spread, border.
fn orb_slam3_variants() -> Vec<(String, Config)> {
    let base = orb_slam3();
    let mut out = vec![("orb_slam3".to_string(), base.clone())];
    let mut c = base.clone();
    c.detector.low_threshold_retry = false;
    out.push(("no-retry".into(), c));
    // ORB-SLAM3 as GCC builds it with FMA (describe.fma), and OpenCV ORB's level scales and
    // descriptor blur under the same detection.
    let mut c = base.clone();
    c.describe.fma = true;
    out.push(("fma".into(), c));
    let mut c = base.clone();
    c.pyramid.scales = gpu_features::levels::Scales::Orb;
    c.describe.blur = gpu_features::config::DescriptorBlur::Orb;
    out.push(("orb-scales-and-blur".into(), c));
    let mut c = base.clone();
    c.detector.score = ScoreType::Harris;
    out.push(("harris-score".into(), c));
    for cell in [16, 30, 64] {
        for (ini, min) in [(20, 7), (40, 5), (12, 12)] {
            let mut c = base.clone();
            c.select.cell_size = cell;
            c.detector.fast_threshold = ini;
            c.detector.min_fast_threshold = min;
            out.push((format!("cell{cell}-t{ini}-{min}"), c));
        }
    }
    let mut c = base.clone();
    c.detector.nonmax_suppression = false;
    c.detector.fast_threshold = 30;
    c.detector.min_fast_threshold = 10;
    out.push(("no-nms-t30-10".into(), c));
    let mut c = base.clone();
    c.select.spread = Spread::Grid;
    c.detector.score = ScoreType::Harris;
    c.select.cell_size = 16;
    out.push(("grid-harris-cell16".into(), c));
    let mut c = base.clone();
    c.detector.border = 31;
    c.select.cell_size = 8;
    c.orient.enabled = false;
    out.push(("border31-cell8-no-orient".into(), c));
    let mut c = base.clone();
    c.detector.border = 3;
    c.orient.enabled = false;
    c.pyramid.levels = 3;
    c.pyramid.scale_factor = 1.5;
    out.push(("border3-l3-s1.5".into(), c));
    out
}

/// ORB-SLAM3's per-cell FAST with the low-threshold retry on the GPU (`fast_cells`,
/// `cell_filter`) against `cpu::cells::fast_in_cells` and the host spread, for the preset
/// and its variants, every candidate (budget 0) and several budgets, through `process_into`
/// with reused outputs.
#[test]
fn orb_slam3_per_cell_retry_matches_cpu() {
    let Some(mut g) = gpu("orb_slam3_per_cell_retry_matches_cpu") else {
        return;
    };
    let cases = compare_budgets_on_fixtures(&mut g, &orb_slam3_variants(), &[0, 100, 1000, 5000]);
    eprintln!("orb_slam3 per-cell retry: {cases} cases identical");
}

/// Synthetic frames for the per-cell detection: noise whose contrast changes from block to
/// block (cells empty at the high threshold next to full ones), and a periodic pattern of
/// equal scores (ties across cell edges, where the per-cell NMS keeps both neighbours).
#[test]
fn orb_slam3_per_cell_retry_synthetic() {
    let Some(mut g) = gpu("orb_slam3_per_cell_retry_synthetic") else {
        return;
    };
    let mut frames = Vec::new();
    for (w, h, seed) in [(641usize, 479usize, 1u64), (333, 251, 2), (1000, 77, 3)] {
        let img = test_images::contrast_noise(w, h, seed);
        frames.push((format!("noise{w}x{h}"), w, h, img));
    }
    frames.push(("squares".into(), 333, 251, squares(333, 251)));
    let mut cpu = CpuPipeline::new();
    let mut out = (Features::default(), Features::default());
    for (name, w, h, img) in &frames {
        let view = ImageView::mono8(img, *w, *h).unwrap();
        for (cname, base) in orb_slam3_variants() {
            let mut cfg = base.clone();
            cfg.detector.border = cfg.detector.border.min(16);
            let what = format!("{name}/{cname}");
            compare_budgets(&mut g, &mut cpu, &mut out, &view, &cfg, &[0, 300], &what);
        }
        eprintln!("{name}: per-cell retry identical in every variant");
    }
}

#[test]
fn cuda_fault_mid_stream_switches_to_cpu_with_identical_output() {
    use gpu_features::{BackendChoice, BackendKind, Pipeline};
    if gpu("cuda_fault_mid_stream_switches_to_cpu_with_identical_output").is_none() {
        return;
    }
    let cfg = Config::default();
    let mut p = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
    let fx = fixtures();
    let mut cpu = CpuPipeline::new();
    for (i, (name, frame)) in fx.iter().take(4).enumerate() {
        let view = frame.view().unwrap();
        if i == 2 {
            // A launch in the middle of frame 2 fails (as a lost device or an OOM would).
            p.inject_cuda_fault(5);
        }
        let got = p.process(&view).expect("the frame is redone on the CPU");
        let want = cpu.process(&cfg, &view);
        compare(&format!("{name} frame {i}"), &want, &got);
        let (backend, failure) = (p.backend(), p.gpu_failure().map(str::to_owned));
        eprintln!("frame {i}: backend {backend:?}, gpu failure {failure:?}");
        if i < 2 {
            assert_eq!(backend, BackendKind::Cuda);
            assert!(failure.is_none());
        } else {
            assert_eq!(backend, BackendKind::Cpu, "switched for good");
            assert!(failure.unwrap().contains("injected fault"));
        }
    }
}

/// `cuda.graphs` (on by default): the first frame of a resolution and config records the
/// launches, the next ones replay them and must still give the CPU's output; a config change
/// between frames (thresholds that only reach the kernels' arguments, no reallocation)
/// records them again; `cuda.graphs: false` gives the same output from plain launches.
#[test]
fn cuda_graphs_replay_and_record_again_on_config_change() {
    let Some(mut g) = gpu("cuda_graphs_replay_and_record_again_on_config_change") else {
        return;
    };
    let fx = fixtures();
    let mut cpu = CpuPipeline::new();
    let first = Config::default();
    let mut second = Config::default();
    second.detector.fast_threshold = 35;
    second.select.max_keypoints = 700;
    second.canny.low_threshold = 20.0;
    second.canny.high_threshold = 150.0;
    let mut plain = Config::default();
    plain.cuda.graphs = false;
    let order = [&first, &first, &second, &second, &first, &plain, &first];
    let mut out = Features::default();
    for (name, frame) in fx.iter().take(3) {
        let view = frame.view().unwrap();
        let mut counts = Vec::new();
        for (i, cfg) in order.iter().enumerate() {
            g.process_into(cfg, &view, &mut out).unwrap();
            let want = cpu.process(cfg, &view);
            compare(&format!("{name} frame {i}"), &want, &out);
            counts.push(out.keypoints.len());
        }
        // The two configs must differ in output, or the re-recording would go unchecked.
        assert_ne!(
            counts[0], counts[2],
            "{name}: the configs gave the same keypoints"
        );
        eprintln!("{name}: keypoints per frame {counts:?}, identical to the CPU");
    }
}

/// A fault in a replayed graph's launch (the Canny graph, then the main one, on the third
/// frame of one resolution) switches the pipeline to the CPU with identical output.
#[test]
fn cuda_fault_in_a_replayed_graph_switches_to_cpu() {
    use gpu_features::{BackendChoice, BackendKind, Pipeline};
    if gpu("cuda_fault_in_a_replayed_graph_switches_to_cpu").is_none() {
        return;
    }
    let cfg = Config::default();
    let fx = fixtures();
    let (name, frame) = fx.iter().find(|(n, _)| n == "brick").expect("brick.png");
    let view = frame.view().unwrap();
    let want = CpuPipeline::new().process(&cfg, &view);
    // brick is packed mono8: no decode kernel, so a replayed frame launches the Canny graph
    // (1), then the main graph (2).
    for n in [1, 2] {
        let mut p = Pipeline::new(cfg.clone(), BackendChoice::Cuda).unwrap();
        for i in 0..4 {
            if i == 2 {
                p.inject_cuda_fault(n);
            }
            let got = p.process(&view).expect("the frame is redone on the CPU");
            compare(&format!("{name} fault {n} frame {i}"), &want, &got);
            let failure = p.gpu_failure().map(str::to_owned);
            if i < 2 {
                assert_eq!(p.backend(), BackendKind::Cuda);
            } else {
                assert_eq!(p.backend(), BackendKind::Cpu, "fault {n}: switched");
                let f = failure.unwrap();
                assert!(f.contains("injected fault") && f.contains("graph"), "{f}");
            }
        }
        eprintln!("fault at launch {n} of a replayed frame: switched to the CPU, same output");
    }
}

/// `cuda.stage_timings: 3`: with the graphs and without, frames 0, 3 and 6 time their stages
/// (with the graphs: the main graph with event nodes); with the graphs frames 1 and 4 time
/// the GPU's work after the decode as a whole (AFTER_DECODE_STAGE); the others report the
/// host's stage alone; every frame's output is the CPU's.
#[test]
fn stage_timings_on_every_nth_frame_with_graphs() {
    let fx = fixtures();
    let (name, frame) = &fx[1];
    let view = frame.view().unwrap();
    for graphs in [true, false] {
        let Some(mut g) = gpu("stage_timings_on_every_nth_frame_with_graphs") else {
            return;
        };
        let mut cfg = Config::default();
        cfg.cuda.stage_timings = 3;
        cfg.cuda.graphs = graphs;
        let want = CpuPipeline::new().process(&cfg, &view);
        let mut out = Features::default();
        for i in 0..7 {
            g.process_into(&cfg, &view, &mut out).unwrap();
            compare(&format!("{name} frame {i} graphs {graphs}"), &want, &out);
            let stages: Vec<_> = out
                .timings
                .iter()
                .filter(|t| !t.stage.contains("(host)"))
                .collect();
            if i % 3 == 0 {
                assert!(stages.len() >= 6, "frame {i}: {:?}", out.timings);
                assert!(stages.iter().all(|t| t.ms.is_finite() && t.ms >= 0.0));
                assert!(stages.iter().all(|t| t.stage != AFTER_DECODE_STAGE));
            } else if i % 3 == 1 && graphs {
                // Halfway: the GPU's work after the decode as a whole, no stage events.
                assert_eq!(stages.len(), 1, "frame {i}: {:?}", out.timings);
                let t = stages[0];
                assert!(t.stage == AFTER_DECODE_STAGE && t.overlapped, "{t:?}");
                assert!(t.ms.is_finite() && t.ms > 0.0, "{t:?}");
            } else {
                assert!(stages.is_empty(), "frame {i}: {:?}", out.timings);
            }
        }
    }
    eprintln!(
        "{name}: stages timed on frames 0, 3, 6 only, with and without the graphs, the work \
         after the decode on frames 1 and 4 with the graphs; output identical to the CPU"
    );
}
