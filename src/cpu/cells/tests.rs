use super::*;
use crate::image::GrayImage;

/// Noise: full contrast left of x = 160, +-12 grey levels right of it (few corners at
/// threshold 20, many at 7).
fn noise(w: usize, h: usize) -> GrayImage {
    let mut s = 12345u64;
    let data = (0..w * h)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 56) as u8;
            if i % w < 160 {
                r
            } else {
                128 - 12 + r % 25
            }
        })
        .collect();
    GrayImage::from_vec(w, h, data).unwrap()
}

#[test]
fn cell_windows_tile_the_detectable_area() {
    for (w, h, cell, b) in [(640, 480, 30, 19), (101, 97, 30, 31), (300, 200, 8, 3)] {
        let win = cell_windows(w, h, cell, b);
        let mut hits = vec![0u8; w * h];
        for &(x0, y0, x1, y1) in &win {
            assert!(x1 - x0 <= cell.max(1) * 2 + 6 && y1 - y0 >= 7);
            for y in y0 + 3..y1 - 3 {
                for x in x0 + 3..x1 - 3 {
                    hits[y as usize * w + x as usize] += 1;
                }
            }
        }
        for y in 0..h {
            for x in 0..w {
                let inside = (b as usize..w - b as usize).contains(&x)
                    && (b as usize..h - b as usize).contains(&y);
                assert_eq!(
                    hits[y * w + x],
                    inside as u8,
                    "{w}x{h} c{cell} b{b} ({x},{y})"
                );
            }
        }
    }
    assert!(
        cell_windows(38, 60, 30, 19).is_empty(),
        "no room left inside the border"
    );
    assert_eq!(
        cell_windows(40, 40, 8, 19),
        [(16, 16, 24, 24)],
        "2x2 px inside"
    );
    // ORB-SLAM3's nCols = span / W is 0 on a level narrower than a cell: nothing there.
    assert!(cell_windows(40, 40, 30, 19).is_empty(), "span 8 < cell 30");
    assert!(cell_windows(100, 56, 35, 19).is_empty(), "span_y 24 < 35");
    assert_eq!(
        cell_windows(100, 67, 35, 19),
        [(16, 16, 84, 51)],
        "one cell each way"
    );
}

#[test]
fn fast_in_cells_without_retry_is_fast_inside_the_border() {
    // Without NMS nothing looks across cells: exactly FAST's corners inside the border.
    let img = noise(320, 200);
    let b = 19;
    let mut want = fast::detect(&img, 20, false);
    want.retain(|c| c.x >= b && c.y >= b && c.x + b < 320 && c.y + b < 200);
    assert!(want.len() > 100);
    assert_eq!(fast_in_cells(&img, 20, 20, false, 30, b), want);
    // With NMS: a subset of the plain FAST corners, missing none of FAST's NMS survivors.
    let all = fast::detect(&img, 20, false);
    let nms = fast::detect(&img, 20, true);
    let cells = fast_in_cells(&img, 20, 20, true, 30, b);
    assert!(cells.iter().all(|c| all.contains(c)));
    assert!(nms
        .iter()
        .filter(|c| c.x >= b && c.y >= b && c.x + b < 320 && c.y + b < 200)
        .all(|c| cells.contains(c)));
}

#[test]
fn with_nms_each_cell_is_fast_on_its_window_then_the_retry() {
    // ORB-SLAM3's definition, window by window: FAST with NMS on the window's own
    // pixels at the threshold, at the min threshold where that found nothing.
    let img = noise(320, 200);
    let (b, hi, lo) = (19, 60, 7);
    let got = fast_in_cells(&img, hi, lo, true, 30, b);
    let mut want = Vec::new();
    let mut retried = 0;
    for &(x0, y0, x1, y1) in &cell_windows(320, 200, 30, b) {
        let (w, h) = ((x1 - x0) as usize, (y1 - y0) as usize);
        let data = (y0..y1)
            .flat_map(|y| img.row(y as usize)[x0 as usize..x1 as usize].to_vec())
            .collect();
        let win = GrayImage::from_vec(w, h, data).unwrap();
        let mut c = fast::detect(&win, hi, true);
        if c.is_empty() {
            c = fast::detect(&win, lo, true);
            retried += !c.is_empty() as usize;
        }
        want.extend(c.into_iter().map(|k| Corner {
            x: k.x + x0,
            y: k.y + y0,
            ..k
        }));
    }
    want.sort_unstable_by_key(|k| (k.y, k.x));
    assert!(retried > 5 && want.len() > 100, "retried {retried}");
    assert_eq!(got, want);
}

#[test]
fn fast_in_cells_retries_only_empty_cells() {
    let img = noise(320, 200);
    let (b, hi, lo) = (19, 60, 7);
    let strong = fast::detect(&img, hi, false);
    let weak = fast::detect(&img, lo, false);
    let got = fast_in_cells(&img, hi, lo, false, 30, b);
    let win = cell_windows(320, 200, 30, b);
    let (mut retried, mut kept) = (0, 0);
    for &(x0, y0, x1, y1) in &win {
        let inner = |c: &&Corner| c.x >= x0 + 3 && c.x + 3 < x1 && c.y >= y0 + 3 && c.y + 3 < y1;
        let s: Vec<_> = strong.iter().filter(inner).copied().collect();
        let g: Vec<_> = got.iter().filter(inner).copied().collect();
        if s.is_empty() {
            let w: Vec<_> = weak.iter().filter(inner).copied().collect();
            assert_eq!(g, w, "empty cell {x0},{y0}: the min-threshold corners");
            retried += !w.is_empty() as usize;
        } else {
            assert_eq!(g, s, "cell {x0},{y0}: the threshold corners only");
            kept += 1;
        }
    }
    assert!(retried > 5 && kept > 5, "retried {retried}, kept {kept}");
}

#[test]
fn one_scratch_serves_every_size_and_setting() {
    // The kept grid, flags and suppression rows must not leak from one call into the
    // next: a scratch reused over sizes (shrinking and growing, as a pyramid's levels
    // and a changed camera give) and settings gives what a fresh one gives.
    let mut scratch = CellScratch::default();
    let mut out = Vec::new();
    let mut seen = 0;
    for (w, h) in [
        (320, 200),
        (200, 140),
        (320, 200),
        (330, 210),
        (40, 40),
        (320, 200),
    ] {
        let img = noise(w, h);
        for (t, lo, nms, cell, border) in [
            (20, 7, true, 30, 19),
            (60, 7, false, 30, 19),
            (20, 7, true, 25, 3),
        ] {
            let settings = CellSettings {
                threshold: t,
                min_threshold: lo,
                nonmax_suppression: nms,
                cell_size: cell,
                border,
            };
            fast_in_cells_into(&img, settings, &mut scratch, &mut out);
            assert_eq!(
                out,
                fast_in_cells(&img, t, lo, nms, cell, border),
                "{w}x{h}"
            );
            seen += out.len();
        }
    }
    assert!(seen > 1000, "{seen}");
}
