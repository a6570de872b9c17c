//! Property / fuzz tests: bad input (frames, configs, bags, CDR messages, CSV, point clouds)
//! gets a clean `Err` or a sane result, never a panic, a hang or a wild allocation.
//!
//! Case counts are bounded so the file runs in a few seconds in the test profile; set
//! `PROPTEST_CASES` to run longer.

mod bag_common;

mod shared;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bag_common::*;
use gpu_features::bag::writer::write_metadata_yaml;
use gpu_features::bag::{Bag, StorageKind};
use gpu_features::cdr;
use gpu_features::config::{
    CannyConfig, DescribeConfig, DescriptorBlur, DetectorConfig, DetectorMethod, Interpolation,
    OrientConfig, PyramidConfig, Scales, ScoreType, SelectConfig, Spread,
};
use gpu_features::image::{MAX_PIXELS, MAX_SIDE};
use gpu_features::output::{annotations, csv, pointcloud};
use gpu_features::replay;
use gpu_features::{BackendChoice, Config, Encoding, Features, ImageView, Pipeline};
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, FileFailurePersistence};

#[path = "shared/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{count_allocs, peak_alloc};

fn cases(n: u32) -> PtConfig {
    PtConfig {
        cases: n,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        max_shrink_iters: 2000,
        ..PtConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Frames

fn preset(name: &str) -> Config {
    let p = format!("{}/config/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    Config::from_file(Path::new(&p)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Every shipped preset but the ROS params files (gpu_features.yaml, *_params.yaml).
fn presets() -> &'static [(String, Config)] {
    static P: OnceLock<Vec<(String, Config)>> = OnceLock::new();
    P.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| {
                n.ends_with(".yaml") && n != "gpu_features.yaml" && !n.ends_with("_params.yaml")
            })
            .map(|n| n.trim_end_matches(".yaml").to_string())
            .collect();
        names.sort();
        assert!(names.len() >= 5, "{names:?}");
        names.into_iter().map(|n| (n.clone(), preset(&n))).collect()
    })
}

/// Deterministic frame bytes with structure (blocks, lines) and noise, so that FAST, Harris
/// and Canny all find something even on tiny frames.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let block = if (i / 5 + i / 37) % 2 == 0 { 230 } else { 20 };
            if s % 4 == 0 {
                (s >> 24) as u8
            } else {
                block
            }
        })
        .collect()
}

/// The properties every successful `process` must have.
fn check_features(f: &Features, cfg: &Config, w: usize, h: usize) {
    assert_eq!(f.level_sizes.first(), Some(&(w, h)), "level 0 size");
    let levels = if cfg.detector.method == DetectorMethod::None {
        1
    } else {
        cfg.pyramid.levels as usize
    };
    assert_eq!(f.level_sizes.len(), levels, "level count");
    match (&f.edges, cfg.canny.enabled) {
        (Some(e), true) => {
            assert_eq!(
                (e.width, e.height, e.data.len()),
                (w, h, w * h),
                "edge map size"
            );
            assert!(e.data.iter().all(|&v| v == 0 || v == 255), "edge values");
        }
        (None, false) => {}
        (e, on) => panic!("canny enabled {on} but edges {:?}", e.is_some()),
    }
    if cfg.detector.method == DetectorMethod::None {
        assert!(f.keypoints.is_empty());
    }
    let descriptors = if cfg.describe.enabled {
        f.keypoints.len()
    } else {
        0
    };
    assert_eq!(
        f.descriptors.len(),
        descriptors,
        "one descriptor per keypoint"
    );
    if cfg.select.max_keypoints > 0 {
        // The budget; ORB-SLAM3's quadtree may keep a few more per level, as it does.
        let most = gpu_features::select::max_kept(cfg, &f.level_sizes);
        assert!(
            f.keypoints.len() <= most,
            "{} keypoints over the most {} (budget {})",
            f.keypoints.len(),
            most,
            cfg.select.max_keypoints
        );
    }
    for k in &f.keypoints {
        assert!(
            k.x.is_finite() && k.y.is_finite() && k.response.is_finite() && k.size.is_finite(),
            "{k:?}"
        );
        assert!(
            k.x >= 0.0 && k.y >= 0.0 && k.x < w as f32 && k.y < h as f32,
            "{k:?} outside {w}x{h}"
        );
        assert!((0..levels as i32).contains(&k.octave), "{k:?}");
        assert!(k.size > 0.0, "{k:?}");
        if cfg.orient.enabled {
            assert!((0.0..360.0).contains(&k.angle), "{k:?}");
        } else {
            assert_eq!(k.angle, -1.0, "{k:?}");
        }
    }
    let mut sorted = f.keypoints.clone();
    if cfg.select.spread == Spread::Quadtree && cfg.select.max_keypoints > 0 {
        // Levels in turn, each in ORB-SLAM3's node order (its keypoint order).
        sorted.sort_by_key(|k| k.octave);
        assert_eq!(sorted, f.keypoints, "keypoints not in octave order");
    } else {
        sorted.sort_by(|a, b| {
            (a.octave, a.y, a.x)
                .partial_cmp(&(b.octave, b.y, b.x))
                .unwrap()
        });
        assert_eq!(sorted, f.keypoints, "keypoints not in (octave, y, x) order");
    }
}

fn same(a: &Features, b: &Features) -> bool {
    a.keypoints == b.keypoints && a.edges == b.edges && a.level_sizes == b.level_sizes
}

/// Processes `view` on a fresh CPU pipeline and on `reused` (which has seen other frames),
/// checks the result and that both runs agree.
fn process_checked(cfg: &Config, view: &ImageView, reused: &mut Pipeline) -> Features {
    let mut fresh = Pipeline::new(cfg.clone(), BackendChoice::Cpu).expect("valid config");
    let a = fresh.process(view).expect("CPU process of a valid view");
    check_features(&a, cfg, view.width(), view.height());
    let b = fresh.process(view).unwrap();
    assert!(same(&a, &b), "same pipeline, same frame, different result");
    reused.set_config(cfg.clone()).unwrap();
    let c = reused.process(view).unwrap();
    assert!(same(&a, &c), "reused pipeline differs from a fresh one");
    a
}

const ENCODINGS: [&str; 12] = [
    "mono8",
    "8UC1",
    "mono16",
    "16UC1",
    "rgb8",
    "bgr8",
    "rgba8",
    "bgra8",
    "yuv422",
    "uyvy",
    "yuv422_yuy2",
    "yuyv",
];

fn encoding_string() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(&ENCODINGS[..]).prop_map(String::from),
        1 => Just(String::new()),
        1 => any::<String>(),
        1 => prop::sample::select(vec![
            "MONO8", " mono8", "mono8\0", "bayer_rggb8", "32FC1", "rgb16", "mono8 ",
            "\u{ff4d}ono8", "yuv422\u{0301}", "16UC3",
        ])
        .prop_map(String::from),
    ]
}

fn side() -> impl Strategy<Value = usize> {
    prop_oneof![
        12 => 1usize..48,
        1 => Just(0usize),
        1 => prop::sample::select(vec![
            MAX_SIDE, MAX_SIDE + 1, MAX_PIXELS, 1 << 31, 1 << 40, usize::MAX / 2, usize::MAX,
        ]),
    ]
}

#[derive(Clone, Debug)]
enum StepSpec {
    /// width * bytes per pixel + padding.
    Packed(usize),
    /// width * bytes per pixel - k.
    Short(usize),
    Any(usize),
}

#[derive(Clone, Debug)]
enum LenSpec {
    Exact,
    Plus(usize),
    Minus(usize),
    /// step * (height - 1) + the last row's pixels only.
    LastRowOnly,
    Any(usize),
}

fn step_spec() -> impl Strategy<Value = StepSpec> {
    prop_oneof![
        6 => (0usize..6).prop_map(StepSpec::Packed),
        1 => (1usize..4).prop_map(StepSpec::Short),
        1 => prop_oneof![0usize..300, Just(usize::MAX), Just(usize::MAX / 3)].prop_map(StepSpec::Any),
    ]
}

fn len_spec() -> impl Strategy<Value = LenSpec> {
    prop_oneof![
        6 => Just(LenSpec::Exact),
        1 => (1usize..64).prop_map(LenSpec::Plus),
        1 => (1usize..64).prop_map(LenSpec::Minus),
        1 => Just(LenSpec::LastRowOnly),
        1 => (0usize..5000).prop_map(LenSpec::Any),
    ]
}

/// A valid config covering the corners of every range: many levels whose sizes round to 0
/// or 1 px, borders larger than the image, budgets of 1, big blur kernels, ...
fn valid_config() -> impl Strategy<Value = Config> {
    let orient =
        (any::<bool>(), (1u32..=63).prop_map(|k| 2 * k + 1)).prop_map(|(enabled, patch_size)| {
            OrientConfig {
                enabled,
                patch_size,
            }
        });
    (
        pyramid_config(),
        detector_config(),
        select_config(),
        orient,
        canny_config(),
    )
        .prop_map(|(pyramid, detector, select, orient, canny)| {
            let mut cfg = Config {
                pyramid,
                detector,
                select,
                orient,
                canny,
                describe: DescribeConfig::default(),
                track: Default::default(),
                cpu: Default::default(),
                cuda: Default::default(),
            };
            // The retry at a lower threshold needs a spread selection.
            cfg.detector.low_threshold_retry &= cfg.select.spread != Spread::None;
            // Descriptors (ORB's pattern) need the 31-pixel patch: about half the cases.
            let describe = cfg.canny.l2_gradient ^ cfg.detector.nonmax_suppression;
            if describe {
                cfg.orient.patch_size = 31;
            }
            // The orientation patch must fit inside the border.
            if cfg.orient.enabled {
                cfg.orient.patch_size = cfg.orient.patch_size.min(2 * cfg.detector.border - 1);
            }
            cfg.describe.enabled = describe && cfg.orient.patch_size == 31;
            // The descriptor blur as ORB-SLAM3 calls it, with its level scales.
            if cfg.pyramid.scales == Scales::OrbSlam3 {
                cfg.describe.blur = DescriptorBlur::OrbSlam3;
            }
            cfg.validate()
                .unwrap_or_else(|e| panic!("strategy made {e}"));
            cfg
        })
}

/// [`valid_config`]'s pyramid: 1 to 32 levels, scales from barely above 1 to 4.
fn pyramid_config() -> impl Strategy<Value = PyramidConfig> {
    (
        prop_oneof![1u32..=3, 4u32..=12, Just(32u32)],
        prop_oneof![
            Just(1.2f32),
            Just(4.0f32),
            Just(2.0f32),
            Just(1.0001f32),
            1.0001f32..4.0
        ],
        prop_oneof![
            Just(Interpolation::Linear),
            Just(Interpolation::LinearExact)
        ],
        prop_oneof![Just(Scales::Orb), Just(Scales::OrbSlam3)],
    )
        .prop_map(
            |(levels, scale_factor, interpolation, scales)| PyramidConfig {
                levels,
                scale_factor,
                interpolation,
                scales,
            },
        )
}

/// [`valid_config`]'s detector (its retry flag before the selection is known).
fn detector_config() -> impl Strategy<Value = DetectorConfig> {
    (
        prop_oneof![
            4 => Just(DetectorMethod::Fast),
            2 => Just(DetectorMethod::Harris),
            1 => Just(DetectorMethod::None)
        ],
        1u32..=255,
        any::<u32>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![3u32..=6, 7u32..=40, Just(256u32)],
        prop_oneof![Just(ScoreType::Harris), Just(ScoreType::Fast)],
        prop_oneof![Just(0.04f32), 0.0001f32..0.2499],
        (1u32..=15).prop_map(|k| 2 * k + 1),
        1u32..=31,
        prop::sample::select(vec![3u32, 5, 7]),
        prop_oneof![Just(0.01f32), Just(1.0f32), 0.0001f32..=1.0],
    )
        .prop_map(|d| DetectorConfig {
            method: d.0,
            fast_threshold: d.1,
            min_fast_threshold: 1 + d.2 % d.1,
            low_threshold_retry: d.3,
            nonmax_suppression: d.4,
            border: d.5,
            score: d.6,
            harris_k: d.7,
            harris_block_size: d.8,
            dense_block_size: d.9,
            dense_ksize: d.10,
            dense_quality: d.11,
        })
}

/// [`valid_config`]'s selection: budgets from none to a million, every spread and cell size.
fn select_config() -> impl Strategy<Value = SelectConfig> {
    (
        prop_oneof![
            Just(0u32),
            Just(1u32),
            2u32..=50,
            Just(2000u32),
            Just(1_000_000u32)
        ],
        prop_oneof![
            Just(Spread::None),
            Just(Spread::Grid),
            Just(Spread::Quadtree)
        ],
        prop_oneof![Just(8u32), 8u32..=64, Just(1024u32)],
    )
        .prop_map(|(max_keypoints, spread, cell_size)| SelectConfig {
            max_keypoints,
            spread,
            cell_size,
        })
}

/// [`valid_config`]'s Canny: thresholds from 0 to 1e300 in either order, blurs up to 31.
fn canny_config() -> impl Strategy<Value = CannyConfig> {
    (
        any::<bool>(),
        prop_oneof![Just(0.0f64), 0.0f64..400.0, Just(1e300)],
        prop_oneof![Just(0.0f64), 0.0f64..400.0, Just(1e300)],
        any::<bool>(),
        prop_oneof![Just(0u32), (1u32..=15).prop_map(|k| 2 * k + 1)],
        prop_oneof![Just(0.0f64), 0.0f64..20.0, Just(1e6)],
    )
        .prop_map(|c| CannyConfig {
            enabled: c.0,
            low_threshold: c.1,
            high_threshold: c.2,
            l2_gradient: c.3,
            blur_ksize: c.4,
            blur_sigma: c.5,
        })
}

proptest! {
    #![proptest_config(cases(600))]

    /// Arbitrary geometry / encoding / length: `ImageView::new` errs, or the CPU pipeline
    /// gives a sane, deterministic result.
    #[test]
    fn arbitrary_frames(
        width in side(),
        height in side(),
        step in step_spec(),
        enc in encoding_string(),
        big_endian in any::<bool>(),
        len in len_spec(),
        seed in any::<u64>(),
        cfg in valid_config(),
    ) {
        let bpp = Encoding::parse(&enc).map(|e| e.bytes_per_pixel()).unwrap_or(1);
        let row = width.saturating_mul(bpp);
        let step = match step {
            StepSpec::Packed(p) => row.saturating_add(p),
            StepSpec::Short(k) => row.saturating_sub(k),
            StepSpec::Any(s) => s,
        };
        let need = step.saturating_mul(height);
        let len = match len {
            LenSpec::Exact => need,
            LenSpec::Plus(k) => need.saturating_add(k),
            LenSpec::Minus(k) => need.saturating_sub(k),
            LenSpec::LastRowOnly => step.saturating_mul(height.saturating_sub(1)).saturating_add(row),
            LenSpec::Any(n) => n,
        };
        // Never allocate more than a few MB in a test: huge geometries get a short buffer.
        let len = len.min(1 << 22);
        let data = pattern(len, seed);
        match ImageView::new(&data, width, height, step, &enc, big_endian) {
            Err(e) => {
                prop_assert!(!e.to_string().is_empty());
            }
            Ok(view) => {
                prop_assert!(width > 0 && height > 0 && width <= MAX_SIDE && height <= MAX_SIDE);
                prop_assert!(step >= row && data.len() >= step * height);
                let mut reused = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
                // Another resolution first, so `reused` has buffers of the wrong size.
                let other = pattern(57 * 31, seed ^ 1);
                reused.process(&ImageView::mono8(&other, 57, 31).unwrap()).unwrap();
                process_checked(&cfg, &view, &mut reused);
            }
        }
    }
}

/// Every size 1..=40 on one axis (with a spread of sizes on the other), every encoding,
/// every preset.
#[test]
fn tiny_frames_every_encoding_and_preset() {
    let small = [1usize, 2, 3, 4, 5, 7, 8, 13, 21, 34, 40];
    let mut sizes: Vec<(usize, usize)> = Vec::new();
    for a in 1..=40 {
        for &b in &small {
            sizes.push((a, b));
            sizes.push((b, a));
        }
    }
    sizes.sort();
    sizes.dedup();
    let mut reused = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
    let (mut runs, mut keypoints) = (0, 0);
    for (name, cfg) in presets() {
        for enc in Encoding::ALL {
            for &(w, h) in &sizes {
                let step = w * enc.bytes_per_pixel() + (w % 3);
                let data = pattern(step * h, (w * 131 + h) as u64);
                let view = match ImageView::with_encoding(&data, w, h, step, enc, w % 2 == 0) {
                    Ok(v) => v,
                    Err(e) => {
                        assert!(
                            matches!(enc, Encoding::Uyvy | Encoding::Yuyv) && w % 2 == 1,
                            "{name} {enc:?} {w}x{h}: {e}"
                        );
                        continue;
                    }
                };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    process_checked(cfg, &view, &mut reused)
                }));
                match r {
                    Ok(f) => keypoints += f.keypoints.len(),
                    Err(_) => panic!("preset {name}, {enc:?}, {w}x{h} (step {step}) panicked"),
                }
                runs += 1;
            }
        }
    }
    assert!(runs > 10_000, "{runs}");
    // Not vacuous: the small frames do have corners.
    assert!(keypoints > 1000, "{keypoints} keypoints in {runs} runs");
}

// ---------------------------------------------------------------------------------------------
// Config

/// A small real image: a crop of the graf photo.
fn real_image() -> &'static Frame {
    static F: OnceLock<Frame> = OnceLock::new();
    F.get_or_init(|| pan("graf1.png", 1, 96, 64).remove(0))
}

fn process_real(cfg: &Config) {
    let f = real_image();
    let mut p = Pipeline::new(cfg.clone(), BackendChoice::Cpu)
        .unwrap_or_else(|e| panic!("validated config refused by Pipeline::new: {e}"));
    let view = ImageView::with_encoding(
        &f.rgb,
        f.width,
        f.height,
        f.width * 3,
        Encoding::Rgb8,
        false,
    )
    .unwrap();
    let out = p.process(&view).unwrap();
    check_features(&out, cfg, f.width, f.height);
}

fn flat_keys() -> Vec<String> {
    Config::default()
        .flatten()
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// Scalar values in YAML syntax: numbers of every size and sign, NaN / inf spellings,
/// wrong types, junk.
fn yaml_scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<i64>().prop_map(|v| v.to_string()),
        3 => (-5i64..300).prop_map(|v| v.to_string()),
        2 => any::<f64>().prop_map(|v| format!("{v:?}")),
        2 => (-2.0f64..600.0).prop_map(|v| v.to_string()),
        3 => prop::sample::select(vec![
            "nan", ".nan", "NaN", ".inf", "-.inf", "inf", "-inf", "1e400", "-1e400", "1e-400",
            "18446744073709551616", "4294967296", "4294967295", "-1", "0", "0.0", "-0.0",
            "true", "false", "yes", "~", "null", "", "\"\"", "'20'", "\"fast\"", "[1, 2]", "{a: 1}",
            "fast", "harris", "none", "grid", "quadtree", "linear", "linear_exact", "Fast",
            "0x10", "0o17", "1_000", "+5", "3.", ".5", "!!binary aGk=", "&a 1", "*a", "- 1",
            "a: b", "[", "{", "\"unterminated", "1 # comment", "\u{1F600}", "2000000",
            "1000001", "255", "256", "31", "33", "127", "129", "1.2", "4.0", "4.0000001",
        ])
        .prop_map(String::from),
        1 => any::<String>(),
    ]
}

/// The message names the key (the dotted path, or for serde errors at least its last part).
fn names_key(msg: &str, key: &str) -> bool {
    msg.contains(key)
}

proptest! {
    #![proptest_config(cases(400))]

    /// Dotted updates with random values: a validated config the pipeline takes, or an
    /// error naming the key.
    #[test]
    fn config_with_value(updates in prop::collection::vec((any::<prop::sample::Index>(), yaml_scalar()), 1..4)) {
        let keys = flat_keys();
        let mut cfg = Config::default();
        for (i, v) in &updates {
            let key = i.get(&keys);
            match cfg.with_value(key, v) {
                Ok(c) => {
                    prop_assert!(c.validate().is_ok());
                    process_real(&c);
                    cfg = c;
                }
                Err(e) => {
                    let msg = e.to_string();
                    prop_assert!(names_key(&msg, key), "{key} = {v:?}: error does not name the key: {msg}");
                }
            }
        }
    }

    /// Unknown / malformed dotted keys.
    #[test]
    fn config_with_value_bad_keys(key in prop_oneof![
        any::<String>(),
        prop::sample::select(vec![
            "", ".", "..", "canny.", ".canny", "canny..low_threshold", "canny.low_threshold.x",
            "pyramid", "canny.low_threshold ", "CANNY.low_threshold", "select.max_keypoints.0",
        ]).prop_map(String::from),
    ], v in yaml_scalar()) {
        if let Err(e) = Config::default().with_value(&key, &v) {
            prop_assert!(!e.to_string().is_empty());
        } else {
            // Only a real key can succeed.
            prop_assert!(flat_keys().contains(&key), "{key:?} accepted");
        }
    }

    /// Random YAML documents (made of real and made-up keys and random values): a validated
    /// config, or an error naming the offending key.
    #[test]
    fn config_random_yaml(doc in yaml_doc()) {
        let (text, leaf_keys) = doc;
        match Config::from_yaml(&text) {
            Ok(c) => process_real(&c),
            Err(e) => {
                let msg = e.to_string();
                let named = leaf_keys.iter().any(|k| msg.contains(k.as_str()))
                    || msg.contains("line ");
                prop_assert!(named, "error names none of {leaf_keys:?}: {msg}\n--- doc:\n{text}");
            }
        }
    }

    /// Byte-level mutations of the documented default.yaml and arbitrary text.
    #[test]
    fn config_mutated_text(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6), junk in any::<String>(), use_junk in any::<bool>()) {
        let text = if use_junk {
            junk
        } else {
            let mut b = std::fs::read(format!("{}/config/default.yaml", env!("CARGO_MANIFEST_DIR"))).unwrap();
            for (i, v) in &edits {
                let i = i.index(b.len());
                b[i] = *v;
            }
            String::from_utf8_lossy(&b).into_owned()
        };
        match Config::from_yaml(&text) {
            Ok(c) => process_real(&c),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

/// A YAML document over the config's sections and keys (and made-up ones), and the keys it
/// mentions as `section.key` and `key`.
fn yaml_doc() -> impl Strategy<Value = (String, Vec<String>)> {
    let keys = flat_keys();
    let entry = (
        prop_oneof![
            8 => prop::sample::select(keys).prop_map(|k| k.to_string()),
            1 => "[a-z_]{1,8}\\.[a-z_]{1,8}",
            1 => "[a-z_]{1,8}",
        ],
        yaml_scalar(),
    );
    prop::collection::vec(entry, 0..8).prop_map(|entries| {
        let mut tree: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        let mut mentioned = Vec::new();
        let mut top = Vec::new();
        for (k, v) in entries {
            match k.split_once('.') {
                Some((s, f)) => {
                    mentioned.push(k.clone());
                    mentioned.push(f.to_string());
                    mentioned.push(s.to_string());
                    tree.entry(s.to_string())
                        .or_default()
                        .push((f.to_string(), v));
                }
                None => {
                    mentioned.push(k.clone());
                    top.push((k, v));
                }
            }
        }
        let mut text = String::new();
        for (k, v) in top {
            text.push_str(&format!("{k}: {v}\n"));
        }
        for (s, fields) in tree {
            text.push_str(&format!("{s}:\n"));
            for (f, v) in fields {
                text.push_str(&format!("  {f}: {v}\n"));
            }
        }
        (text, mentioned)
    })
}

// ---------------------------------------------------------------------------------------------
// Bags

const N_FRAMES: usize = 3;

struct GoodBags {
    mcap: Vec<u8>,
    db3: Vec<u8>,
    mcap_meta: String,
    db3_meta: String,
}

fn good_bags() -> &'static GoodBags {
    static B: OnceLock<GoodBags> = OnceLock::new();
    B.get_or_init(|| {
        let frames = pan("graf1.png", N_FRAMES, 48, 40);
        let dir = scratch("robust_good");
        write_mcap(&dir.join("bag_0.mcap"), &frames, true);
        write_db3_dir(&dir.join("db3"), &frames, true);
        let n = N_FRAMES as u64;
        let topics = vec![
            (RAW.to_string(), cdr::IMAGE.to_string(), n),
            (COMPRESSED.to_string(), cdr::COMPRESSED_IMAGE.to_string(), n),
            (CHATTER.to_string(), "std_msgs/msg/String".to_string(), n),
        ];
        write_metadata_yaml(
            &dir,
            StorageKind::Mcap,
            &["bag_0.mcap"],
            &topics,
            log_time(0),
            log_time(N_FRAMES - 1),
        )
        .unwrap();
        GoodBags {
            mcap: std::fs::read(dir.join("bag_0.mcap")).unwrap(),
            db3: std::fs::read(dir.join("db3/bag_0.db3")).unwrap(),
            mcap_meta: std::fs::read_to_string(dir.join("metadata.yaml")).unwrap(),
            db3_meta: std::fs::read_to_string(dir.join("db3/metadata.yaml")).unwrap(),
        }
    })
}

#[derive(Clone, Debug)]
enum Corruption {
    Truncate(prop::sample::Index),
    Flip(Vec<(prop::sample::Index, u8)>),
    Overwrite(prop::sample::Index, usize, u8),
    /// Swap two MCAP records (or two sqlite pages).
    Swap(prop::sample::Index, prop::sample::Index),
    /// metadata.yaml emptied or NUL-filled (directory bags).
    ZeroMeta(bool),
    /// Byte edits of metadata.yaml (directory bags).
    EditMeta(Vec<(prop::sample::Index, u8)>),
}

fn corruption() -> impl Strategy<Value = Corruption> {
    let idx = any::<prop::sample::Index>;
    prop_oneof![
        3 => idx().prop_map(Corruption::Truncate),
        3 => prop::collection::vec((idx(), 1u8..=255), 1..8).prop_map(Corruption::Flip),
        2 => (idx(), 1usize..512, any::<u8>()).prop_map(|(i, n, b)| Corruption::Overwrite(i, n, b)),
        2 => (idx(), idx()).prop_map(|(a, b)| Corruption::Swap(a, b)),
        1 => any::<bool>().prop_map(Corruption::ZeroMeta),
        1 => prop::collection::vec((idx(), any::<u8>()), 1..6).prop_map(Corruption::EditMeta),
    ]
}

/// Byte ranges of the MCAP records after the leading magic (opcode, u64 length, body).
fn mcap_records(b: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut p = 8;
    while p + 9 <= b.len() {
        let len = u64::from_le_bytes(b[p + 1..p + 9].try_into().unwrap());
        let Some(end) = (p as u64 + 9)
            .checked_add(len)
            .filter(|&e| e <= b.len() as u64)
        else {
            break;
        };
        out.push(p..end as usize);
        p = end as usize;
    }
    out
}

fn apply(c: &Corruption, file: &mut Vec<u8>, meta: &mut Vec<u8>, kind: StorageKind) {
    match c {
        Corruption::Truncate(i) => {
            let n = i.index(file.len().max(1));
            file.truncate(n);
        }
        Corruption::Flip(flips) => {
            if !file.is_empty() {
                for (i, x) in flips {
                    let i = i.index(file.len());
                    file[i] ^= x;
                }
            }
        }
        Corruption::Overwrite(i, n, v) => {
            if !file.is_empty() {
                let s = i.index(file.len());
                let e = (s + n).min(file.len());
                file[s..e].fill(*v);
            }
        }
        Corruption::Swap(a, b) => match kind {
            StorageKind::Mcap => {
                let recs = mcap_records(file);
                if recs.len() >= 2 {
                    let (ra, rb) = (&recs[a.index(recs.len())], &recs[b.index(recs.len())]);
                    let (x, y) = if ra.start <= rb.start {
                        (ra.clone(), rb.clone())
                    } else {
                        (rb.clone(), ra.clone())
                    };
                    if x != y {
                        let mut v = file[..x.start].to_vec();
                        v.extend_from_slice(&file[y.clone()]);
                        v.extend_from_slice(&file[x.end..y.start]);
                        v.extend_from_slice(&file[x.clone()]);
                        v.extend_from_slice(&file[y.end..]);
                        *file = v;
                    }
                }
            }
            StorageKind::Sqlite3 => {
                let pages = file.len() / 4096;
                if pages >= 2 {
                    let (pa, pb) = (a.index(pages), b.index(pages));
                    if pa != pb {
                        for k in 0..4096 {
                            file.swap(pa * 4096 + k, pb * 4096 + k);
                        }
                    }
                }
            }
        },
        Corruption::ZeroMeta(empty) => {
            if *empty {
                meta.clear();
            } else {
                meta.fill(0);
            }
        }
        Corruption::EditMeta(edits) => {
            if !meta.is_empty() {
                for (i, v) in edits {
                    let i = i.index(meta.len());
                    meta[i] = *v;
                }
            }
        }
    }
}

/// Builds the corrupted bag under `dir/in` and returns the path to open.
fn corrupted_bag(
    dir: &Path,
    kind: StorageKind,
    as_dir: bool,
    corruptions: &[Corruption],
) -> PathBuf {
    let g = good_bags();
    let (mut file, mut meta, name) = match kind {
        StorageKind::Mcap => (
            g.mcap.clone(),
            g.mcap_meta.clone().into_bytes(),
            "bag_0.mcap",
        ),
        StorageKind::Sqlite3 => (g.db3.clone(), g.db3_meta.clone().into_bytes(), "bag_0.db3"),
    };
    for c in corruptions {
        apply(c, &mut file, &mut meta, kind);
    }
    let input = dir.join("in");
    let _ = std::fs::remove_dir_all(&input);
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join(name), &file).unwrap();
    if as_dir {
        std::fs::write(input.join("metadata.yaml"), &meta).unwrap();
        input
    } else {
        input.join(name)
    }
}

/// Reads every message of every topic straight from the reader, decoding image messages.
fn read_all(path: &Path) -> gpu_features::Result<usize> {
    let bag = Bag::open(path)?;
    let topics = bag.topics()?;
    let names: HashSet<String> = topics.iter().map(|t| t.name.clone()).collect();
    let mut n = 0;
    bag.read(&names, &mut |m| {
        n += 1;
        if m.msgtype == cdr::IMAGE || m.msgtype == cdr::COMPRESSED_IMAGE {
            if let Ok(Ok(f)) = replay::decode_frame(m.msgtype, m.data) {
                let _ = f.view();
            }
        }
        Ok(gpu_features::bag::reader::Flow::Continue(()))
    })?;
    Ok(n)
}

/// Outcomes of the corrupted-bag cases: (replay errors, replay successes).
static BAG_OUTCOMES: [std::sync::atomic::AtomicUsize; 2] = [
    std::sync::atomic::AtomicUsize::new(0),
    std::sync::atomic::AtomicUsize::new(0),
];

fn check_replay(bag: &Path, out: &Path) {
    let _ = std::fs::remove_dir_all(out);
    let mut o = options(bag, out);
    o.config.pyramid.levels = 3;
    let r = replay::run(&o);
    BAG_OUTCOMES[r.is_ok() as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if std::env::var_os("ROBUSTNESS_VERBOSE").is_some() {
        match &r {
            Ok(s) => eprintln!("ok: {} frames, {} skipped", s.frames, s.skipped),
            Err(e) => eprintln!("err: {e}"),
        }
    }
    match r {
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert_no_output(out);
            if let Ok(rd) = std::fs::read_dir(out) {
                for e in rd {
                    let n = e.unwrap().file_name().to_string_lossy().into_owned();
                    assert!(!n.ends_with(".partial"), "left {n}");
                }
            }
        }
        Ok(s) => {
            assert!(s.out_bag.is_file());
            assert_eq!(s.frames, s.per_topic.values().sum::<usize>());
            assert!(s.frames >= 1, "Ok with no frame");
            assert!(
                s.frames + s.skipped <= 2 * N_FRAMES,
                "{} frames + {} skipped from a bag of {} images",
                s.frames,
                s.skipped,
                2 * N_FRAMES
            );
            let msgs = read_out(&s.out_bag);
            let mut copied = 0;
            for (t, &n) in &s.per_topic {
                let imgs = msgs.get(t).map_or(0, |v| v.len());
                copied += imgs;
                assert!(imgs >= n, "{t}: {imgs} copies of {n} frames");
                let kps = msgs.get(&replay::keypoints_topic(t)).map_or(0, |v| v.len());
                assert_eq!(kps, n, "{t} keypoints");
                let anns = msgs
                    .get(&replay::annotations_topic(t))
                    .map_or(0, |v| v.len());
                assert_eq!(anns, n, "{t} annotations");
            }
            assert_eq!(copied, s.frames + s.skipped, "input copies");
            assert!(s.report_json.is_file() && s.report_md.is_file());
        }
    }
}

fn bag_case(kind: StorageKind, as_dir: bool, corruptions: &[Corruption]) {
    let tag = format!(
        "robust_{}_{}_{:?}",
        kind.name(),
        as_dir,
        std::thread::current().id()
    )
    .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let bag = corrupted_bag(&dir, kind, as_dir, corruptions);
    let _ = read_all(&bag);
    check_replay(&bag, &dir.join("out"));
}

proptest! {
    #![proptest_config(cases(120))]

    #[test]
    fn corrupt_mcap(as_dir in any::<bool>(), cs in prop::collection::vec(corruption(), 1..4)) {
        bag_case(StorageKind::Mcap, as_dir, &cs);
    }

    #[test]
    fn corrupt_db3(as_dir in any::<bool>(), cs in prop::collection::vec(corruption(), 1..4)) {
        bag_case(StorageKind::Sqlite3, as_dir, &cs);
    }
}

#[test]
fn uncorrupted_bags_replay() {
    for kind in [StorageKind::Mcap, StorageKind::Sqlite3] {
        for as_dir in [false, true] {
            let tag = format!("robust_clean_{}_{as_dir}", kind.name());
            let dir = scratch(&tag);
            let bag = corrupted_bag(&dir, kind, as_dir, &[]);
            assert_eq!(read_all(&bag).unwrap(), 3 * N_FRAMES);
            let mut o = options(&bag, &dir.join("out"));
            o.config.pyramid.levels = 3;
            let s = replay::run(&o).unwrap();
            assert_eq!((s.frames, s.skipped), (2 * N_FRAMES, 0));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CDR

/// Valid messages of every type the crate decodes, to mutate.
fn cdr_samples() -> &'static [(&'static str, Vec<u8>)] {
    static S: OnceLock<Vec<(&'static str, Vec<u8>)>> = OnceLock::new();
    S.get_or_init(|| {
        let f = pan("graf1.png", 1, 8, 6).remove(0);
        let kps = vec![
            gpu_features::Keypoint {
                x: 1.0,
                y: 2.0,
                response: 3.0,
                size: 31.0,
                angle: 45.0,
                octave: 1,
            };
            3
        ];
        let mut scratch = Vec::new();
        vec![
            (cdr::IMAGE, image_msg(0, &f)),
            (cdr::COMPRESSED_IMAGE, compressed_msg(0, &f)),
            (
                cdr::POINT_CLOUD2,
                replay::keypoints_message(&header(0), &kps, None, &mut scratch),
            ),
            (
                cdr::IMAGE_ANNOTATIONS,
                annotations::KeypointAnnotations::default()
                    .encode(header(0).stamp, &kps)
                    .to_vec(),
            ),
        ]
    })
}

/// Decodes `buf` as `t` (and, for image types, through `decode_frame` and `view`); returns
/// whether it decoded.
fn decode_as(t: &str, buf: &[u8]) -> bool {
    match t {
        cdr::IMAGE | cdr::COMPRESSED_IMAGE => {
            let ok = if t == cdr::IMAGE {
                cdr::Image::decode(buf).is_ok()
            } else {
                cdr::CompressedImage::decode(buf).is_ok()
            };
            if let Ok(Ok(f)) = replay::decode_frame(t, buf) {
                let _ = f.header();
                let _ = f.view();
            }
            ok
        }
        cdr::POINT_CLOUD2 => cdr::PointCloud2::decode(buf).is_ok(),
        cdr::IMAGE_ANNOTATIONS => cdr::ImageAnnotations::decode(buf).is_ok(),
        _ => unreachable!(),
    }
}

const CDR_TYPES: [&str; 4] = [
    cdr::IMAGE,
    cdr::COMPRESSED_IMAGE,
    cdr::POINT_CLOUD2,
    cdr::IMAGE_ANNOTATIONS,
];

/// Largest allocation a decode of `len` bytes may make: a few times the input (the decoded
/// structs are a little larger than their wire form, and vectors double).
fn alloc_cap(len: usize) -> usize {
    8 * len + 4096
}

proptest! {
    #![proptest_config(cases(3000))]

    /// Random bytes (with a valid encapsulation header half the time).
    #[test]
    fn cdr_random_bytes(t in prop::sample::select(&CDR_TYPES[..]), mut b in prop::collection::vec(any::<u8>(), 0..200), hdr in any::<bool>(), le in any::<bool>()) {
        if hdr && b.len() >= 4 {
            b[..4].copy_from_slice(if le { &[0, 1, 0, 0] } else { &[0, 0, 0, 0] });
        }
        let (_, peak) = peak_alloc(|| decode_as(t, &b));
        prop_assert!(peak <= alloc_cap(b.len()), "{t}: {peak} bytes allocated for {} input bytes", b.len());
    }

    /// Valid messages with bytes changed, length fields set to huge values, or cut.
    #[test]
    fn cdr_mutated(
        which in 0usize..4,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        bigs in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(vec![u32::MAX, u32::MAX - 1, 1 << 31, 1 << 24, 65536, 0])), 0..3),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
        as_type in prop::option::of(prop::sample::select(&CDR_TYPES[..])),
    ) {
        let (t, good) = &cdr_samples()[which];
        let mut b = good.clone();
        for (i, v) in &edits {
            let i = i.index(b.len());
            b[i] = *v;
        }
        for (i, v) in &bigs {
            // At a 4-aligned position after the encapsulation header, as length fields are.
            let slots = (b.len() - 4) / 4;
            let p = 4 + 4 * i.index(slots);
            b[p..p + 4].copy_from_slice(&v.to_le_bytes());
        }
        if do_cut {
            b.truncate(cut.index(b.len() + 1));
        }
        let t = as_type.unwrap_or(t);
        let (_, peak) = peak_alloc(|| decode_as(t, &b));
        // The compressed image payload is decoded by the image crate: an allocation of
        // the decoded pixel buffer is allowed there (bounded by the crate's limits).
        if t != cdr::COMPRESSED_IMAGE {
            prop_assert!(peak <= alloc_cap(b.len()), "{t}: {peak} bytes allocated for {} input bytes", b.len());
        }
    }
}

#[test]
fn cdr_valid_samples_decode() {
    for (t, b) in cdr_samples() {
        assert!(decode_as(t, b), "{t}");
    }
}

// ---------------------------------------------------------------------------------------------
// CSV and point clouds

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn csv_parse_random(body in prop::collection::vec(prop_oneof![
        any::<String>(),
        "[-0-9.e,a-z ]{0,40}",
        (any::<f32>(), any::<f32>(), any::<f32>(), any::<f32>(), any::<f32>(), any::<i64>())
            .prop_map(|(a, b, c, d, e, f)| format!("{a},{b},{c},{d},{e},{f}")),
        (any::<f32>(), any::<i64>(), "[0-9a-fA-Fg]{62,66}")
            .prop_map(|(a, f, h)| format!("{a},1,2,3,4,{f},{h}")),
    ], 0..6), header in 0..3u8) {
        let mut text = String::new();
        if header > 0 {
            text.push_str(if header == 1 { csv::HEADER } else { csv::HEADER_WITH_DESCRIPTOR });
            text.push('\n');
        }
        for l in &body {
            text.push_str(l);
            text.push('\n');
        }
        if let Ok((kps, desc)) = csv::parse(&text) {
            // What parses writes back and parses to the same values (NaN aside).
            let (again, again_desc) = csv::parse(&csv::to_string(&kps, desc.as_deref())).unwrap();
            prop_assert_eq!(again.len(), kps.len());
            prop_assert_eq!(again_desc, desc);
        }
    }

    #[test]
    fn pointcloud_decode_random(
        b in prop::collection::vec(any::<u8>(), 0..300),
        step in prop_oneof![
            Just(pointcloud::POINT_STEP),
            Just(pointcloud::POINT_STEP_WITH_DESCRIPTOR),
            0usize..100
        ],
    ) {
        let (plain, with) = (pointcloud::POINT_STEP, pointcloud::POINT_STEP_WITH_DESCRIPTOR);
        match pointcloud::decode(&b, step) {
            Some((kps, desc)) => {
                prop_assert_eq!(kps.len() * step, b.len());
                prop_assert_eq!(desc.len(), if step == with { kps.len() } else { 0 });
            }
            None => prop_assert!(b.len() % step.max(1) != 0 || (step != plain && step != with)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Regression tests: minimal inputs the properties above found.

// MCAP by hand, for records no writer would produce.

fn mcap_record(op: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![op];
    v.extend_from_slice(&(body.len() as u64).to_le_bytes());
    v.extend_from_slice(body);
    v
}

fn mcap_str(v: &mut Vec<u8>, s: &str) {
    v.extend_from_slice(&(s.len() as u32).to_le_bytes());
    v.extend_from_slice(s.as_bytes());
}

/// `records` in one zstd frame made of raw (stored) blocks: valid zstd that any decoder
/// reads back byte for byte.
fn zstd_stored(records: &[u8]) -> Vec<u8> {
    let mut z = vec![0x28, 0xb5, 0x2f, 0xfd, 0xa0];
    z.extend_from_slice(&(records.len() as u32).to_le_bytes());
    let blocks: Vec<&[u8]> = records.chunks(100_000).collect();
    for (i, b) in blocks.iter().enumerate() {
        let last = (i + 1 == blocks.len()) as u32;
        z.extend_from_slice(&(last | (b.len() as u32) << 3).to_le_bytes()[..3]);
        z.extend_from_slice(b);
    }
    z
}

/// An MCAP file with no summary: header, one zstd chunk holding an Image schema, a channel
/// on RAW and one message whose record length field says `msg_len` (the true body follows),
/// data end, footer. `claim` gives the chunk header's uncompressed size from the true one.
fn handmade_mcap(msg_len: Option<u64>, claim: fn(u64) -> u64) -> Vec<u8> {
    let mut inner = Vec::new();
    let mut schema = 1u16.to_le_bytes().to_vec();
    mcap_str(&mut schema, cdr::IMAGE);
    mcap_str(&mut schema, "ros2msg");
    mcap_str(&mut schema, &cdr::schema_text(cdr::IMAGE).unwrap());
    inner.extend(mcap_record(0x03, &schema));
    let mut ch = 1u16.to_le_bytes().to_vec();
    ch.extend_from_slice(&1u16.to_le_bytes());
    mcap_str(&mut ch, RAW);
    mcap_str(&mut ch, "cdr");
    ch.extend_from_slice(&0u32.to_le_bytes());
    inner.extend(mcap_record(0x04, &ch));
    let f = pan("graf1.png", 1, 8, 6).remove(0);
    let mut msg = 1u16.to_le_bytes().to_vec();
    msg.extend_from_slice(&1u32.to_le_bytes());
    msg.extend_from_slice(&5u64.to_le_bytes());
    msg.extend_from_slice(&5u64.to_le_bytes());
    msg.extend_from_slice(&image_msg(0, &f));
    let mut m = mcap_record(0x05, &msg);
    if let Some(n) = msg_len {
        m[1..9].copy_from_slice(&n.to_le_bytes());
    }
    inner.extend(m);

    let z = zstd_stored(&inner);
    let mut chunk = Vec::new();
    chunk.extend_from_slice(&5u64.to_le_bytes());
    chunk.extend_from_slice(&5u64.to_le_bytes());
    chunk.extend_from_slice(&claim(inner.len() as u64).to_le_bytes());
    chunk.extend_from_slice(&0u32.to_le_bytes()); // no CRC
    mcap_str(&mut chunk, "zstd");
    chunk.extend_from_slice(&(z.len() as u64).to_le_bytes());
    chunk.extend_from_slice(&z);

    let mut file = b"\x89MCAP0\r\n".to_vec();
    let mut header = Vec::new();
    mcap_str(&mut header, "ros2");
    mcap_str(&mut header, "");
    file.extend(mcap_record(0x01, &header));
    file.extend(mcap_record(0x06, &chunk));
    file.extend(mcap_record(0x0f, &0u32.to_le_bytes()));
    file.extend(mcap_record(0x02, &[0u8; 20]));
    file.extend_from_slice(b"\x89MCAP0\r\n");
    file
}

#[test]
fn handmade_mcap_is_read() {
    let dir = scratch("robust_handmade_ok");
    let p = dir.join("ok.mcap");
    std::fs::write(&p, handmade_mcap(None, |n| n)).unwrap();
    assert_eq!(read_all(&p).unwrap(), 1);
    let s = replay::run(&options(&p, &dir.join("out"))).unwrap();
    assert_eq!((s.frames, s.skipped), (1, 0));
}

/// Found by `corrupt_mcap`: a length field inside a compressed chunk claiming 2^60 bytes
/// made `mcap::MessageStream` reserve that much and abort the process ("memory allocation of
/// 1152921504606846985 bytes failed"). And a chunk header claiming more decompressed bytes
/// than the chunk holds made it spin forever. Both are errors now.
#[test]
fn regression_mcap_corrupt_sizes_in_chunk() {
    let dir = scratch("robust_huge_record");
    for (name, bytes) in [
        ("record", handmade_mcap(Some(1 << 60), |n| n)),
        ("record_max", handmade_mcap(Some(u64::MAX), |n| n)),
        ("record_past_end", handmade_mcap(Some(5000), |n| n)),
        ("chunk_huge", handmade_mcap(None, |_| 1 << 60)),
        ("chunk_longer", handmade_mcap(None, |n| n + 100)),
        ("chunk_shorter", handmade_mcap(None, |n| n - 1)),
        ("chunk_zero", handmade_mcap(None, |_| 0)),
    ] {
        let p = dir.join(format!("{name}.mcap"));
        std::fs::write(&p, bytes).unwrap();
        let e = read_all(&p).unwrap_err().to_string();
        assert!(e.contains("MCAP") && e.contains("corrupt"), "{name}: {e}");
        let out = dir.join(format!("out_{name}"));
        let e = replay::run(&options(&p, &out)).unwrap_err().to_string();
        assert!(e.contains("MCAP"), "{name}: {e}");
        assert_no_output(&out);
    }
}

/// Found by `config_with_value`: a wrong type through a dotted update was an error that
/// did not say which key ("invalid type: integer `0`, expected a Value::Tagged enum"), and
/// the cross-field checks named neither `orient.patch_size` nor `detector.fast_threshold`
/// when those were the keys being set.
#[test]
fn regression_config_errors_name_the_key() {
    let c = Config::default();
    for (key, value, want) in [
        ("pyramid.interpolation", "0", "unknown variant"),
        ("detector.method", "[1]", "invalid type"),
        ("pyramid.levels", "-1", "expected u32"),
        ("canny.low_threshold", "x", "invalid type"),
        ("canny.enabled", "2", "invalid type"),
        ("orient.patch_size", "73", "detector.border >= 37"),
        (
            "detector.fast_threshold",
            "5",
            "detector.min_fast_threshold",
        ),
        ("select.max_keypoints", "4294967296", "expected u32"),
    ] {
        let e = c.with_value(key, value).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(want), "{key} = {value}: {e}");
        // The line/column of the internal YAML text would only confuse.
        assert!(!e.contains(" at line "), "{key} = {value}: {e}");
    }
}

/// The bounded MCAP reader reads what the `mcap` writer produces with every compression,
/// chunked or not, CRCs on or off.
#[test]
fn mcap_every_compression_is_read() {
    let dir = scratch("robust_compressions");
    let f = pan("graf1.png", 1, 16, 12).remove(0);
    let cases = [
        (Some(mcap::Compression::Zstd), true),
        (Some(mcap::Compression::Lz4), true),
        (None, true),
        (None, false),
    ];
    for (i, (compression, chunked)) in cases.into_iter().enumerate() {
        let p = dir.join(format!("c{i}.mcap"));
        {
            let file = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
            let mut w = mcap::WriteOptions::new()
                .profile("ros2")
                .compression(compression)
                .use_chunks(chunked)
                .calculate_chunk_crcs(i % 2 == 0)
                .create(file)
                .unwrap();
            let text = cdr::schema_text(cdr::IMAGE).unwrap();
            let s = w
                .add_schema(cdr::IMAGE, "ros2msg", text.as_bytes())
                .unwrap();
            let ch = w.add_channel(s, RAW, "cdr", &BTreeMap::new()).unwrap();
            for k in 0..5u64 {
                let h = mcap::records::MessageHeader {
                    channel_id: ch,
                    sequence: k as u32,
                    log_time: k,
                    publish_time: k,
                };
                w.write_to_known_channel(&h, &image_msg(k as usize, &f))
                    .unwrap();
            }
            w.finish().unwrap();
        }
        assert_eq!(
            read_all(&p).unwrap(),
            5,
            "{compression:?} chunked {chunked}"
        );
        let s = replay::run(&options(&p, &dir.join(format!("out{i}")))).unwrap();
        assert_eq!((s.frames, s.skipped), (5, 0));
    }
}

// ---------------------------------------------------------------------------------------------
// Image files (issue 11: fuzzing and bad files on the CLI).

fn jpeg_of(f: &Frame) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    ::image::write_buffer_with_format(
        &mut out,
        &f.rgb,
        f.width as u32,
        f.height as u32,
        ::image::ExtendedColorType::Rgb8,
        ::image::ImageFormat::Jpeg,
    )
    .unwrap();
    out.into_inner()
}

/// Regression: the JPEG decoder returned a whole image for a file cut anywhere after its
/// headers (the missing rows gray), so `detect` reported keypoints for a truncated file. Every
/// cut must now be an error that says "truncated"; bytes after the end marker stay allowed.
#[test]
fn regression_truncated_jpeg_is_an_error() {
    let f = &pan("graf1.png", 1, 64, 48)[0];
    let jpeg = jpeg_of(f);
    assert!(gpu_features::image::decode_encoded(&jpeg).is_ok());
    let mut trailer = jpeg.clone();
    trailer.extend(b"camera maker trailer \xff\xd8 with marker-like bytes");
    let a = gpu_features::image::decode_encoded(&jpeg).unwrap();
    let b = gpu_features::image::decode_encoded(&trailer).unwrap();
    assert_eq!(
        a.data, b.data,
        "a trailer after the end marker changes nothing"
    );
    for cut in (2..jpeg.len())
        .step_by(7)
        .chain([jpeg.len() - 2, jpeg.len() - 1])
    {
        let e = gpu_features::image::decode_encoded(&jpeg[..cut])
            .err()
            .unwrap_or_else(|| panic!("JPEG cut at {cut} of {} decoded", jpeg.len()));
        assert!(
            e.contains("truncated") || e.contains("JPEG") || e.contains("Jpeg"),
            "{e}"
        );
    }
}

/// A PNG header declaring 20000 x 20000 (over `MAX_SIDE`) is refused before any pixel buffer
/// is allocated, from memory and from a file; an empty file says so.
#[test]
fn oversized_png_header_allocates_nothing_large() {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend(20000u32.to_be_bytes());
    ihdr.extend(20000u32.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]);
    shared::png_chunk(&mut png, b"IHDR", &ihdr);
    shared::png_chunk(
        &mut png,
        b"IDAT",
        &[0x78, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
    );
    shared::png_chunk(&mut png, b"IEND", &[]);
    const { assert!(20000 > MAX_SIDE) };
    let (r, peak) = peak_alloc(|| gpu_features::image::decode_encoded(&png));
    assert!(r.unwrap_err().contains("larger than the limit"));
    assert!(peak < 1 << 20, "peak allocation {peak}");
    let dir = scratch("oversized_png");
    let p = dir.join("huge.png");
    std::fs::write(&p, &png).unwrap();
    let (r, peak) = peak_alloc(|| gpu_features::image::load_view_owned(&p));
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("huge.png") && e.contains("larger than the limit"),
        "{e}"
    );
    assert!(peak < 1 << 20, "peak allocation {peak}");
    std::fs::write(&p, b"").unwrap();
    let e = gpu_features::image::load_view_owned(&p)
        .unwrap_err()
        .to_string();
    assert!(e.contains("huge.png") && e.contains("empty"), "{e}");
    assert!(gpu_features::image::decode_encoded(b"").is_err());
}

/// Regression (found by the `bag` fuzz target, `fuzz/corpus/bag/regression-oom-*`): a
/// corrupt string length in a Schema or Channel record (here in the summary section, which
/// `mcap::Summary::read` parses when the topics are listed) made the `mcap` crate reserve
/// that many bytes, 3 GB from a 4 KB file. Every such prefix is now checked against its
/// record first: a clear "corrupt" error and no large allocation.
#[test]
fn regression_mcap_string_length_in_summary() {
    let dir = scratch("mcap_string_length");
    let good = dir.join("good.mcap");
    write_mcap(&good, &pan("graf1.png", 1, 32, 24), false);
    let bytes = std::fs::read(&good).unwrap();
    let targets: Vec<usize> = mcap_records(&bytes)
        .into_iter()
        .filter(|r| matches!(bytes[r.start], 0x03 | 0x04))
        .map(|r| r.start + 9 + 2) // after the u16 id: the name / schema id ...
        .collect();
    assert!(
        targets.len() >= 2,
        "schema and channel records at top level"
    );
    for (i, &at) in targets.iter().enumerate() {
        let mut b = bytes.clone();
        // Schema: the name's length; Channel: the schema id then the topic's length.
        let at = if bytes[at - 11] == 0x04 { at + 2 } else { at };
        b[at..at + 4].copy_from_slice(&0xB3B3_B3B3u32.to_le_bytes());
        let p = dir.join(format!("bad{i}.mcap"));
        std::fs::write(&p, &b).unwrap();
        let (r, peak) = peak_alloc(|| read_all(&p));
        let e = r.expect_err("a corrupt length is an error").to_string();
        assert!(e.contains("corrupt"), "{e}");
        assert!(peak < 64 << 20, "record {i}: peak allocation {peak}");
    }
}

/// Regression (found by the `bag` fuzz target after 800k inputs): an MCAP Attachment record
/// whose data ends less than 4 bytes (its CRC) before the record's end made the `mcap`
/// crate's `parse_record` slice out of bounds and panic. The input the fuzzer found (99
/// bytes) must now be a "corrupt" error.
#[test]
fn regression_mcap_attachment_without_crc() {
    let bytes = include_bytes!("../fuzz/corpus/bag/regression-panic-mcap-attachment-crc");
    let dir = scratch("mcap_attachment_crc");
    let p = dir.join("a.mcap");
    std::fs::write(&p, bytes).unwrap();
    let e = std::panic::catch_unwind(|| read_all(&p))
        .expect("no panic")
        .expect_err("a corrupt attachment is an error")
        .to_string();
    assert!(e.contains("corrupt"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// The tracker allocates nothing per frame after the first two frames of a size (issue 27): its
// per-track buffers are reserved for `max_features`, the image-sized ones (two pyramids) grow
// on the first two. The real sequence three times (every later frame counted), mono with the
// fundamental-matrix test on (config/default.yaml's `track.ransac_threshold: 1.0`) and
// stereo.

#[test]
fn the_tracker_allocates_nothing_per_frame_after_the_first_two() {
    use gpu_features::track::{TrackParams, Tracker};
    let frames = shared::sequence();
    let mut mono = Tracker::new(TrackParams {
        ransac_threshold: 1.0,
        ..Default::default()
    });
    let mut stereo = Tracker::new(TrackParams::default());
    let pairs: Vec<_> = frames.iter().map(shared::stereo_pair).collect();
    let mut stamp = 0.0;
    for pass in 0..3 {
        for (k, (img, (l, r))) in frames.iter().zip(&pairs).enumerate() {
            stamp += 1.0 / 30.0;
            let (n, allocs) = count_allocs(|| mono.track(img, stamp, None).len());
            let ((), stereo_allocs) = count_allocs(|| {
                stereo.track_stereo(l, r, stamp, (None, None)).unwrap();
            });
            assert!(n > 0 && !stereo.right_tracks().is_empty());
            // The two pyramids (previous, current) and their derivatives: frames 0 and 1.
            if pass > 0 || k > 1 {
                assert_eq!(
                    allocs, 0,
                    "mono, pass {pass} frame {k}: {allocs} allocations"
                );
                assert_eq!(stereo_allocs, 0, "stereo, pass {pass} frame {k}");
            }
        }
    }
}

#[test]
fn the_host_quadtree_allocates_nothing_once_warm() {
    // ORB-SLAM3's DistributeOctTree on the host (the GPU path's selection with
    // `select.spread: quadtree`): its buffers are kept per thread, so after the first
    // frames a call allocates nothing, at both of ORB-SLAM3's budgets.
    use gpu_features::select::{quadtree, QuadtreeArea};
    let frames = shared::sequence();
    let candidates: Vec<_> = frames
        .iter()
        .map(|img| gpu_features::cpu::fast::detect(img, 7, false))
        .collect();
    let mut work = Vec::with_capacity(candidates.iter().map(Vec::len).max().unwrap_or(0));
    for pass in 0..2 {
        for (k, (c, img)) in candidates.iter().zip(&frames).enumerate() {
            for n in [1000, 5000] {
                let area = QuadtreeArea {
                    width: img.width,
                    height: img.height,
                    border: 19,
                    cell: Some(35),
                };
                work.clear();
                work.extend_from_slice(c);
                let ((), allocs) = count_allocs(|| quadtree(&mut work, n, area));
                assert!(!work.is_empty() && work.len() <= n + 2, "frame {k}");
                if pass > 0 {
                    assert_eq!(allocs, 0, "frame {k}, {n} points: {allocs} allocations");
                }
            }
        }
    }
}
