//! ORB descriptors against OpenCV 5.0 goldens (`scripts/gen_golden.py`): the `opencv_orb`
//! preset through the whole CPU pipeline must reproduce `ORB::create(2000).detectAndCompute`
//! (keypoints and every descriptor byte), and keypoints whose test pattern leaves the level
//! must get OpenCV's descriptor from its reflected padding (see `cpu::describe`'s note).

use std::collections::HashMap;
use std::path::Path;

use gpu_features::cpu::{describe, pyramid};
use gpu_features::{BackendChoice, Config, GrayImage, ImageView, Keypoint, Pipeline};

mod shared;
use shared::{golden, gray, FIXTURES};

/// Golden rows: numeric columns, then the descriptor's hex as the last column.
fn rows(stem: &str, file: &str) -> Vec<(Vec<f64>, String)> {
    let text = std::fs::read_to_string(golden(stem, file)).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let (nums, hex) = l.rsplit_once(',').unwrap();
            let nums = nums.split(',').map(|v| v.parse().unwrap()).collect();
            (nums, hex.to_string())
        })
        .collect()
}

fn hex(d: &[u8; 32]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn preset(name: &str) -> Config {
    let path = format!("{}/config/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    Config::from_file(Path::new(&path)).unwrap()
}

#[test]
fn opencv_orb_preset_reproduces_detect_and_compute() {
    let cfg = preset("opencv_orb");
    assert!(cfg.describe.enabled);
    let mut pipe = Pipeline::new(cfg, BackendChoice::Cpu).unwrap();
    let (mut total, mut bits_differing) = (0usize, 0u32);
    for stem in FIXTURES {
        let img = gray(stem);
        let view = ImageView::mono8(&img.data, img.width, img.height).unwrap();
        let f = pipe.process(&view).unwrap();
        assert_eq!(f.descriptors.len(), f.keypoints.len(), "{stem}");
        // Exact key: level-0 coordinates as f32 bits, octave, angle bits.
        let ours: HashMap<_, _> = f
            .keypoints
            .iter()
            .zip(&f.descriptors)
            .map(|(k, d)| {
                (
                    (k.x.to_bits(), k.y.to_bits(), k.octave, k.angle.to_bits()),
                    d,
                )
            })
            .collect();
        let want = rows(stem, "orb_2000_desc.csv");
        assert_eq!(f.keypoints.len(), want.len(), "{stem}: keypoint count");
        let mut wrong = Vec::new();
        for (r, want_hex) in &want {
            let key = (
                (r[0] as f32).to_bits(),
                (r[1] as f32).to_bits(),
                r[5] as i32,
                (r[3] as f32).to_bits(),
            );
            let d = ours
                .get(&key)
                .unwrap_or_else(|| panic!("{stem}: OpenCV keypoint {r:?} missing"));
            if hex(d) != *want_hex {
                let w: Vec<u8> = (0..32)
                    .map(|i| u8::from_str_radix(&want_hex[2 * i..2 * i + 2], 16).unwrap())
                    .collect();
                bits_differing += describe::hamming(d, &w.try_into().unwrap());
                wrong.push(r.clone());
            }
        }
        println!(
            "{stem}: {}/{} descriptors identical to OpenCV's",
            want.len() - wrong.len(),
            want.len()
        );
        assert!(
            wrong.is_empty(),
            "{stem}: {} descriptors differ ({bits_differing} bits), first at {:?}",
            wrong.len(),
            wrong[0]
        );
        total += want.len();
    }
    println!("orb_2000_desc: {total} descriptors identical, 10 fixtures");
}

#[test]
fn descriptors_near_the_image_edge_match_opencvs_padding() {
    let (mut total, mut outside) = (0usize, 0usize);
    let mut scratch = describe::DescribeScratch::default();
    for stem in FIXTURES {
        let mut levels = vec![gray(stem)];
        pyramid::build(
            &mut levels,
            3,
            pyramid::Scales::Orb,
            1.2,
            gpu_features::config::Interpolation::LinearExact,
        );
        let want = rows(stem, "orb_border_desc.csv");
        let kps: Vec<Keypoint> = want
            .iter()
            .map(|(r, _)| Keypoint {
                x: r[0] as f32,
                y: r[1] as f32,
                response: 0.0,
                size: 31.0,
                angle: r[2] as f32,
                octave: r[3] as i32,
            })
            .collect();
        let mut got = Vec::new();
        let views: Vec<_> = levels.iter().map(GrayImage::view).collect();
        describe::describe_into(
            &views,
            describe::DescribeSettings::orb(1.2),
            &kps,
            &mut scratch,
            &mut got,
        );
        for ((k, d), (r, want_hex)) in kps.iter().zip(&got).zip(&want) {
            assert_eq!(hex(d), *want_hex, "{stem}: keypoint {r:?}");
            let l = &levels[k.octave as usize];
            let (cx, cy) = describe::center(k, pyramid::Scales::Orb, 1.2);
            let m = 19;
            outside += (cx < m || cy < m || cx + m >= l.width as i32 || cy + m >= l.height as i32)
                as usize;
        }
        total += want.len();
    }
    println!(
        "orb_border_desc: {total} descriptors identical ({outside} with samples off the level)"
    );
    assert!(outside > total / 4, "the golden must exercise the border");
}
