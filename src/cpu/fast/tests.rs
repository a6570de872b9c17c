//! Unit tests of [`super`].

use super::*;
use crate::image::GrayImage;

#[test]
fn arc9_matches_a_loop_over_all_masks() {
    for m in 0..=u16::MAX {
        let looped = (0..16).any(|s| (s..s + 9).all(|k| m >> (k % 16) & 1 == 1));
        assert_eq!(has_arc9(m), looped, "mask {m:#06x}");
    }
}

#[test]
fn bands_give_the_whole_images_corners() {
    // Also through one set of kept buffers over every size and band count (growing and
    // shrinking): nothing of an earlier call may leak into a later one.
    let (mut one, mut bands_kept, mut out) =
        (FastScratch::default(), BandScratch::default(), vec![]);
    let mut seed = 5u64;
    for (w, h) in [(64, 48), (97, 31), (40, 7), (200, 150), (64, 48)] {
        let img =
            crate::cpu::test_util::xorshift_image(w, h, &mut seed, |r| ((r >> 56) as u8 / 64) * 60);
        for nms in [true, false] {
            let whole = detect(&img, 20, nms);
            assert!(!whole.is_empty() || h < 10, "{w}x{h}");
            detect_into(&img, 20, nms, &mut one, &mut out);
            assert!(out == whole, "{w}x{h} nms {nms}, kept rows");
            for bands in [1, 2, 3, 7, 64, 1000] {
                let banded = detect_banded(&img, 20, nms, bands);
                assert!(banded == whole, "{w}x{h} nms {nms} bands {bands}");
                detect_banded_into(&img, 20, nms, bands, &mut bands_kept, &mut out);
                assert!(
                    out == whole,
                    "{w}x{h} nms {nms} bands {bands}, kept buffers"
                );
            }
        }
    }
}

#[test]
fn batch_scores_are_the_per_corner_scores() {
    // Random rows of several contrasts (flat, noise, full range): every centre's
    // score_lanes value is lane_score's, bright and dark arcs alike.
    let mut s = 99u64;
    for spread in [0u32, 3, 12, 40, 256] {
        let w = LANES + 6 + 5;
        let data: Vec<Vec<u8>> = (0..7)
            .map(|_| {
                (0..w)
                    .map(|_| {
                        s = s
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let r = (s >> 33) as u32 % spread.max(1);
                        (128 + r - spread.min(256) / 2).min(255) as u8
                    })
                    .collect()
            })
            .collect();
        let rows: Rows = std::array::from_fn(|i| &data[i][..]);
        for x0 in 3..=w - LANES - 3 {
            let batch = score_lanes(&window(&rows, x0));
            for (i, &b) in batch.iter().enumerate() {
                assert_eq!(b, lane_score(&rows, x0 + i), "spread {spread} x {}", x0 + i);
            }
        }
    }
}

#[test]
fn score_is_the_last_threshold_that_still_detects() {
    // A bright 9-arc of +40 with one +25 pixel in it, on a flat background.
    let mut img = GrayImage::new(9, 9);
    img.data.fill(100);
    for (k, &(dx, dy)) in CIRCLE.iter().enumerate().take(9) {
        let v = if k == 4 { 125 } else { 140 };
        img.data[((4 + dy) * 9 + 4 + dx) as usize] = v;
    }
    assert_eq!(score(&img, 4, 4), 24);
    assert!(is_corner_naive(&img, 4, 4, 24));
    assert!(!is_corner_naive(&img, 4, 4, 25));
    let c = detect(&img, 10, true);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].x, c[0].y, c[0].fast_score), (4, 4, 24));
}

#[test]
fn rows_of_several_chunks_equal_the_naive_segment_test() {
    // Rows wider than one filter pass (CHUNK steps of LANES centres), at, just past and far
    // past its end, and narrower than one step: every pixel's flag and score against the
    // plain segment test, both polarities (three grey levels, half of the pixels the brightest; thresholds at their gaps).
    let mut seed = 17u64;
    let chunk = CHUNK * LANES + 2 * BORDER;
    for w in [LANES + 5, chunk - 1, chunk, chunk + 1, 2 * chunk + 45] {
        for t in [9u8, 10, 39] {
            let img = crate::cpu::test_util::xorshift_image(w, 9, &mut seed, |r| {
                [80u8, 90, 130, 130][(r >> 62) as usize]
            });
            let got: Vec<(u32, u32, u8)> = detect(&img, t, false)
                .iter()
                .map(|c| (c.x, c.y, c.fast_score))
                .collect();
            let mut want = Vec::new();
            for y in BORDER..9 - BORDER {
                for x in BORDER..w - BORDER {
                    if is_corner_naive(&img, x, y, t) {
                        want.push((x as u32, y as u32, score(&img, x, y)));
                    }
                }
            }
            assert!(!want.is_empty(), "w {w} t {t}: no corner to compare");
            assert!(got == want, "w {w} t {t}");
        }
    }
}
