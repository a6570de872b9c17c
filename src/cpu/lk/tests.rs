//! The LK tracker's unit tests (its OpenCV goldens are in tests/exact_track.rs).

use super::*;
use crate::image::GrayImage;

fn textured(w: usize, h: usize, dx: f32, dy: f32) -> GrayImage {
    let mut img = GrayImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32 - dx, y as f32 - dy);
            let v = 128.0
                + 60.0 * (fx * 0.21).sin() * (fy * 0.17).cos()
                + 40.0 * ((fx + fy) * 0.05).sin();
            img.data[y * w + x] = v.clamp(0.0, 255.0) as u8;
        }
    }
    img
}

#[test]
fn pyramid_levels_halve_and_stop_before_the_window() {
    let mut p = FlowPyramid::default();
    p.build(&GrayImage::new(200, 100), 21, 3);
    let sizes: Vec<_> = p.levels.iter().map(|l| (l.width, l.height)).collect();
    // 100 -> 50 -> 25 -> 13 (<= 21): levels 0..=2.
    assert_eq!(sizes, vec![(200, 100), (100, 50), (50, 25)]);
    p.build(&GrayImage::new(101, 77), 21, 3);
    assert_eq!(p.levels[1].width, 51);
    assert_eq!(p.levels[1].height, 39);
}

#[test]
fn threads_give_the_same_flows() {
    let (a, b) = (textured(160, 120, 0.0, 0.0), textured(160, 120, 1.5, 0.75));
    let (mut pa, mut pb) = (FlowPyramid::default(), FlowPyramid::default());
    pa.build(&a, 21, 3);
    pb.build(&b, 21, 3);
    pa.ensure_derivatives();
    // 600 points, some off the image (status false), enough for the pool's path.
    let mut pts: Vec<(f32, f32)> = (0..600)
        .map(|i| ((i % 30) as f32 * 5.7 - 6.0, (i / 30) as f32 * 6.3 - 4.0))
        .collect();
    pts.extend([(-100.0, 50.0), (500.0, 60.0), (80.0, 400.0)]);
    let run = |threads: usize| {
        let mut s = LkScratch::default();
        s.set_threads(threads);
        let mut out = Vec::new();
        track(&pa, &pb, &pts, None, &LkParams::default(), &mut s, &mut out);
        out
    };
    let one = run(1);
    assert!(one.iter().filter(|f| f.status).count() > 300);
    assert!(one.iter().any(|f| !f.status));
    for threads in [2, 5] {
        assert!(run(threads) == one, "{threads} threads");
    }
}

#[test]
fn a_shifted_texture_is_tracked_to_its_shift() {
    let (a, b) = (textured(160, 120, 0.0, 0.0), textured(160, 120, 2.5, -1.25));
    let (mut pa, mut pb) = (FlowPyramid::default(), FlowPyramid::default());
    pa.build(&a, 21, 3);
    pb.build(&b, 21, 3);
    pa.ensure_derivatives();
    let pts = [(80.0, 60.0), (50.0, 40.0), (110.0, 75.0)];
    let mut out = Vec::new();
    track(
        &pa,
        &pb,
        &pts,
        None,
        &LkParams::default(),
        &mut LkScratch::default(),
        &mut out,
    );
    for (f, &(x, y)) in out.iter().zip(&pts) {
        assert!(f.status, "{f:?}");
        assert!(
            (f.x - (x + 2.5)).abs() < 0.1 && (f.y - (y - 1.25)).abs() < 0.1,
            "{f:?}"
        );
    }
}

#[test]
fn a_flat_window_and_a_point_far_outside_fail() {
    let flat = GrayImage::from_vec(100, 100, vec![90; 10_000]).unwrap();
    let mut p = FlowPyramid::default();
    p.build(&flat, 21, 3);
    p.ensure_derivatives();
    let mut out = Vec::new();
    let pts = [(50.0, 50.0), (-40.0, 10.0)];
    track(
        &p,
        &p,
        &pts,
        None,
        &LkParams::default(),
        &mut LkScratch::default(),
        &mut out,
    );
    assert!(!out[0].status, "min eigenvalue 0 must fail");
    assert!(!out[1].status, "a window off the padded image must fail");
}

#[test]
fn weights_round_ties_to_even_and_sum_to_one() {
    let w = weights(0.5, 0.5);
    assert_eq!(w.iter().sum::<i32>(), 1 << W_BITS);
    assert_eq!(w[0], 4096);
    assert_eq!(cv_round(2.5), 2);
    assert_eq!(cv_round(3.5), 4);
}
