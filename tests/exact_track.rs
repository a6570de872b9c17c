//! The tracker's OpenCV functions against goldens made by scripts/gen_track_golden.py with
//! opencv-python 5.0 on the real sequence tests/data/seq (cockatoo frames): the LK pyramid,
//! goodFeaturesToTrack with and without VINS's mask, calcOpticalFlowPyrLK forward and the
//! VINS-Fusion reverse check, bit for bit.

mod shared;

use std::path::Path;

use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::gftt::{good_features_to_track, min_eigen_map, GfttParams, GfttScratch};
use gpu_features::cpu::lk::{track, Flow, FlowPyramid, LkParams, LkScratch};
use gpu_features::track::mask::{fill_circle, round_px};
use gpu_features::GrayImage;
use serde_json::Value;

use shared::stereo_pair;

/// A track as the goldens store it: (id, x bits, y bits, age).
type TrackKey = (u64, u32, u32, u32);

fn key(t: &gpu_features::track::Track) -> TrackKey {
    (t.id, t.x.to_bits(), t.y.to_bits(), t.age)
}

/// A golden frame's list of [id, x bits, y bits, age].
fn tracks_of(v: &Value) -> Vec<TrackKey> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v[0].as_u64().unwrap(),
                v[1].as_u64().unwrap() as u32,
                v[2].as_u64().unwrap() as u32,
                v[3].as_u64().unwrap() as u32,
            )
        })
        .collect()
}

fn golden(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/track")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn frame(name: &str) -> GrayImage {
    load_gray(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/seq")
            .join(name),
    )
    .unwrap()
}

fn f32_of(v: &Value) -> f32 {
    f32::from_bits(v.as_u64().unwrap() as u32)
}

fn points(v: &Value) -> Vec<(f32, f32)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_f64().unwrap() as f32, p[1].as_f64().unwrap() as f32))
        .collect()
}

#[test]
fn lk_pyramid_levels_are_opencvs() {
    let g = golden("pyramid.json");
    let mut pyr = FlowPyramid::default();
    for case in g["cases"].as_array().unwrap() {
        let img = frame(case["frame"].as_str().unwrap());
        pyr.build(&img, 21, 3);
        let levels = case["levels"].as_array().unwrap();
        assert_eq!(pyr.levels.len(), levels.len());
        for (l, want) in pyr.levels.iter().zip(levels) {
            assert_eq!(l.width as u64, want["width"].as_u64().unwrap());
            assert_eq!(l.height as u64, want["height"].as_u64().unwrap());
            let crc = crc32fast::hash(&l.interior());
            assert_eq!(
                crc as u64,
                want["crc32"].as_u64().unwrap(),
                "{} level {}x{}",
                case["frame"],
                l.width,
                l.height
            );
        }
    }
}

#[test]
fn good_features_to_track_is_opencvs_with_and_without_the_vins_mask() {
    let g = golden("gftt.json");
    let mut s = GfttScratch::default();
    let (mut out, mut eig) = (Vec::new(), Vec::new());
    for case in g["cases"].as_array().unwrap() {
        let img = frame(case["frame"].as_str().unwrap());
        min_eigen_map(&img, 3, 3, &mut eig);
        let bytes: Vec<u8> = eig.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            crc32fast::hash(&bytes) as u64,
            case["eig_crc32"].as_u64().unwrap(),
            "cornerMinEigenVal of {}",
            case["frame"]
        );
        good_features_to_track(&img, &GfttParams::default(), None, &mut s, &mut out);
        assert_eq!(out, points(&case["corners"]), "{}", case["frame"]);

        let keep = points(&case["mask_points"]);
        let mut mask = GrayImage::new(img.width, img.height);
        mask.data.fill(255);
        for &(x, y) in &keep {
            fill_circle(&mut mask, round_px(x), round_px(y), 30, 0);
        }
        assert_eq!(
            crc32fast::hash(&mask.data) as u64,
            case["mask_crc32"].as_u64().unwrap(),
            "mask of {}",
            case["frame"]
        );
        let p = GfttParams {
            max_corners: 150 - keep.len(),
            ..Default::default()
        };
        good_features_to_track(&img, &p, Some(&mask), &mut s, &mut out);
        assert_eq!(
            out,
            points(&case["masked_corners"]),
            "masked {}",
            case["frame"]
        );
    }
}

#[test]
fn calc_optical_flow_pyr_lk_is_opencvs_forward_and_reverse() {
    let g = golden("lk.json");
    let (mut pa, mut pb) = (FlowPyramid::default(), FlowPyramid::default());
    let mut s = LkScratch::default();
    let (mut fwd, mut rev) = (Vec::new(), Vec::new());
    let (mut total, mut tracked) = (0, 0);
    for case in g["cases"].as_array().unwrap() {
        let (a, b) = (
            frame(case["prev"].as_str().unwrap()),
            frame(case["next"].as_str().unwrap()),
        );
        pa.build(&a, 21, 3);
        pb.build(&b, 21, 3);
        pa.ensure_derivatives();
        pb.ensure_derivatives();
        let pts: Vec<(f32, f32)> = case["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (f32_of(&p[0]), f32_of(&p[1])))
            .collect();
        track(&pa, &pb, &pts, None, &LkParams::default(), &mut s, &mut fwd);
        let want = case["forward"].as_array().unwrap();
        for (i, (f, w)) in fwd.iter().zip(want).enumerate() {
            let exp = Flow {
                x: f32_of(&w[0]),
                y: f32_of(&w[1]),
                status: w[2].as_u64() == Some(1),
                err: f32_of(&w[3]),
            };
            assert_eq!(
                f.status, exp.status,
                "{} point {i} {:?}: {f:?} vs {exp:?}",
                case["prev"], pts[i]
            );
            assert_eq!(
                (f.x.to_bits(), f.y.to_bits()),
                (exp.x.to_bits(), exp.y.to_bits()),
                "{} point {i} {:?}: {f:?} vs {exp:?}",
                case["prev"],
                pts[i]
            );
            if f.status {
                assert_eq!(f.err.to_bits(), exp.err.to_bits(), "err of point {i}");
            }
            total += 1;
            tracked += f.status as usize;
        }
        let fwd_pts: Vec<(f32, f32)> = fwd.iter().map(|f| (f.x, f.y)).collect();
        let p1 = LkParams {
            max_level: 1,
            ..Default::default()
        };
        track(&pb, &pa, &fwd_pts, Some(&pts), &p1, &mut s, &mut rev);
        for (i, (r, w)) in rev
            .iter()
            .zip(case["reverse"].as_array().unwrap())
            .enumerate()
        {
            assert_eq!(r.status, w[2].as_u64() == Some(1), "reverse status {i}");
            assert_eq!(
                (r.x.to_bits(), r.y.to_bits()),
                (f32_of(&w[0]).to_bits(), f32_of(&w[1]).to_bits()),
                "reverse point {i}: {r:?}"
            );
        }
    }
    assert!(
        total > 500 && tracked * 2 > total,
        "{tracked} of {total} tracked"
    );
}

#[test]
fn undistort_points_is_opencvs_for_every_model() {
    use gpu_features::camera::CameraModel;
    use nalgebra::Point2;
    let g = golden("undistort.json");
    for case in g["cases"].as_array().unwrap() {
        let f = |v: &Value| -> Vec<f64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| f64::from_bits(x.as_u64().unwrap()))
                .collect()
        };
        let model = case["model"].as_str().unwrap();
        let cam =
            CameraModel::from_camera_info(752, 480, model, &f(&case["K"]), &f(&case["D"])).unwrap();
        let px = case["pixels"].as_array().unwrap();
        let want = case["normalized"].as_array().unwrap();
        assert!(px.len() > 50);
        for (p, w) in px.iter().zip(want) {
            let p = Point2::new(p[0].as_f64().unwrap(), p[1].as_f64().unwrap());
            let got = cam.undistort(p).unwrap_or(Point2::new(-1e6, -1e6));
            let (wx, wy) = (
                f64::from_bits(w[0].as_u64().unwrap()),
                f64::from_bits(w[1].as_u64().unwrap()),
            );
            assert_eq!(
                (got.x.to_bits(), got.y.to_bits()),
                (wx.to_bits(), wy.to_bits()),
                "{model} at {p:?}: {got:?} vs ({wx}, {wy})"
            );
        }
    }
}

/// Not bit-exact by design (OpenCV samples 7-point sets with its own generator): the share
/// of identical inlier-mask entries against `cv2.findFundamentalMat(FM_RANSAC, 1, 0.99)` on
/// the real sequence's tracked pairs, printed and bounded.
#[test]
fn fundamental_ransac_masks_agree_with_opencvs() {
    use gpu_features::track::fundamental::{ransac_mask, RansacParams};
    let g = golden("lk.json");
    let (mut same, mut total, mut ours_in, mut cv_in) = (0, 0, 0, 0);
    for case in g["cases"].as_array().unwrap() {
        let pts = case["points"].as_array().unwrap();
        let fwd = case["forward"].as_array().unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (p, f) in pts.iter().zip(fwd) {
            if f[2].as_u64() == Some(1) {
                a.push((f32_of(&p[0]), f32_of(&p[1])));
                b.push((f32_of(&f[0]), f32_of(&f[1])));
            }
        }
        let cv: Vec<bool> = case["fundamental_mask"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64() == Some(1))
            .collect();
        assert_eq!(cv.len(), a.len());
        let ours = ransac_mask(&a, &b, &RansacParams::default());
        same += ours.iter().zip(&cv).filter(|(x, y)| x == y).count();
        total += cv.len();
        ours_in += ours.iter().filter(|&&v| v).count();
        cv_in += cv.iter().filter(|&&v| v).count();
    }
    let agree = same as f64 / total as f64;
    eprintln!("F-RANSAC masks: {same} of {total} entries agree ({:.1} %); inliers ours {ours_in}, OpenCV {cv_in}", 100.0 * agree);
    assert!(agree >= 0.99, "agreement {agree}");
}

/// The whole tracker against VINS-Fusion's logic written with cv2
/// (scripts/gen_track_golden.py, `vins_reference`): every frame's tracks, IDs, ages and
/// position bits. (With the F test on the masks can differ where a pair sits at the
/// threshold; its agreement is the test above.)
#[test]
fn the_tracker_is_vins_on_opencv_end_to_end() {
    use gpu_features::track::{TrackParams, Tracker};
    let g = golden("vins.json");
    // VINS-Fusion's trackImage: flow back on, no fundamental-matrix test; the rewrite sorts
    // the mask with Python's stable sort (the real FeatureTracker's std::sort order is
    // checked against VINS-Fusion itself by scripts/vins_parity.py in CI).
    let mut t = Tracker::new(TrackParams {
        ransac_threshold: 0.0,
        mask_order: gpu_features::config::MaskOrder::Stable,
        ..Default::default()
    });
    let mut total = 0;
    for (k, case) in g["cases"].as_array().unwrap().iter().enumerate() {
        let img = frame(case["frame"].as_str().unwrap());
        let got: Vec<TrackKey> = t
            .track(&img, k as f64 / 30.0, None)
            .iter()
            .map(key)
            .collect();
        assert_eq!(got, tracks_of(&case["tracks"]), "frame {k}");
        total += got.len();
    }
    assert!(total > 500, "{total}");
}

/// VINS-Fusion's stereo mode against its logic written with cv2 (`vins_stereo_reference`):
/// every frame's left and right tracks, IDs, ages and position bits.
#[test]
fn stereo_tracks_are_vins_fusion_on_opencv() {
    use gpu_features::track::{TrackParams, Tracker};
    let g = golden("stereo.json");
    let mut t = Tracker::new(TrackParams {
        ransac_threshold: 0.0,
        mask_order: gpu_features::config::MaskOrder::Stable,
        ..Default::default()
    });
    let (mut left_total, mut right_total) = (0, 0);
    for (k, case) in g["cases"].as_array().unwrap().iter().enumerate() {
        let (l, r) = stereo_pair(&frame(case["frame"].as_str().unwrap()));
        t.track_stereo(&l, &r, k as f64 / 30.0, (None, None))
            .unwrap();
        let got_l: Vec<_> = t.tracks().iter().map(key).collect();
        let got_r: Vec<_> = t.right_tracks().iter().map(key).collect();
        assert_eq!(got_l, tracks_of(&case["left"]), "frame {k} left");
        assert_eq!(got_r, tracks_of(&case["right"]), "frame {k} right");
        left_total += got_l.len();
        right_total += got_r.len();
    }
    assert!(
        right_total * 10 > left_total * 8,
        "{right_total} of {left_total}"
    );
    eprintln!("stereo: {left_total} left and {right_total} right tracks, identical");
}
