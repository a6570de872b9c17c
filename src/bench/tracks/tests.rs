//! `bench --tracks`'s unit tests.

use super::*;

fn photo(w: usize, h: usize) -> Photo {
    let mut img = GrayImage::new(w, h);
    for (i, v) in img.data.iter_mut().enumerate() {
        *v = ((i % w) * 7 + (i / w) * 3) as u8;
    }
    Photo {
        name: format!("{w}x{h}"),
        img,
    }
}

#[test]
fn pans_move_by_the_step_and_skip_small_photos() {
    let photos = [photo(100, 100), photo(300, 200)];
    let size = Size {
        width: 160,
        height: 120,
    };
    let pans = pan_sequences(&photos, size);
    assert_eq!(pans.names, ["300x200"]);
    assert_eq!(pans.left[0].len(), SEQ_LEN);
    let (a, b) = (&pans.left[0][0], &pans.left[0][1]);
    // Frame 1 at (x, y) is frame 0 at (x + step).
    assert_eq!(b.get(10, 10), a.get(10 + PAN_STEP.0, 10 + PAN_STEP.1));
    assert_ne!(a.data, b.data);
    // The right camera: the left's pixel x at x - DISPARITY.
    let r = &pans.right[0].as_ref().expect("room for the right camera")[5];
    assert_eq!(r.get(10, 10), pans.left[0][5].get(10 + DISPARITY, 10));
    // No room to the right: no right camera.
    let tight = [photo(160 + PAN_STEP.0 * SEQ_LEN, 200)];
    assert!(pan_sequences(&tight, size).right[0].is_none());
}

#[test]
fn the_table_puts_trackers_side_by_side_with_the_ratio() {
    let row = |tracker: &str, p50: f64| TrackRow {
        size: "752x480".into(),
        max_features: 150,
        min_distance: 30.0,
        tracker: tracker.into(),
        tracks_mean: 120.0,
        ms: Dist {
            n: 10,
            p50,
            p90: p50 * 1.5,
            ..Dist::default()
        },
        stages: None,
    };
    let t = table(&[
        row("cuda", 0.25),
        row("cpu", 9.0),
        row("opencv-1", 5.0),
        row("opencv-N (16)", 4.0),
    ]);
    let line = t.lines().nth(2).unwrap();
    assert!(
        line.starts_with("| 752x480 | 150 (30 px) | 120 |"),
        "{line}"
    );
    assert!(line.ends_with("| 16.0x |"), "{line}");
}
