//! The callers' buffers. `Pipeline::input_buffer` + `process_input_into`: a frame written
//! into the pipeline's own buffer (pinned staging memory on the GPU) gives exactly what
//! `process_into` gives for the same bytes, on the CPU and (when there is one) on the GPU;
//! bad layouts are clear errors. `Pipeline::process_into_edges`: the edge map written into
//! the caller's buffer is `process_into`'s, with the same keypoints.

use gpu_features::config::{Config, ZeroCopy};
use gpu_features::image::{load_view_owned, Encoding, FrameLayout, ImageView};
use gpu_features::{BackendChoice, Error, Features, Pipeline};

mod shared;

/// A real photo as bgr8 with padded rows, and as packed mono8.
fn frames() -> Vec<(FrameLayout, Vec<u8>)> {
    // The test binary may run from a copy of the repository on the GPU machine.
    let rel = std::path::Path::new("tests/data/graf1.png");
    let path = if rel.is_file() {
        rel.to_path_buf()
    } else {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
    };
    let f = load_view_owned(&path).unwrap();
    let (w, h) = (f.width, f.height);
    let gray: Vec<u8> = match f.encoding {
        Encoding::Rgb8 => f.data.chunks_exact(3).map(|p| p[1]).collect(),
        _ => f.data[..w * h].to_vec(),
    };
    let step = 3 * w + 7;
    let mut bgr = vec![0u8; step * h];
    for y in 0..h {
        for x in 0..w {
            let v = gray[y * w + x];
            let o = y * step + 3 * x;
            bgr[o..o + 3].copy_from_slice(&[v.wrapping_add(x as u8), v, v ^ (y as u8)]);
        }
    }
    let bgr_layout = FrameLayout {
        width: w,
        height: h,
        step,
        encoding: Encoding::Bgr8,
        big_endian: false,
    };
    vec![(FrameLayout::mono8(w, h), gray), (bgr_layout, bgr)]
}

fn view<'a>(l: &FrameLayout, data: &'a [u8]) -> ImageView<'a> {
    ImageView::with_encoding(data, l.width, l.height, l.step, l.encoding, l.big_endian).unwrap()
}

fn same(what: &str, a: &Features, b: &Features) {
    assert_eq!(a.keypoints, b.keypoints, "{what}: keypoints");
    assert_eq!(a.descriptors, b.descriptors, "{what}: descriptors");
    assert_eq!(a.edges, b.edges, "{what}: edges");
    assert_eq!(a.level_sizes, b.level_sizes, "{what}: levels");
}

/// Both paths on `p`, every frame, twice (the second time the buffer is reused), with a
/// config change between writing the buffer and processing it. `p` runs `base`.
fn check(p: &mut Pipeline, name: &str, base: &Config) {
    for (layout, data) in frames() {
        let mut want = Features::default();
        p.process_into(&view(&layout, &data), &mut want).unwrap();
        assert!(
            !want.keypoints.is_empty(),
            "{name}: a real photo has corners"
        );
        for round in 0..2 {
            p.input_buffer(layout).unwrap().copy_from_slice(&data);
            let mut got = Features::default();
            p.process_input_into(&mut got).unwrap();
            same(
                &format!("{name} {:?} round {round}", layout.encoding),
                &want,
                &got,
            );
        }
        // The buffer outlives a config change; the new config applies.
        p.input_buffer(layout).unwrap().copy_from_slice(&data);
        let mut cfg = base.clone();
        cfg.select.max_keypoints = 100;
        p.set_config(cfg).unwrap();
        let mut got = Features::default();
        p.process_input_into(&mut got).unwrap();
        assert_eq!(got.keypoints.len(), 100, "{name}: the new budget");
        p.set_config(base.clone()).unwrap();
    }
}

#[test]
fn cpu_input_buffer_equals_process_into() {
    let mut p = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
    check(&mut p, "cpu", &Config::default());
}

#[test]
fn gpu_input_buffer_equals_process_into() {
    let mut p = match Pipeline::new(Config::default(), BackendChoice::Cuda) {
        Ok(p) => p,
        Err(e) => return shared::skip_without_gpu("gpu_input_buffer_equals_process_into", &e),
    };
    check(&mut p, "gpu", &Config::default());
    assert!(p.gpu_failure().is_none());
}

/// `cuda.zero_copy: on`: the kernels read the frame from mapped pinned memory; same output.
/// Switching the mapping between writing the buffer and processing keeps the frame.
#[test]
fn gpu_zero_copy_equals_process_into() {
    let mut zero_copy = Config::default();
    zero_copy.cuda.zero_copy = ZeroCopy::On;
    let mut p = match Pipeline::new(zero_copy.clone(), BackendChoice::Cuda) {
        Ok(p) => p,
        Err(e) => return shared::skip_without_gpu("gpu_zero_copy_equals_process_into", &e),
    };
    check(&mut p, "gpu zero-copy", &zero_copy);
    let mut upload = Config::default();
    upload.cuda.zero_copy = ZeroCopy::Off;
    for (layout, data) in frames() {
        let mut want = Features::default();
        p.process_into(&view(&layout, &data), &mut want).unwrap();
        for (from, to) in [(&zero_copy, &upload), (&upload, &zero_copy)] {
            p.set_config(from.clone()).unwrap();
            p.input_buffer(layout).unwrap().copy_from_slice(&data);
            p.set_config(to.clone()).unwrap();
            let mut got = Features::default();
            p.process_input_into(&mut got).unwrap();
            same(
                &format!(
                    "{:?} zero_copy {:?} -> {:?}",
                    layout.encoding, from.cuda.zero_copy, to.cuda.zero_copy
                ),
                &want,
                &got,
            );
        }
    }
    assert!(p.gpu_failure().is_none());
}

/// `cuda.host_gray`: `process_into` of a colour frame converts it to gray in the input
/// buffer's memory, so the buffer then holds no frame: `process_input_into` says so (instead
/// of reading gray bytes as bgr8) until a frame is written again, which then runs as before.
/// With `host_gray: false` the same frames give the same features.
#[test]
fn gpu_host_gray_leaves_no_frame_in_the_input_buffer() {
    let mut p = match Pipeline::new(Config::default(), BackendChoice::Cuda) {
        Ok(p) => p,
        Err(e) => return shared::skip_without_gpu("gpu_host_gray_leaves_no_frame", &e),
    };
    let (layout, data) = frames().pop().expect("the bgr8 frame");
    let mut raw = Config::default();
    raw.cuda.host_gray = false;
    let mut want = Features::default();
    p.set_config(raw).unwrap();
    p.process_into(&view(&layout, &data), &mut want).unwrap();
    p.set_config(Config::default()).unwrap();
    let mut got = Features::default();
    p.process_into(&view(&layout, &data), &mut got).unwrap();
    same("bgr8 converted on the host", &want, &got);
    let e = p.process_input_into(&mut got).unwrap_err().to_string();
    assert!(e.contains("no frame in the input buffer"), "{e}");
    p.input_buffer(layout).unwrap().copy_from_slice(&data);
    let mut again = Features::default();
    p.process_input_into(&mut again).unwrap();
    same("bgr8 written into the input buffer", &want, &again);
    assert!(p.gpu_failure().is_none());
}

#[test]
fn bad_layouts_and_a_missing_frame_are_clear_errors() {
    let mut p = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
    let mut out = Features::default();
    let e = p.process_input_into(&mut out).unwrap_err().to_string();
    assert!(e.contains("call input_buffer first"), "{e}");
    let bad = |w, h, step| FrameLayout {
        width: w,
        height: h,
        step,
        encoding: Encoding::Mono8,
        big_endian: false,
    };
    for l in [
        bad(0, 5, 5),
        bad(5, 0, 5),
        bad(8, 8, 7),
        bad(70_000, 2, 70_000),
    ] {
        assert!(matches!(p.input_buffer(l), Err(Error::Decode(_))), "{l:?}");
    }
    // A valid geometry whose step makes it larger than any frame: refused, not allocated.
    let e = p
        .input_buffer(bad(8, 16_000, 1 << 40))
        .unwrap_err()
        .to_string();
    assert!(e.contains("largest frame"), "{e}");
}

/// `process_into_edges` on every frame, twice: the map in the caller's buffer is the one
/// `process_into` gives, `out.edges` is None, the keypoints are the same. A buffer of another
/// length is an error that computes nothing; without edges wanted the buffer is left alone.
fn check_edges(p: &mut Pipeline, name: &str) {
    for (layout, data) in frames() {
        let frame = view(&layout, &data);
        let mut want = Features::default();
        p.process_into(&frame, &mut want).unwrap();
        let want_edges = want.edges.clone().expect("edges by default");
        assert!(want_edges.data.contains(&255), "{name}: a photo has edges");
        let mut buf = vec![7u8; layout.width * layout.height];
        let mut got = Features::default();
        for round in 0..2 {
            let what = format!("{name} {:?} round {round}", layout.encoding);
            assert!(
                p.process_into_edges(&frame, &mut got, &mut buf).unwrap(),
                "{what}"
            );
            assert!(got.edges.is_none(), "{what}: the map is in the buffer only");
            assert!(buf == want_edges.data, "{what}: the edge map");
            got.edges = want.edges.clone();
            same(&what, &want, &got);
        }
        let mut short = vec![0u8; buf.len() - 1];
        let e = p
            .process_into_edges(&frame, &mut got, &mut short)
            .unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{name}: {e}");
        assert!(e.to_string().contains("edge map buffer"), "{e}");
        assert!(
            got.keypoints.is_empty(),
            "{name}: nothing stale after an error"
        );

        p.want_edges(false);
        buf.fill(7);
        assert!(!p.process_into_edges(&frame, &mut got, &mut buf).unwrap());
        assert!(
            buf.iter().all(|&v| v == 7),
            "{name}: no map, the buffer untouched"
        );
        assert_eq!(
            got.keypoints, want.keypoints,
            "{name}: the keypoints without Canny"
        );
        p.want_edges(true);
    }
}

#[test]
fn cpu_edges_into_the_callers_buffer() {
    let mut p = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
    check_edges(&mut p, "cpu");
}

#[test]
fn gpu_edges_into_the_callers_buffer() {
    let mut p = match Pipeline::new(Config::default(), BackendChoice::Cuda) {
        Ok(p) => p,
        Err(e) => return shared::skip_without_gpu("gpu_edges_into_the_callers_buffer", &e),
    };
    check_edges(&mut p, "gpu");
    // The GPU's map is the CPU's, bit for bit.
    let mut cpu = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
    for (layout, data) in frames() {
        let frame = view(&layout, &data);
        let mut bufs = [
            vec![0u8; layout.width * layout.height],
            vec![1u8; layout.width * layout.height],
        ];
        let mut out = Features::default();
        assert!(p
            .process_into_edges(&frame, &mut out, &mut bufs[0])
            .unwrap());
        assert!(cpu
            .process_into_edges(&frame, &mut out, &mut bufs[1])
            .unwrap());
        assert!(
            bufs[0] == bufs[1],
            "{:?}: GPU and CPU edge maps",
            layout.encoding
        );
    }
    assert!(p.gpu_failure().is_none());
}
