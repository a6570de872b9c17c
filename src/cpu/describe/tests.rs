//! Unit tests of the descriptor stage.

use super::*;

#[test]
fn pattern_is_opencvs_at_both_ends() {
    assert_eq!(ORB_PATTERN[0], [8, -3, 9, 5]);
    assert_eq!(ORB_PATTERN[3], [7, -12, 12, -13]);
    assert_eq!(ORB_PATTERN[254], [7, 0, 12, -2]);
    assert_eq!(ORB_PATTERN[255], [-1, -6, 0, -11]);
    let r = ORB_PATTERN.iter().flatten().map(|v| v.unsigned_abs()).max();
    assert_eq!(r, Some(13));
}

#[test]
fn rotated_points_stay_within_reach() {
    let mut far = 0;
    for tenth in 0..3600 {
        let (a, b) = rotation(tenth as f32 / 10.0);
        for p in ORB_PATTERN
            .iter()
            .flat_map(|q| [[q[0], q[1]], [q[2], q[3]]])
        {
            for fma in [false, true] {
                let (x, y) = rotate(p[0], p[1], a, b, fma);
                far = far.max(x.abs()).max(y.abs());
            }
        }
    }
    assert!(far <= REACH, "a sample {far} pixels from its centre");
}

#[test]
fn fma_moves_a_sample_where_orb_slam3_built_with_fma_does() {
    // The one keypoint of tests/data/seq (cockatoo_03, level 0) whose descriptor
    // differs between ORB-SLAM3 built with and without FMA: at its angle one rotated
    // pattern offset rounds the other way once the first product is fused.
    let (a, b) = rotation(f32::from_bits(0x432f_906d)); // 175.564163
    let moved: Vec<_> = ORB_PATTERN
        .iter()
        .flat_map(|p| [(p[0], p[1]), (p[2], p[3])])
        .filter(|&(x, y)| rotate(x, y, a, b, true) != rotate(x, y, a, b, false))
        .collect();
    assert!(!moved.is_empty(), "no offset moves at this angle");
    // Elsewhere the two agree (a plain angle, exact products).
    let (a, b) = rotation(90.0);
    for p in ORB_PATTERN.iter() {
        assert_eq!(
            rotate(p[0], p[1], a, b, true),
            rotate(p[0], p[1], a, b, false)
        );
    }
}

#[test]
fn orb_slam3_blur_is_the_fixed_point_gaussian_blur() {
    // ORB-SLAM3 blurs a clone of the level: OpenCV's fixed-point path; OpenCV ORB's ROI
    // takes the float path. Both keep to their own on noise, and they differ.
    let mut s = 7u64;
    let img = crate::cpu::test_util::xorshift_image(97, 61, &mut s, |r| (r >> 56) as u8);
    let kp = Keypoint {
        x: 40.0,
        y: 30.0,
        response: 0.0,
        size: 31.0,
        angle: 10.0,
        octave: 0,
    };
    let mut want = GrayImage::default();
    gaussian_blur(&img, 7, 2.0, &mut want, &mut BlurScratch::default());
    let mut float = GrayImage::default();
    blur_level(&img, &mut float, &mut BlurBuffers::default());
    assert_ne!(want.data, float.data, "the two blurs agree on noise");
    let levels = [img.view()];
    for (blur, expect) in [
        (DescriptorBlur::OrbSlam3, &want),
        (DescriptorBlur::Orb, &float),
    ] {
        let set = DescribeSettings {
            blur,
            ..DescribeSettings::orb(1.2)
        };
        let (mut scratch, mut out) = (DescribeScratch::default(), Vec::new());
        describe_into(&levels, set, &[kp], &mut scratch, &mut out);
        // ORB's float blur is computed around the keypoint only (blur_level_around).
        let got = &scratch.blurred()[0];
        for y in 30 - REACH as usize..=30 + REACH as usize {
            for x in 40 - REACH as usize..=40 + REACH as usize {
                assert_eq!(got.get(x, y), expect.get(x, y), "{blur:?} at ({x}, {y})");
            }
        }
        if blur == DescriptorBlur::OrbSlam3 {
            assert_eq!(&got.data, &expect.data);
        }
        assert_eq!(out[0], describe_one(expect, levels[0], 40, 30, 10.0, false));
    }
}

#[test]
fn rotation_constant_is_opencvs() {
    // (float)(CV_PI/180) as OpenCV rounds it.
    assert_eq!(
        ((std::f64::consts::PI / 180.0) as f32).to_bits(),
        0x3c8efa35
    );
    let (a, b) = rotation(0.0);
    assert_eq!((a, b), (1.0, 0.0));
    assert_eq!(rotate(7, -12, a, b, false), (7, -12));
    // 90 degrees: (x, y) -> (-y, x), up to rounding of cos(90) ~ -4e-8.
    let (a, b) = rotation(90.0);
    assert_eq!(rotate(7, -12, a, b, false), (12, 7));
}

#[test]
fn flat_image_gives_zero_descriptor_and_uniform_blur() {
    let img = GrayImage::from_vec(40, 30, vec![77; 1200]).unwrap();
    let mut blurred = GrayImage::default();
    blur_level(&img, &mut blurred, &mut BlurBuffers::default());
    assert!(blurred.data.iter().all(|&v| v == 77));
    // Equal samples: `<` is false for every pair, wherever the centre is.
    assert_eq!(describe_one(&blurred, &img, 20, 15, 33.0, false), [0; 32]);
    assert_eq!(describe_one(&blurred, &img, 0, 0, 200.0, false), [0; 32]);
}

#[test]
fn gradient_sets_the_bits_of_pairs_that_point_uphill() {
    // Brightness grows with x: bit = x1 < x2 after rotation 0 (for |dx| large enough
    // that the blur keeps the order, which a linear ramp always does).
    let (w, h) = (64, 64);
    let data = (0..w * h).map(|i| ((i % w) * 3) as u8).collect();
    let img = GrayImage::from_vec(w, h, data).unwrap();
    let mut blurred = GrayImage::default();
    blur_level(&img, &mut blurred, &mut BlurBuffers::default());
    let d = describe_one(&blurred, &img, 32, 32, 0.0, false);
    for (row, p) in ORB_PATTERN.iter().enumerate() {
        let bit = d[row / 8] >> (row % 8) & 1;
        assert_eq!(bit == 1, p[0] < p[2], "pair {row}: {p:?}");
    }
}

/// The per-sample form of steps 3-5, as the note states them.
fn describe_per_sample(
    b: &GrayImage,
    raw: &GrayImage,
    cx: i32,
    cy: i32,
    angle: f32,
    fma: bool,
) -> Descriptor {
    let (ca, sa) = rotation(angle);
    let sample = |px: i8, py: i8| {
        let (dx, dy) = rotate(px, py, ca, sa, fma);
        sample_at(b, raw.view(), cx + dx, cy + dy)
    };
    let mut d = [0u8; 32];
    for (r, p) in ORB_PATTERN.iter().enumerate() {
        d[r / 8] |= ((sample(p[0], p[1]) < sample(p[2], p[3])) as u8) << (r % 8);
    }
    d
}

#[test]
fn describe_one_equals_the_per_sample_form() {
    let mut s = 11u64;
    let raw = crate::cpu::test_util::xorshift_image(83, 71, &mut s, |r| (r >> 56) as u8);
    let mut blurred = GrayImage::default();
    blur_level(&raw, &mut blurred, &mut BlurBuffers::default());
    let mut n = 0;
    for cy in (-5..80).step_by(7) {
        for cx in (-5..90).step_by(6) {
            for k in 0..8 {
                let angle = [
                    -1.0f32,
                    0.0,
                    33.3,
                    90.0,
                    f32::from_bits(0x432f_906d),
                    211.7,
                    300.01,
                    359.99,
                ][k];
                for fma in [false, true] {
                    assert_eq!(
                        describe_one(&blurred, &raw, cx, cy, angle, fma),
                        describe_per_sample(&blurred, &raw, cx, cy, angle, fma),
                        "({cx}, {cy}) angle {angle} fma {fma}"
                    );
                    n += 1;
                }
            }
        }
    }
    assert!(n > 2000);
    for x in [
        -19.5f32, -2.5, -0.5, 0.5, 1.5, 2.5, 18.49, -18.51, 0.0, -0.0,
    ] {
        assert_eq!(round_even_i32(x), x.round_ties_even() as i32, "{x}");
    }
}

#[test]
fn inline_rounding_is_half_to_even() {
    for v in [
        -19.5f32,
        -2.5,
        -0.5,
        0.5,
        1.5,
        2.5,
        254.5,
        255.49,
        3.4999998,
        -0.49999997,
    ] {
        assert_eq!(round_even_small(v), v.round_ties_even(), "{v}");
    }
    let mut x = -300.0f32;
    while x < 300.0 {
        assert_eq!(round_even_small(x), x.round_ties_even(), "{x}");
        x += 0.0137;
    }
}

#[test]
fn hamming_counts_differing_bits() {
    let a = [0u8; 32];
    let mut b = [0u8; 32];
    b[0] = 0b1011;
    b[31] = 0x80;
    assert_eq!(hamming(&a, &b), 4);
    assert_eq!(hamming(&b, &b), 0);
}

#[test]
fn an_octave_past_the_levels_is_described_on_the_last() {
    // describe_all reads such a keypoint from the last level, so that level is the one
    // to blur (it was left unblurred, and read out of bounds, when no other keypoint
    // was on it).
    let mut s = 11u64;
    let l0 = crate::cpu::test_util::xorshift_image(150, 120, &mut s, |r| (r >> 56) as u8);
    let l1 = crate::cpu::test_util::xorshift_image(125, 100, &mut s, |r| (r >> 56) as u8);
    let levels = [l0.view(), l1.view()];
    let set = DescribeSettings::orb(1.2);
    let kp = Keypoint {
        x: 150.0,
        y: 120.0,
        response: 0.0,
        size: 31.0,
        angle: 33.0,
        octave: 3,
    };
    let (cx, cy) = center(&kp, set.scales, set.scale_factor);
    let mut whole = GrayImage::default();
    blur_level(&l1, &mut whole, &mut BlurBuffers::default());
    let want = describe_one(&whole, &l1, cx, cy, kp.angle, false);
    let (mut scratch, mut out) = (DescribeScratch::default(), Vec::new());
    describe_into(&levels, set, &[kp], &mut scratch, &mut out);
    assert_eq!(out, vec![want]);
    let mut pool_out = Vec::new();
    describe_into_threaded(
        &levels,
        set,
        &[kp],
        &mut DescribeScratch::default(),
        &mut pool_out,
    );
    assert_eq!(pool_out, vec![want]);
}
