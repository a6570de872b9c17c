//! Unit tests of [`super`].

use super::*;
use crate::image::GrayImage;

#[test]
fn row_sums_equal_the_per_pixel_sums() {
    // Every point whose block and ring lie inside, blocks 3..9: the vectorised row sums
    // against the reflected per-pixel form (which reads the same pixels there).
    let mut seed = 3u64;
    let img = crate::cpu::test_util::xorshift_image(37, 29, &mut seed, |r| (r >> 56) as u8);
    for bs in [3usize, 5, 7, 9] {
        let r = bs / 2;
        for y in r + 1..29 - r - 1 {
            for x in r + 1..37 - r - 1 {
                let want = sums_reflected(img.view(), x as isize, y as isize, bs as u32);
                assert_eq!(sums_versions(img.view(), x, y, bs), want, "{x},{y} b{bs}");
            }
        }
    }
}

#[test]
fn reflect101_mirrors_without_repeating_the_edge() {
    let got: Vec<usize> = (-3..8).map(|i| reflect101(i, 5)).collect();
    assert_eq!(got, [3, 2, 1, 0, 1, 2, 3, 4, 3, 2, 1]);
}

#[test]
fn flat_image_has_zero_response_and_no_corners() {
    let mut img = GrayImage::new(20, 12);
    img.data.fill(77);
    let mut r = Vec::new();
    dense_response(&img, 2, 3, 0.04, &mut r);
    assert!(r.iter().all(|&v| v == 0.0));
    assert!(dense_corners(&img, 2, 3, 0.04, 0.01).is_empty());
    assert_eq!(orb_score(&img, 10, 6, 7, 0.04), 0.0);
}
