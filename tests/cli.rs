//! The `gpu_features detect` command end to end: presets reproduce OpenCV's outputs through
//! the files a user gets, bad inputs fail loudly without stopping the batch.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpu_features::image::load_view_owned;
use gpu_features::output::csv;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn out_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn detect(args: &[&str], out: &Path, images: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu_features"));
    cmd.arg("detect").args(args).arg("--out").arg(out);
    for i in images {
        cmd.arg(Path::new(ROOT).join(i));
    }
    cmd.output().unwrap()
}

fn golden_fast(stem: &str) -> Vec<(u32, u32, f32)> {
    let text =
        std::fs::read_to_string(format!("{ROOT}/tests/golden/{stem}/fast_t20_nms.csv")).unwrap();
    let mut v: Vec<_> = text
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect();
    v.sort_by_key(|&(x, y, _)| (y, x));
    v
}

#[test]
fn opencv_fast_preset_writes_cv_fast_output() {
    let out = out_dir("cli_fast");
    let o = detect(
        &[
            "--backend",
            "cpu",
            "--config",
            &format!("{ROOT}/config/opencv_fast.yaml"),
        ],
        &out,
        &["tests/data/graf1.png", "tests/data/box.png"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for stem in ["graf1", "box"] {
        let text = std::fs::read_to_string(out.join(format!("{stem}.keypoints.csv"))).unwrap();
        let (kps, descriptors) = csv::parse(&text).unwrap();
        assert!(descriptors.is_none(), "cv::FAST computes no descriptors");
        let got: Vec<_> = kps
            .iter()
            .map(|k| {
                assert_eq!((k.angle, k.size, k.octave), (-1.0, 7.0, 0));
                (k.x as u32, k.y as u32, k.response)
            })
            .collect();
        assert_eq!(got, golden_fast(stem), "{stem}");
        assert!(
            !out.join(format!("{stem}.edges.png")).exists(),
            "canny is off in the preset"
        );
        assert!(out.join(format!("{stem}.overlay.png")).exists());
    }
}

#[test]
fn opencv_canny_presets_write_cv_canny_maps() {
    for (preset, golden) in [
        ("opencv_canny", "canny_50_150_l2"),
        ("opencv_canny_l1", "canny_50_150_l1"),
    ] {
        let out = out_dir(&format!("cli_{preset}"));
        let o = detect(
            &[
                "--backend",
                "cpu",
                "--config",
                &format!("{ROOT}/config/{preset}.yaml"),
                "--no-overlay",
            ],
            &out,
            &["tests/data/building.png"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = load_view_owned(&out.join("building.edges.png")).unwrap();
        let want = load_view_owned(Path::new(&format!(
            "{ROOT}/tests/golden/building/{golden}.png"
        )))
        .unwrap();
        assert_eq!((got.width, got.height), (want.width, want.height));
        let diff = got
            .data
            .iter()
            .zip(&want.data)
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(diff, 0, "{preset}: {diff} pixels differ from cv::Canny");
        assert!(
            csv::parse(&std::fs::read_to_string(out.join("building.keypoints.csv")).unwrap())
                .unwrap()
                .0
                .is_empty()
        );
    }
}

#[test]
fn a_bad_file_fails_the_run_but_not_the_batch() {
    let out = out_dir("cli_bad");
    let junk = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("not_an_image.png");
    std::fs::write(&junk, b"this is not a png").unwrap();
    let o = detect(
        &["--backend", "cpu"],
        &out,
        &[
            junk.to_str().unwrap(),
            "tests/data/does_not_exist.png",
            "tests/data/camera.png",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not_an_image.png") && err.contains("does_not_exist.png"),
        "{err}"
    );
    assert!(err.contains("2 of 3 inputs failed"), "{err}");
    let (kps, descriptors) =
        csv::parse(&std::fs::read_to_string(out.join("camera.keypoints.csv")).unwrap()).unwrap();
    assert!(!kps.is_empty() && kps.len() <= 2000);
    assert_eq!(descriptors.map(|d| d.len()), Some(kps.len()));
    assert!(out.join("camera.edges.png").exists() && out.join("camera.overlay.png").exists());
}

#[test]
fn bad_config_and_backend_are_clear_errors() {
    let out = out_dir("cli_cfg");
    let o = detect(
        &["--set", "pyramid.levels=0"],
        &out,
        &["tests/data/camera.png"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("pyramid.levels"));
    let o = detect(&["--backend", "gpu"], &out, &["tests/data/camera.png"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("auto, cpu or cuda"));
    // Forced CUDA either works (a GPU is present) or says why it cannot.
    let o = detect(&["--backend", "cuda"], &out, &["tests/data/camera.png"]);
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.to_lowercase().contains("cuda"), "{err}");
        eprintln!(
            "SKIPPED part of bad_config_and_backend_are_clear_errors: no usable CUDA device ({})",
            err.trim()
        );
    }
}

#[test]
fn opencv_orb_preset_writes_detect_and_compute_output() {
    let out = out_dir("cli_orb");
    let o = detect(
        &[
            "--backend",
            "cpu",
            "--config",
            &format!("{ROOT}/config/opencv_orb.yaml"),
            "--no-overlay",
        ],
        &out,
        &["tests/data/graf3.png"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(out.join("graf3.keypoints.csv")).unwrap();
    assert!(text.starts_with("x,y,response,size,angle,octave,descriptor\n"));
    let (kps, descriptors) = csv::parse(&text).unwrap();
    let descriptors = descriptors.unwrap();
    let ours: std::collections::BTreeSet<(u32, u32, i32, String)> = kps
        .iter()
        .zip(&descriptors)
        .map(|(k, d)| {
            let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
            (k.x.to_bits(), k.y.to_bits(), k.octave, hex)
        })
        .collect();
    // The golden: cv2.ORB_create(2000).detectAndCompute (scripts/gen_golden.py).
    let golden =
        std::fs::read_to_string(format!("{ROOT}/tests/golden/graf3/orb_2000_desc.csv")).unwrap();
    let want: std::collections::BTreeSet<(u32, u32, i32, String)> = golden
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let num = |i: usize| f[i].parse::<f64>().unwrap() as f32;
            (
                num(0).to_bits(),
                num(1).to_bits(),
                f[5].parse().unwrap(),
                f[6].to_string(),
            )
        })
        .collect();
    assert_eq!(ours.len(), 2000);
    assert_eq!(ours, want, "keypoints + descriptors differ from OpenCV's");
}
