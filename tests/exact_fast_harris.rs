//! FAST, ORB Harris and dense Harris against OpenCV goldens (scripts/gen_golden.py), plus
//! property tests of FAST against the plain segment test.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::{fast, harris};
use gpu_features::select::Corner;
use gpu_features::GrayImage;
use proptest::prelude::*;

fn golden_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Every fixture stem that has a gray golden.
fn stems() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(golden_root())
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            e.path()
                .join("gray.png")
                .exists()
                .then(|| e.file_name().into_string().unwrap())
        })
        .collect();
    v.sort();
    assert!(v.len() >= 10, "expected the 10 fixtures, found {v:?}");
    v
}

fn gray(stem: &str) -> GrayImage {
    load_gray(&golden_root().join(stem).join("gray.png")).unwrap()
}

/// CSV rows as f64 columns (header skipped).
fn csv(stem: &str, name: &str) -> Vec<Vec<f64>> {
    let text = std::fs::read_to_string(golden_root().join(stem).join(name)).unwrap();
    text.lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect()
}

/// (x, y) -> golden response, plus the points in raster order.
/// Points in file order, and their golden response by position.
type GoldenPoints = (Vec<(u32, u32)>, HashMap<(u32, u32), f64>);

fn golden_points(rows: &[Vec<f64>]) -> GoldenPoints {
    let mut pts: Vec<(u32, u32)> = rows.iter().map(|r| (r[0] as u32, r[1] as u32)).collect();
    let map = rows
        .iter()
        .map(|r| ((r[0] as u32, r[1] as u32), r[2]))
        .collect();
    pts.sort_by_key(|&(x, y)| (y, x));
    (pts, map)
}

fn xy(c: &[Corner]) -> Vec<(u32, u32)> {
    c.iter().map(|c| (c.x, c.y)).collect()
}

#[test]
fn fast_matches_opencv_on_every_fixture() {
    let mut total = 0;
    for stem in stems() {
        let img = gray(&stem);
        for (t, nms) in [(10, true), (20, true), (40, true), (20, false)] {
            let name = format!("fast_t{t}_{}.csv", if nms { "nms" } else { "nonms" });
            let (want, resp) = golden_points(&csv(&stem, &name));
            let got = fast::detect(&img, t, nms);
            assert_eq!(xy(&got), want, "{stem} {name}: point set / raster order");
            for c in &got {
                assert_eq!(c.response, c.fast_score as f32);
                if nms {
                    assert_eq!(
                        c.fast_score as f64,
                        resp[&(c.x, c.y)],
                        "{stem} {name} {c:?}"
                    );
                } else {
                    // cv::FAST skips the score without NMS and reports 0.
                    assert_eq!(resp[&(c.x, c.y)], 0.0, "{stem} {name}");
                    assert!(c.fast_score >= t, "{stem} {name} {c:?}");
                }
            }
            total += got.len();
        }
        // Without NMS our score is still OpenCV's: check it where the t20 NMS golden has it.
        let (_, scored) = golden_points(&csv(&stem, "fast_t20_nms.csv"));
        let nonms = fast::detect(&img, 20, false);
        let mut checked = 0;
        for c in &nonms {
            if let Some(&s) = scored.get(&(c.x, c.y)) {
                assert_eq!(c.fast_score as f64, s, "{stem} nonms score {c:?}");
                checked += 1;
            }
        }
        assert_eq!(
            checked,
            scored.len(),
            "{stem}: NMS points must be FAST points"
        );
    }
    assert!(total > 10_000, "suspiciously few corners: {total}");
}

/// ORB (1 level, no budget, HARRIS_SCORE): FAST t=20 + NMS, 31-px border, Harris response.
#[test]
fn orb_level_matches_opencv() {
    const BORDER: u32 = 31;
    let mut exact = 0;
    let mut total = 0;
    for stem in stems() {
        let img = gray(&stem);
        let (w, h) = (img.width as u32, img.height as u32);
        let (want, resp) = golden_points(&csv(&stem, "orb_l1.csv"));
        let mut got = fast::detect(&img, 20, true);
        got.retain(|c| c.x >= BORDER && c.y >= BORDER && c.x + BORDER < w && c.y + BORDER < h);
        assert_eq!(xy(&got), want, "{stem}: ORB point set");
        // Responses span decades and cross zero: relative 1e-5, with an absolute floor of
        // 1e-7 of the fixture's largest |response| for values near zero.
        let scale = resp.values().fold(0f64, |m, v| m.max(v.abs()));
        for c in &got {
            let g = resp[&(c.x, c.y)] as f32;
            let ours = harris::orb_score(&img, c.x, c.y, 7, 0.04);
            let tol = 1e-5 * g.abs() as f64 + 1e-7 * scale;
            assert!(
                ((ours - g) as f64).abs() <= tol,
                "{stem} ({}, {}): ours {ours:e}, OpenCV {g:e}",
                c.x,
                c.y
            );
            exact += (ours == g) as usize;
            total += 1;
        }
    }
    assert!(total > 1000);
    // The formula is OpenCV's operation for operation, so it is in fact bit-exact.
    assert_eq!(exact, total, "ORB Harris scores not bit-exact");
}

fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn dense_harris_matches_opencv_maps() {
    for stem in ["box", "coffee_odd", "camera"] {
        let img = gray(stem);
        for (block, ksize) in [(2, 3), (3, 5)] {
            let path = golden_root()
                .join(stem)
                .join(format!("harris_b{block}_k{ksize}.f32"));
            let want = read_f32(&path);
            let mut got = Vec::new();
            harris::dense_response(&img, block, ksize, 0.04, &mut got);
            assert_eq!(got.len(), want.len());
            let max = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!(max > 0.0);
            let mut worst = 0f32;
            let mut differ = 0;
            for (g, w) in got.iter().zip(&want) {
                worst = worst.max((g - w).abs());
                differ += (g != w) as usize;
            }
            // Host-independent bound first, then the bit-exactness this golden host allows
            // (see the harris module doc).
            assert!(
                worst <= 1e-6 * max,
                "{stem} b{block} k{ksize}: max |diff| {worst:e} vs max |R| {max:e}"
            );
            assert_eq!(
                differ, 0,
                "{stem} b{block} k{ksize}: {differ} pixels not bit-exact"
            );

            // Corners: recomputed from the golden map with the documented rule.
            let (w, h) = (img.width, img.height);
            let thr = 0.01 * want.iter().copied().fold(f32::MIN, f32::max);
            let mut expect = Vec::new();
            for y in 0..h {
                for x in 0..w {
                    let v = want[y * w + x];
                    let neighbours = (-1i64..=1)
                        .flat_map(|dy| (-1i64..=1).map(move |dx| (dx, dy)))
                        .filter(|&d| d != (0, 0))
                        .map(|(dx, dy)| (x as i64 + dx, y as i64 + dy))
                        .filter(|&(nx, ny)| nx >= 0 && ny >= 0 && nx < w as i64 && ny < h as i64);
                    let mut n = neighbours.map(|(nx, ny)| want[ny as usize * w + nx as usize]);
                    if v > thr && n.all(|nv| v > nv) {
                        expect.push((x as u32, y as u32, v));
                    }
                }
            }
            let corners = harris::dense_corners(&img, block, ksize, 0.04, 0.01);
            let got: Vec<_> = corners.iter().map(|c| (c.x, c.y, c.response)).collect();
            assert!(!expect.is_empty());
            assert_eq!(got, expect, "{stem} b{block} k{ksize}: corners");
            assert!(corners.iter().all(|c| c.fast_score == 0));
        }
    }
}

/// A random image: either uniform bytes or a few grey levels (ties, exact-threshold cases).
fn image_strategy() -> impl Strategy<Value = (GrayImage, u8)> {
    (7usize..64, 7usize..64, prop::bool::ANY, any::<u64>()).prop_flat_map(|(w, h, few, _)| {
        let pixels = if few {
            prop::collection::vec(any::<u8>(), 2..5)
                .prop_flat_map(move |palette| {
                    let n = palette.len();
                    (
                        prop::collection::vec(0..n, w * h),
                        Just(palette.clone()),
                        0..n,
                        0..n,
                        0u8..3,
                    )
                })
                .prop_map(|(idx, pal, i, j, off)| {
                    let data = idx.iter().map(|&k| pal[k]).collect::<Vec<_>>();
                    // Thresholds at, just below and just above a palette gap.
                    let gap = (pal[i] as i32 - pal[j] as i32).unsigned_abs() as i32;
                    let t = (gap + off as i32 - 1).clamp(0, 255) as u8;
                    (data, t)
                })
                .boxed()
        } else {
            (prop::collection::vec(any::<u8>(), w * h), any::<u8>())
                .prop_map(|(d, t)| (d, t / 2))
                .boxed()
        };
        pixels.prop_map(move |(data, t)| (GrayImage::from_vec(w, h, data).unwrap(), t))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn detect_equals_the_naive_segment_test((img, t) in image_strategy()) {
        let (w, h) = (img.width, img.height);
        let all = fast::detect(&img, t, false);
        let mut naive = Vec::new();
        for y in 3..h - 3 {
            for x in 3..w - 3 {
                if fast::is_corner_naive(&img, x, y, t) {
                    naive.push((x as u32, y as u32));
                }
            }
        }
        prop_assert_eq!(xy(&all), naive);

        // The score is the largest threshold that still detects the point.
        let mut score = vec![0u8; w * h];
        for c in &all {
            let (x, y, s) = (c.x as usize, c.y as usize, c.fast_score);
            prop_assert!(s >= t);
            prop_assert!(fast::is_corner_naive(&img, x, y, s));
            prop_assert!(s == 255 || !fast::is_corner_naive(&img, x, y, s + 1));
            score[y * w + x] = s;
        }

        // NMS: exactly the corners strictly above all 8 neighbours (non-corners count 0).
        let beats = |c: &Corner| {
            let (x, y) = (c.x as usize, c.y as usize);
            (y - 1..=y + 1).all(|ny| (x - 1..=x + 1).all(|nx| {
                (nx, ny) == (x, y) || c.fast_score > score[ny * w + nx]
            }))
        };
        let nms = fast::detect(&img, t, true);
        let expect: Vec<Corner> = all.iter().copied().filter(|c| beats(c)).collect();
        prop_assert_eq!(nms, expect);
    }
}
