//! The shipped presets load, validate, and say what their names promise.

use gpu_features::config::{DetectorMethod, Interpolation, ScoreType, Spread};
use gpu_features::Config;

fn preset(name: &str) -> Config {
    let path = format!("{}/config/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    Config::from_file(std::path::Path::new(&path)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn default_yaml_is_the_built_in_default() {
    assert_eq!(preset("default"), Config::default());
}

#[test]
fn opencv_fast_is_plain_fast() {
    let c = preset("opencv_fast");
    assert_eq!(c.pyramid.levels, 1);
    assert_eq!(c.detector.method, DetectorMethod::Fast);
    assert_eq!(
        (c.detector.fast_threshold, c.detector.nonmax_suppression),
        (20, true)
    );
    assert_eq!(c.detector.score, ScoreType::Fast);
    assert!(c.detector.border <= 3);
    assert_eq!(c.select.max_keypoints, 0);
    assert!(!c.orient.enabled && !c.canny.enabled);
}

#[test]
fn opencv_canny_presets() {
    for (name, l2) in [("opencv_canny", true), ("opencv_canny_l1", false)] {
        let c = preset(name);
        assert_eq!(c.detector.method, DetectorMethod::None, "{name}");
        assert!(c.canny.enabled);
        assert_eq!(
            (c.canny.low_threshold, c.canny.high_threshold),
            (50.0, 150.0)
        );
        assert_eq!((c.canny.l2_gradient, c.canny.blur_ksize), (l2, 0));
    }
}

#[test]
fn opencv_orb_and_orb_slam3() {
    let c = preset("opencv_orb");
    assert_eq!((c.pyramid.levels, c.pyramid.scale_factor), (8, 1.2));
    assert_eq!(c.pyramid.interpolation, Interpolation::LinearExact);
    assert_eq!(
        (c.select.max_keypoints, c.select.spread),
        (2000, Spread::None)
    );
    assert_eq!(
        (c.detector.score, c.detector.border),
        (ScoreType::Harris, 31)
    );
    let s = preset("orb_slam3");
    assert_eq!(
        (s.detector.fast_threshold, s.detector.min_fast_threshold),
        (20, 7)
    );
    assert!(s.detector.low_threshold_retry);
    assert_eq!(s.select.spread, Spread::Quadtree);
}

#[test]
fn bad_files_name_the_problem() {
    let dir = std::env::temp_dir().join(format!("gf_cfg_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.yaml");
    std::fs::write(&p, "select:\n  max_keypoints: -3\n").unwrap();
    let e = Config::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("bad.yaml") && e.contains("max_keypoints"), "{e}");
    std::fs::write(&p, "orient:\n  patch_size: 30\n").unwrap();
    let e = Config::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("orient.patch_size"), "{e}");
    assert!(Config::from_file(&dir.join("missing.yaml")).is_err());
}

#[test]
fn vins_frontend_is_tracks_only() {
    let v = preset("vins_frontend");
    assert!(v.track.enabled);
    assert_eq!(
        (v.track.max_features, v.track.window, v.track.levels),
        (150, 21, 3)
    );
    assert_eq!(v.detector.method, DetectorMethod::None);
    assert_eq!(
        (v.track.mask_order, v.track.lifting),
        (
            gpu_features::config::MaskOrder::Vins,
            gpu_features::config::Lifting::Camodocal
        )
    );
    assert!(!v.canny.enabled && !v.describe.enabled);
    assert!(
        !Config::default().track.enabled,
        "tracking is off by default"
    );
    let e = Config::default()
        .with_set("track.window=20")
        .unwrap_err()
        .to_string();
    assert!(e.contains("track.window"), "{e}");
}
