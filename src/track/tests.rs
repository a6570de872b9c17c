//! The tracker's unit tests on a synthetic scene (the OpenCV goldens are in
//! tests/exact_track.rs).

use super::*;

/// Random 6x6-pixel blocks of gray (a fixed generator), smoothed by a 3x3 box so that
/// sub-pixel shifts are trackable, shifted right by `dx` pixels (bilinear).
fn scene(w: usize, h: usize, dx: f32) -> GrayImage {
    let mut s = 0x1234_5678u32;
    let (bw, bh) = (w / 6 + 2, h / 6 + 2);
    let blocks: Vec<f32> = (0..bw * bh)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            40.0 + (s >> 24) as f32 * 0.7
        })
        .collect();
    let at = |x: f32, y: usize| blocks[(y / 6) * bw + ((x.max(0.0) as usize) / 6).min(bw - 1)];
    let mut img = GrayImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            let fx = x as f32 - dx;
            let (x0, t) = (fx.floor(), fx - fx.floor());
            let mut v = 0.0;
            for yy in y.saturating_sub(1)..=(y + 1).min(h - 1) {
                for k in -1..=1 {
                    let xs = x0 + k as f32;
                    v += at(xs, yy) * (1.0 - t) + at(xs + 1.0, yy) * t;
                }
            }
            img.data[y * w + x] = (v / 9.0) as u8;
        }
    }
    img
}

#[test]
fn ids_persist_age_grows_and_a_time_jump_resets() {
    let mut t = Tracker::new(TrackParams::default());
    let first: Vec<u64> = t
        .track(&scene(320, 240, 0.0), 0.0, None)
        .iter()
        .map(|t| t.id)
        .collect();
    assert!(first.len() > 20, "{}", first.len());
    let second = t.track(&scene(320, 240, 1.5), 0.05, None).to_vec();
    let kept: Vec<&Track> = second.iter().filter(|t| first.contains(&t.id)).collect();
    assert!(
        kept.len() * 10 >= first.len() * 7,
        "{} of {}",
        kept.len(),
        first.len()
    );
    assert!(kept.iter().all(|t| t.age == 2));
    let near = kept
        .iter()
        .filter(|t| (t.px_vx - 30.0).abs() < 3.0 && t.px_vy.abs() < 3.0)
        .count();
    assert!(
        near * 10 >= kept.len() * 9,
        "{near} of {} move at 30 px/s",
        kept.len()
    );
    assert!(
        second.iter().all(|t| t.x_n.is_nan()),
        "no camera, no normalised coordinates"
    );
    let max_id = second.iter().map(|t| t.id).max().unwrap();
    let third = t.track(&scene(320, 240, 3.0), 0.01, None).to_vec();
    assert_eq!(t.resets(), &[Reset::TimeWentBack]);
    assert!(
        third.iter().all(|t| t.age == 1 && t.id > max_id),
        "new IDs after a reset"
    );
}

#[test]
fn a_resolution_change_resets_and_the_budget_holds() {
    let p = TrackParams {
        max_features: 40,
        ..Default::default()
    };
    let mut t = Tracker::new(p);
    assert!(t.track(&scene(320, 240, 0.0), 0.0, None).len() <= 40);
    t.track(&scene(300, 200, 0.0), 0.1, None);
    assert_eq!(t.resets(), &[Reset::Resolution]);
    let fast = TrackParams {
        top_up: TopUp::Fast(20),
        ..p
    };
    let mut t = Tracker::new(fast);
    let n = t.track(&scene(320, 240, 0.0), 0.0, None).len();
    assert!(n > 10 && n <= 40, "{n}");
}

#[test]
fn stereo_finds_the_left_tracks_at_the_disparity_and_checks_the_size() {
    let mut t = Tracker::new(TrackParams::default());
    let (l0, r0) = (scene(320, 240, 0.0), scene(320, 240, -4.0));
    t.track_stereo(&l0, &r0, 0.0, (None, None)).unwrap();
    let n = t.tracks().len();
    let right = t.right_tracks().to_vec();
    assert!(right.len() * 10 >= n * 7, "{} of {n}", right.len());
    for r in &right {
        let l = t.tracks().iter().find(|l| l.id == r.id).unwrap();
        assert!(
            (l.x - r.x - 4.0).abs() < 0.5 && (l.y - r.y).abs() < 0.5,
            "{l:?} {r:?}"
        );
        assert_eq!(l.age, r.age);
    }
    // The pair moves 1.5 px right: the right tracks' pixel velocity follows.
    let (l1, r1) = (scene(320, 240, 1.5), scene(320, 240, -2.5));
    t.track_stereo(&l1, &r1, 0.05, (None, None)).unwrap();
    let moved = t
        .right_tracks()
        .iter()
        .filter(|r| right.iter().any(|p| p.id == r.id));
    let v: Vec<f64> = moved.map(|r| r.px_vx).collect();
    assert!(!v.is_empty());
    let near = v.iter().filter(|&&vx| (vx - 30.0).abs() < 3.0).count();
    assert!(near * 10 >= v.len() * 9, "{near} of {} at 30 px/s", v.len());
    // A right frame of another size: an error, no right tracks, the left goes on.
    let e = t.track_stereo(&l1, &scene(300, 240, 0.0), 0.1, (None, None));
    assert!(e.unwrap_err().contains("300x240"));
    assert!(t.right_tracks().is_empty() && !t.tracks().is_empty());
}

/// A frame given with a gray image "on the device" to a CPU tracker: the engine cannot read
/// it, so the view is decoded on the host, and the tracks are those of `track_view` (the
/// device pointer is never touched). A device image of another size is not used either.
#[cfg(feature = "cuda")]
#[test]
fn a_device_frame_on_the_cpu_engine_is_decoded_from_its_view() {
    use crate::cuda::DeviceGray;
    use crate::image::ImageView;
    let (mut a, mut b) = (
        Tracker::new(TrackParams::default()),
        Tracker::new(TrackParams::default()),
    );
    for k in 0..4 {
        let img = scene(160, 120, 1.5 * k as f32);
        // bgr8: the decode's conversion, not a copy
        let bgr: Vec<u8> = img.data.iter().flat_map(|&v| [v, v / 2, 255 - v]).collect();
        let view = ImageView::new(&bgr, 160, 120, 480, "bgr8", false).unwrap();
        let size = if k == 2 { 80 } else { 160 };
        // SAFETY: never read: the CPU engine decodes the view instead (what this checks).
        let fake = unsafe { DeviceGray::from_raw(0xdead_0000, size, 120, size) };
        let stamp = k as f64 / 30.0;
        let key = |t: &Track| (t.id, t.x.to_bits(), t.y.to_bits(), t.age);
        let want: Vec<_> = a.track_view(&view, stamp, None).iter().map(key).collect();
        let got: Vec<_> = b
            .track_input(TrackInput::Device(fake, &view), stamp, None)
            .iter()
            .map(key)
            .collect();
        assert_eq!(got, want, "frame {k}");
        assert!(!got.is_empty());
    }
}
