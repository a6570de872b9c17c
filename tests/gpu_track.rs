//! The tracker's GPU stages against the CPU reference (itself bit-exact with OpenCV:
//! tests/exact_track.rs), on the real sequence tests/data/seq: the LK pyramid level by
//! level and every tracked point's position bits, status and `err`, forward (3 levels) and
//! the flow-back pass (1 level, initial flow), on GFTT corners and seeded sub-pixel points
//! (some near and past the border). Skipped without a CUDA device.
#![cfg(feature = "cuda")]

mod shared;

#[path = "shared/counting_alloc.rs"]
mod counting_alloc;

use std::path::Path;

use gpu_features::cpu::decode::load_gray;
use gpu_features::cpu::gftt::{good_features_to_track, GfttParams, GfttScratch};
use gpu_features::cpu::lk::{track, Flow, FlowPyramid, LkParams, LkScratch};
use gpu_features::cuda::lk::{GpuFlowPyramid, GpuLk};
use gpu_features::cuda::Gpu;
use gpu_features::BackendKind;

fn frame(k: usize) -> gpu_features::GrayImage {
    load_gray(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/seq/cockatoo_{k:02}.png")),
    )
    .unwrap()
}

/// The frame's GFTT corners and 60 seeded points in and around it (up to 8 px past each
/// border), the next state of `seed` after them.
fn points(a: &gpu_features::GrayImage, gfs: &mut GfttScratch, seed: &mut u32) -> Vec<(f32, f32)> {
    let mut pts = Vec::new();
    good_features_to_track(a, &GfttParams::default(), None, gfs, &mut pts);
    for _ in 0..60 {
        let mut u = |span: f32| {
            *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (*seed >> 8) as f32 / (1 << 24) as f32 * span - 8.0
        };
        let (x, y) = (u(a.width as f32 + 16.0), u(a.height as f32 + 16.0));
        pts.push((x, y));
    }
    pts
}

/// The bits of a flow's position and its status.
fn bits(f: &Flow) -> (u32, u32, bool) {
    (f.x.to_bits(), f.y.to_bits(), f.status)
}

/// The CPU's and the GPU's LK of one frame pair (pyramids `cpu` and `gpu_pyr`, built and
/// with derivatives) compared three ways: forward (position bits, status, `err` where
/// tracked), the reverse pass alone (initial flow), and forward and back in one launch.
/// Returns the points and how many the forward pass tracked.
#[allow(clippy::too_many_arguments)]
fn compare_pair(
    gpu: &Gpu,
    glk: &mut GpuLk,
    cpu: (&FlowPyramid, &FlowPyramid),
    gpu_pyr: (&GpuFlowPyramid, &GpuFlowPyramid),
    pts: &[(f32, f32)],
    p: &LkParams,
    s: &mut LkScratch,
    what: &str,
) -> (usize, usize) {
    let back = LkParams { max_level: 1, ..*p };
    let ((ca, cb), (ga, gb)) = (cpu, gpu_pyr);
    let (mut cf, mut gf, mut cr, mut gr) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    track(ca, cb, pts, None, p, s, &mut cf);
    glk.track(gpu, ga, gb, pts, None, p, None, &mut gf, &mut gr)
        .unwrap();
    for (i, (c, g)) in cf.iter().zip(&gf).enumerate() {
        assert_eq!(
            bits(c),
            bits(g),
            "{what} point {i} {:?}: cpu {c:?} gpu {g:?}",
            pts[i]
        );
        if c.status {
            assert_eq!(c.err.to_bits(), g.err.to_bits(), "err of point {i}");
        }
    }
    // The reverse pass alone (initial flow), as the CPU runs it.
    let fwd: Vec<(f32, f32)> = cf.iter().map(|f| (f.x, f.y)).collect();
    track(cb, ca, &fwd, Some(pts), &back, s, &mut cr);
    let mut unused = Vec::new();
    glk.track(
        gpu,
        gb,
        ga,
        &fwd,
        Some(pts),
        &back,
        None,
        &mut gr,
        &mut unused,
    )
    .unwrap();
    for (i, (c, g)) in cr.iter().zip(&gr).enumerate() {
        assert_eq!(bits(c), bits(g), "{what} reverse point {i}");
    }
    // Forward and back in one launch: the same forward results, and the CPU's reverse
    // results wherever the forward status holds.
    let (mut fused_f, mut fused_b) = (Vec::new(), Vec::new());
    glk.track(
        gpu,
        ga,
        gb,
        pts,
        None,
        p,
        Some((&back, true)),
        &mut fused_f,
        &mut fused_b,
    )
    .unwrap();
    assert_eq!(fused_b.len(), pts.len());
    for i in 0..pts.len() {
        assert_eq!(
            bits(&fused_f[i]),
            bits(&cf[i]),
            "{what} fused forward point {i}"
        );
        if cf[i].status {
            assert_eq!(
                bits(&fused_b[i]),
                bits(&cr[i]),
                "{what} fused back point {i}"
            );
        } else {
            assert!(!fused_b[i].status);
        }
    }
    (cf.len(), cf.iter().filter(|c| c.status).count())
}

#[test]
fn gpu_lk_matches_cpu_on_the_sequence() {
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => return shared::skip_without_gpu("gpu_lk_matches_cpu_on_the_sequence", &e),
    };
    eprintln!("gpu_lk_matches_cpu_on_the_sequence: {}", gpu.name);
    let mut s = LkScratch::default();
    let mut gfs = GfttScratch::default();
    let mut seed = 0x2545_f491u32;
    let (mut total, mut tracked) = (0, 0);
    let mut glk = GpuLk::new(&gpu, 64).unwrap();
    // VINS's window first on every frame pair; then windows that change the kernel's split
    // into SIMD blocks and tail (none, one block and a long tail, three blocks) on two.
    for (win, frames) in [(21usize, 0..7), (7, 0..2), (15, 2..4), (31, 4..6)] {
        let p = LkParams {
            window: win,
            ..Default::default()
        };
        let (mut ca, mut cb) = (FlowPyramid::default(), FlowPyramid::default());
        let (mut ga, mut gb) = (GpuFlowPyramid::new(), GpuFlowPyramid::new());
        for k in frames {
            let (a, b) = (frame(k), frame(k + 1));
            ca.build(&a, win, 3);
            cb.build(&b, win, 3);
            ca.ensure_derivatives();
            cb.ensure_derivatives();
            ga.build(&gpu, &a, win, 3).unwrap();
            gb.build(&gpu, &b, win, 3).unwrap();
            ga.ensure_derivatives(&gpu).unwrap();
            gb.ensure_derivatives(&gpu).unwrap();
            let pts = points(&a, &mut gfs, &mut seed);
            let what = format!("window {win} frame {k}");
            let (n, t) = compare_pair(
                &gpu,
                &mut glk,
                (&ca, &cb),
                (&ga, &gb),
                &pts,
                &p,
                &mut s,
                &what,
            );
            total += n;
            tracked += t;
        }
    }
    assert!(total > 800 && tracked * 2 > total, "{tracked} of {total}");
    eprintln!("gpu_lk_matches_cpu_on_the_sequence: {total} points, {tracked} tracked, identical");
}

/// The whole tracker with its LK stage on the GPU equals the CPU tracker frame by frame
/// (IDs, ages, position bits), with the F test on, on the real sequence.
#[test]
fn gpu_tracker_equals_cpu_tracker() {
    use gpu_features::track::{TrackParams, Tracker};
    let (mut g, why) = Tracker::with_cuda(TrackParams::default());
    if g.backend() != BackendKind::Cuda {
        return shared::skip_without_gpu(
            "gpu_tracker_equals_cpu_tracker",
            &why.unwrap_or_default(),
        );
    }
    let mut c = Tracker::new(TrackParams::default());
    let mut total = 0;
    for k in 0..8 {
        let img = frame(k);
        let a: Vec<_> = c
            .track(&img, k as f64 / 30.0, None)
            .iter()
            .map(|t| (t.id, t.x.to_bits(), t.y.to_bits(), t.age))
            .collect();
        let b: Vec<_> = g
            .track(&img, k as f64 / 30.0, None)
            .iter()
            .map(|t| (t.id, t.x.to_bits(), t.y.to_bits(), t.age))
            .collect();
        assert_eq!(a, b, "frame {k}");
        total += a.len();
    }
    assert_eq!(
        g.backend(),
        BackendKind::Cuda,
        "no fallback: {:?}",
        g.gpu_failure()
    );
    eprintln!("gpu_tracker_equals_cpu_tracker: 8 frames, {total} tracks, identical");
}

/// goodFeaturesToTrack on the GPU equals the CPU reference on every frame, with and without
/// a VINS mask (uploaded as an image, or drawn on the GPU from its discs).
#[test]
fn gpu_gftt_matches_cpu() {
    use gpu_features::cuda::gftt::{GfttInput, GfttMask, GpuGftt};
    use gpu_features::track::mask::{fill_circle, Discs};
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => return shared::skip_without_gpu("gpu_gftt_matches_cpu", &e),
    };
    let mut s = GfttScratch::default();
    let mut g = GpuGftt::new(&gpu, 640, 360).unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut n, mut in_discs_mask) = (0, 0);
    for k in 0..8 {
        let img = frame(k);
        let p = GfttParams::default();
        good_features_to_track(&img, &p, None, &mut s, &mut a);
        g.run(&gpu, &img, &p, None, &mut b).unwrap();
        assert_eq!(a, b, "frame {k}");
        let mut mask = gpu_features::GrayImage::new(img.width, img.height);
        mask.data.fill(255);
        for &(x, y) in a.iter().step_by(3) {
            fill_circle(&mut mask, x as i32 + 3, y as i32 - 2, 30, 0);
        }
        let p = GfttParams {
            max_corners: 100,
            min_distance: 20.0,
            ..Default::default()
        };
        good_features_to_track(&img, &p, Some(&mask), &mut s, &mut a);
        g.run(&gpu, &img, &p, Some(&mask), &mut b).unwrap();
        assert_eq!(a, b, "frame {k}, masked");
        n += a.len();
        // VINS's mask drawn on the GPU from the claimed discs (the tracker's way), at the
        // corners and the image's edges, equals the CPU on the mask painted on the host.
        let mut discs = Discs::default();
        discs.start((img.width, img.height), 10 + 3 * k as i32);
        let edges = [(0, 0), (639, 359), (0, 200), (320, 359), (639, 5)];
        for (x, y) in a.iter().map(|&(x, y)| (x as i32, y as i32)).chain(edges) {
            discs.claim(x, y);
        }
        discs.paint(&mut mask);
        good_features_to_track(&img, &p, Some(&mask), &mut s, &mut a);
        g.start_map(&gpu, GfttInput::Host(&img), &p).unwrap();
        let dm = GfttMask::Discs {
            centers: discs.centers(),
            spans: discs.spans(),
        };
        g.finish(&gpu, &p, dm, &mut b).unwrap();
        assert_eq!(
            a,
            b,
            "frame {k}, {} discs drawn on the GPU",
            discs.centers().len()
        );
        assert!(discs.centers().len() > 5, "frame {k}: a test with discs");
        n += a.len();
        in_discs_mask += a.len();
    }
    assert!(in_discs_mask > 0, "corners outside the discs");
    eprintln!(
        "gpu_gftt_matches_cpu: 24 calls, {n} masked corners ({in_discs_mask} outside drawn \
         discs), identical"
    );
}

/// Stereo (VINS-Fusion): the GPU tracker's left and right tracks equal the CPU tracker's
/// on the real sequence's stereo pairs (tests/exact_track.rs checks the CPU against OpenCV).
#[test]
fn gpu_stereo_equals_cpu_stereo() {
    use gpu_features::track::{Track, TrackParams, Tracker};
    let p = TrackParams {
        ransac_threshold: 0.0,
        ..Default::default()
    };
    let (mut g, why) = Tracker::with_cuda(p);
    if g.backend() != BackendKind::Cuda {
        return shared::skip_without_gpu("gpu_stereo_equals_cpu_stereo", &why.unwrap_or_default());
    }
    let mut c = Tracker::new(p);
    let key = |t: &Track| (t.id, t.x.to_bits(), t.y.to_bits(), t.age);
    let mut right = 0;
    for k in 0..8 {
        let (l, r) = shared::stereo_pair(&frame(k));
        c.track_stereo(&l, &r, k as f64 / 30.0, (None, None))
            .unwrap();
        g.track_stereo(&l, &r, k as f64 / 30.0, (None, None))
            .unwrap();
        let (a, b): (Vec<_>, Vec<_>) = (
            c.tracks().iter().map(key).collect(),
            g.tracks().iter().map(key).collect(),
        );
        assert_eq!(a, b, "frame {k} left");
        let (a, b): (Vec<_>, Vec<_>) = (
            c.right_tracks().iter().map(key).collect(),
            g.right_tracks().iter().map(key).collect(),
        );
        assert_eq!(a, b, "frame {k} right");
        right += a.len();
    }
    assert_eq!(
        g.backend(),
        BackendKind::Cuda,
        "no fallback: {:?}",
        g.gpu_failure()
    );
    assert!(right > 400, "{right}");
    eprintln!("gpu_stereo_equals_cpu_stereo: 8 pairs, {right} right tracks, identical");
}

/// The GPU tracker allocates nothing on the host per frame after the first two frames of a
/// size (mono with the fundamental-matrix test, and stereo), as the CPU one
/// (tests/robustness.rs): the real sequence three times.
#[test]
fn gpu_tracker_allocates_nothing_per_frame_after_the_first_two() {
    use gpu_features::track::{TrackParams, Tracker};
    let (mut mono, why) = Tracker::with_cuda(TrackParams {
        ransac_threshold: 1.0,
        ..Default::default()
    });
    if mono.backend() != BackendKind::Cuda {
        return shared::skip_without_gpu(
            "gpu_tracker_allocates_nothing_per_frame_after_the_first_two",
            &why.unwrap_or_default(),
        );
    }
    let (mut stereo, _) = Tracker::with_cuda(TrackParams::default());
    let frames: Vec<_> = (0..8).map(frame).collect();
    let pairs: Vec<_> = frames.iter().map(shared::stereo_pair).collect();
    let mut stamp = 0.0;
    let mut found = Vec::new();
    for pass in 0..3 {
        for (k, (img, (l, r))) in frames.iter().zip(&pairs).enumerate() {
            stamp += 1.0 / 30.0;
            let (_, a) = counting_alloc::count_allocs(|| mono.track(img, stamp, None).len());
            let (_, b) = counting_alloc::count_allocs(|| {
                stereo.track_stereo(l, r, stamp, (None, None)).unwrap();
            });
            if (pass > 0 || k > 1) && (a, b) != (0, 0) {
                found.push((pass, k, a, b));
            }
        }
    }
    assert_eq!(
        mono.backend(),
        BackendKind::Cuda,
        "{:?}",
        mono.gpu_failure()
    );
    assert_eq!(
        stereo.backend(),
        BackendKind::Cuda,
        "{:?}",
        stereo.gpu_failure()
    );
    // (pass, frame, mono allocations, stereo allocations) of every frame that allocated
    assert!(found.is_empty(), "{found:?}");
    eprintln!("gpu tracker: 22 mono and 22 stereo frames counted, no allocation");
}

/// The GPU tracker fed the pipeline's gray image on the GPU (`TrackInput::Device`: its
/// pyramid built from a device copy, nothing converted on the host or uploaded again)
/// equals the CPU tracker on the same messages, mono8 and bgr8 (the pipeline's GPU decode
/// converts the bgr8 one), in a GPU session of its own and in the pipeline's
/// (`Tracker::for_pipeline`: one context, its work on the pipeline's streams).
#[test]
fn gpu_tracker_on_the_pipelines_gray_equals_cpu_tracker() {
    use gpu_features::track::{Track, TrackInput, TrackParams, Tracker};
    use gpu_features::{BackendChoice, Config, Features, ImageView, Pipeline};
    let (probe, why) = Tracker::with_cuda(TrackParams::default());
    if probe.backend() != BackendKind::Cuda {
        return shared::skip_without_gpu(
            "gpu_tracker_on_the_pipelines_gray_equals_cpu_tracker",
            &why.unwrap_or_default(),
        );
    }
    let key = |t: &Track| (t.id, t.x.to_bits(), t.y.to_bits(), t.age);
    let mut pipe = Pipeline::new(Config::default(), BackendChoice::Cuda).unwrap();
    let mut features = Features::default();
    let mut total = 0;
    for (enc, one_session) in [
        ("mono8", false),
        ("bgr8", false),
        ("mono8", true),
        ("bgr8", true),
    ] {
        let (mut g, why) = if one_session {
            Tracker::for_pipeline(&pipe, TrackParams::default())
        } else {
            Tracker::with_cuda(TrackParams::default())
        };
        assert!(why.is_none(), "{why:?}");
        let mut c = Tracker::new(TrackParams::default());
        for k in 0..8 {
            let img = frame(k);
            let (data, bpp) = match enc {
                "mono8" => (img.data.clone(), 1),
                _ => (
                    img.data
                        .iter()
                        .flat_map(|&v| [v, v / 3 + 40, 255 - v])
                        .collect::<Vec<u8>>(),
                    3,
                ),
            };
            let view =
                ImageView::new(&data, img.width, img.height, img.width * bpp, enc, false).unwrap();
            pipe.process_into(&view, &mut features).unwrap();
            let gray = pipe
                .gray_on_device()
                .expect("the frame's gray image on the GPU");
            let stamp = k as f64 / 30.0;
            let a: Vec<_> = c.track_view(&view, stamp, None).iter().map(key).collect();
            let b: Vec<_> = g
                .track_input(TrackInput::Device(gray, &view), stamp, None)
                .iter()
                .map(key)
                .collect();
            assert_eq!(a, b, "{enc} frame {k}, one session: {one_session}");
            total += a.len();
        }
        assert_eq!(
            g.backend(),
            BackendKind::Cuda,
            "no fallback: {:?}",
            g.gpu_failure()
        );
    }
    assert!(total > 2000, "{total}");
    eprintln!(
        "gpu_tracker_on_the_pipelines_gray: 32 frames (own and shared session), {total} tracks, \
         identical"
    );
}

/// The tracker begun beside the pipeline's detection (`Tracker::begin` from
/// `Pipeline::process_edges_then`: its pyramid and LK queued on the tracker's stream as
/// soon as the decode is, what the node does) equals the CPU tracker frame by frame: on
/// full frames, on a flow-only frame (VINS-Mono's), on a frame begun with another stamp
/// (dropped and tracked again), and around a begun frame that is never finished
/// (`Tracker::drop_begun`: the tracks go on from the frame before, as if it never came).
#[test]
fn gpu_tracker_begun_beside_the_detection_equals_cpu_tracker() {
    use gpu_features::track::{Track, TrackInput, TrackParams, Tracker};
    use gpu_features::{BackendChoice, Config, Features, ImageView, Pipeline};
    let name = "gpu_tracker_begun_beside_the_detection_equals_cpu_tracker";
    let mut pipe = match Pipeline::new(Config::default(), BackendChoice::Cuda) {
        Ok(p) if p.backend() == BackendKind::Cuda => p,
        Ok(p) => return shared::skip_without_gpu(name, &p.fallback_reason().unwrap_or("")),
        Err(e) => return shared::skip_without_gpu(name, &e.to_string()),
    };
    let key = |t: &Track| (t.id, t.x.to_bits(), t.y.to_bits(), t.age);
    let mut features = Features::default();
    let (mut g, why) = Tracker::for_pipeline(&pipe, TrackParams::default());
    assert!(why.is_none(), "{why:?}");
    let mut c = Tracker::new(TrackParams::default());
    // Forward through the sequence, then back: 15 frames of real motion.
    let order: Vec<usize> = (0..8).chain((0..7).rev()).collect();
    let (mut total, mut compared) = (0, 0);
    for (i, &k) in order.iter().enumerate() {
        let img = frame(k);
        let view =
            ImageView::new(&img.data, img.width, img.height, img.width, "mono8", false).unwrap();
        let stamp = i as f64 / 30.0;
        let full = i != 3;
        // Frame 6 is begun with a stamp that is not its own; frame 10 is never finished.
        let begun_stamp = if i == 6 { stamp + 0.001 } else { stamp };
        let mut begin = |gray: gpu_features::cuda::DeviceGray<'_>| {
            g.begin(TrackInput::Device(gray, &view), begun_stamp, None, full)
        };
        pipe.process_edges_then(&view, &mut features, None, &mut begin)
            .unwrap();
        if i == 10 {
            g.drop_begun();
            continue;
        }
        let gray = pipe.gray_on_device().expect("the frame's gray image");
        let input = TrackInput::Device(gray, &view);
        let (a, b): (Vec<_>, Vec<_>) = if full {
            let a = c.track_view(&view, stamp, None).iter().map(key).collect();
            (
                a,
                g.track_input(input, stamp, None).iter().map(key).collect(),
            )
        } else {
            let cv = TrackInput::View(&view);
            let a = c.track_flow_only(cv, stamp, None).iter().map(key).collect();
            (
                a,
                g.track_flow_only(input, stamp, None)
                    .iter()
                    .map(key)
                    .collect(),
            )
        };
        assert_eq!(a, b, "frame {i} (image {k})");
        total += a.len();
        compared += 1;
        assert_eq!(g.backend(), BackendKind::Cuda, "{:?}", g.gpu_failure());
    }
    assert_eq!(compared, 14);
    assert!(total > 40 * compared, "{total}");
    eprintln!("{name}: {compared} frames, {total} tracks, identical");
}

/// Stereo with the second camera's frame kept on the GPU (`Pipeline::keep_gray` after that
/// camera's pipeline ran, `RightInput::Device`: what the node does while its tracker is on
/// the GPU): the same left and right tracks as the CPU tracker on the host frames. The
/// kept copy outlives the right pipeline's next frame (it is used after that frame ran).
#[test]
fn gpu_stereo_from_the_kept_device_frame_equals_cpu_stereo() {
    use gpu_features::track::{RightInput, Track, TrackParams, Tracker};
    use gpu_features::{BackendChoice, Config, Features, ImageView, Pipeline};
    let p = TrackParams::default();
    let (mut g, why) = Tracker::with_cuda(p);
    if g.backend() != BackendKind::Cuda {
        return shared::skip_without_gpu(
            "gpu_stereo_from_the_kept_device_frame_equals_cpu_stereo",
            &why.unwrap_or_default(),
        );
    }
    let mut c = Tracker::new(p);
    let key = |t: &Track| (t.id, t.x.to_bits(), t.y.to_bits(), t.age);
    let mut right_pipe = Pipeline::new(Config::default(), BackendChoice::Cuda).unwrap();
    let mut features = Features::default();
    let pairs: Vec<_> = (0..8).map(|k| shared::stereo_pair(&frame(k))).collect();
    let mut kept = None;
    let mut right = 0;
    fn view(img: &gpu_features::GrayImage) -> ImageView<'_> {
        ImageView::new(&img.data, img.width, img.height, img.width, "mono8", false).unwrap()
    }
    for (k, (l, r)) in pairs.iter().enumerate() {
        right_pipe.process_into(&view(r), &mut features).unwrap();
        assert!(
            right_pipe.keep_gray(&mut kept).unwrap(),
            "frame {k}: nothing kept"
        );
        // The right pipeline's next frame overwrites its own gray image, not the kept copy.
        let next = &pairs[(k + 1) % pairs.len()].1;
        right_pipe.process_into(&view(next), &mut features).unwrap();
        let stamp = k as f64 / 30.0;
        c.track_stereo(l, r, stamp, (None, None)).unwrap();
        g.track(l, stamp, None);
        let dev = kept.as_ref().expect("kept").gray();
        g.track_right_input(RightInput::Device(dev), None).unwrap();
        for (what, a, b) in [
            ("left", c.tracks(), g.tracks()),
            ("right", c.right_tracks(), g.right_tracks()),
        ] {
            let (a, b): (Vec<_>, Vec<_>) =
                (a.iter().map(key).collect(), b.iter().map(key).collect());
            assert_eq!(a, b, "frame {k} {what}");
        }
        right += c.right_tracks().len();
    }
    assert_eq!(
        g.backend(),
        BackendKind::Cuda,
        "no fallback: {:?}",
        g.gpu_failure()
    );
    assert!(right > 400, "{right}");
    // A CPU tracker given a frame on the GPU: an error for that frame, no right tracks.
    let (l, _) = &pairs[0];
    c.track(l, 1.0, None);
    let dev = kept.as_ref().unwrap().gray();
    let e = c
        .track_right_input(RightInput::Device(dev), None)
        .unwrap_err();
    assert!(e.contains("on the GPU"), "{e}");
    assert!(c.right_tracks().is_empty());
    eprintln!("gpu_stereo_from_the_kept_device_frame: 8 pairs, {right} right tracks, identical");
}
