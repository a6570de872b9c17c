//! Unit tests of [`super`].

use super::*;

#[test]
fn orb_level_sizes() {
    // ORB sizes of a 640x480 image (OpenCV 5.0), and the float-factor trap (see level_scale).
    let sizes: Vec<_> = (0..8)
        .map(|l| level_size(Scales::Orb, 640, 480, 1.2, l))
        .collect();
    assert_eq!(
        sizes,
        [
            (640, 480),
            (533, 400),
            (444, 333),
            (370, 278),
            (309, 231),
            (257, 193),
            (214, 161),
            (179, 134)
        ]
    );
    assert_eq!(level_scale(Scales::Orb, 1.2, 3), 1.728_000_2_f32);
    assert_eq!(level_size(Scales::Orb, 324, 223, 1.2, 3), (187, 129));
}

#[test]
fn weights_sum_to_one_and_taps_in_range() {
    for interp in [Interpolation::Linear, Interpolation::LinearExact] {
        for (s, d) in [(10, 7), (7, 10), (1, 3), (3, 1), (1920, 1600)] {
            let t = axis_table(s, d, interp);
            for (&o, w) in t.offsets.iter().zip(&t.weights) {
                assert!((o as usize) < s);
                assert_eq!(w[0] + w[1], ResizeTables::one(interp), "{s}->{d}");
            }
        }
    }
}

#[test]
fn constant_image_stays_constant() {
    for interp in [Interpolation::Linear, Interpolation::LinearExact] {
        let src = GrayImage::from_vec(13, 9, vec![200; 13 * 9]).unwrap();
        let mut dst = GrayImage::new(11, 7);
        resize_linear(&src, &mut dst, interp);
        assert!(dst.data.iter().all(|&v| v == 200), "{interp:?}");
    }
}

#[test]
fn build_reuses_and_sizes() {
    let mut levels = vec![GrayImage::new(100, 50)];
    build(&mut levels, 4, Scales::Orb, 1.2, Interpolation::LinearExact);
    assert_eq!(levels.len(), 4);
    assert_eq!(
        (levels[3].width, levels[3].height),
        level_size(Scales::Orb, 100, 50, 1.2, 3)
    );
    build(&mut levels, 2, Scales::Orb, 1.2, Interpolation::Linear);
    assert_eq!(levels.len(), 2);
}

fn noise(w: usize, h: usize, seed: u64) -> GrayImage {
    crate::cpu::test_util::xorshift_image(w, h, &mut (seed | 1), |s| (s >> 24) as u8)
}

/// The portable path (also what non-AVX2 CPUs run) gives the same bits as the
/// dispatched one, down- and up-scaling, single rows / columns included.
#[test]
fn portable_path_matches_dispatched() {
    let sizes = [
        (1, 1),
        (1, 9),
        (9, 1),
        (2, 3),
        (37, 21),
        (64, 48),
        (101, 67),
    ];
    for interp in [Interpolation::Linear, Interpolation::LinearExact] {
        for (i, &(sw, sh)) in sizes.iter().enumerate() {
            let src = noise(sw, sh, 7 + i as u64);
            for &(dw, dh) in &sizes {
                let t = ResizeTables::new(sw, sh, dw, dh, interp);
                let mut a = GrayImage::new(dw, dh);
                let mut b = GrayImage::new(dw, dh);
                resize_with_tables(&src, &mut a, &t);
                resize_rows(
                    src.view(),
                    &mut b.data,
                    dw,
                    0..dh,
                    &t,
                    &HTaps::new(&t.x, sw),
                    &mut Bufs::default(),
                );
                assert_eq!(a, b, "{interp:?} {sw}x{sh} -> {dw}x{dh}");
                for bands in [2, 3, 50] {
                    let mut c = GrayImage::new(dw, dh);
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(3)
                        .build()
                        .unwrap()
                        .install(|| resize_with_tables_in(&src, &mut c, &t, bands));
                    assert_eq!(a, c, "{interp:?} {sw}x{sh} -> {dw}x{dh}, {bands} bands");
                }
            }
        }
    }
}
