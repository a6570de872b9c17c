//! Input decode: OpenCV-exact gray conversion on real images in every encoding, row padding,
//! and a typed error (never a panic) for every class of bad buffer.

use std::path::Path;

use gpu_features::cpu::decode::decode;
use gpu_features::image::{load_view_owned, Encoding};
use gpu_features::{BackendChoice, Config, DecodeError, GrayImage, ImageView, Pipeline};

const COLOUR_FIXTURES: [&str; 5] = ["astronaut", "graf1", "building", "coffee_odd", "left01"];

fn golden_gray(stem: &str) -> GrayImage {
    let path = format!(
        "{}/tests/golden/{stem}/gray.png",
        env!("CARGO_MANIFEST_DIR")
    );
    let f = load_view_owned(Path::new(&path)).unwrap();
    assert_eq!(f.encoding, Encoding::Mono8, "{path} must be a gray PNG");
    GrayImage::from_vec(f.width, f.height, f.data).unwrap()
}

fn rgb_fixture(stem: &str) -> (usize, usize, Vec<u8>) {
    let path = format!("{}/tests/data/{stem}.png", env!("CARGO_MANIFEST_DIR"));
    let f = load_view_owned(Path::new(&path)).unwrap();
    if f.encoding == Encoding::Mono8 {
        // Gray JPEG-origin fixtures: expand so the colour paths still get exercised.
        let data = f.data.iter().flat_map(|&g| [g, g, g]).collect();
        return (f.width, f.height, data);
    }
    assert_eq!(f.encoding, Encoding::Rgb8);
    (f.width, f.height, f.data)
}

/// Re-packs packed RGB pixels into `encoding` with `pad` bytes of junk after each row.
fn repack(rgb: &[u8], w: usize, h: usize, encoding: Encoding, pad: usize) -> (Vec<u8>, usize) {
    let step = w * encoding.bytes_per_pixel() + pad;
    let mut out = vec![0xA5u8; step * h];
    for y in 0..h {
        for x in 0..w {
            let p = &rgb[(y * w + x) * 3..(y * w + x) * 3 + 3];
            let o = y * step + x * encoding.bytes_per_pixel();
            match encoding {
                Encoding::Rgb8 => out[o..o + 3].copy_from_slice(p),
                Encoding::Bgr8 => out[o..o + 3].copy_from_slice(&[p[2], p[1], p[0]]),
                Encoding::Rgba8 => out[o..o + 4].copy_from_slice(&[p[0], p[1], p[2], 77]),
                Encoding::Bgra8 => out[o..o + 4].copy_from_slice(&[p[2], p[1], p[0], 200]),
                _ => unreachable!(),
            }
        }
    }
    (out, step)
}

#[test]
fn colour_to_gray_equals_opencv_cvtcolor_in_every_layout() {
    for stem in COLOUR_FIXTURES {
        let (w, h, rgb) = rgb_fixture(stem);
        let want = golden_gray(stem);
        for enc in [
            Encoding::Rgb8,
            Encoding::Bgr8,
            Encoding::Rgba8,
            Encoding::Bgra8,
        ] {
            for pad in [0, 5] {
                let (buf, step) = repack(&rgb, w, h, enc, pad);
                let view = ImageView::new(&buf, w, h, step, enc.name(), false).unwrap();
                let mut got = GrayImage::default();
                decode(&view, &mut got);
                let diff = got
                    .data
                    .iter()
                    .zip(&want.data)
                    .filter(|(a, b)| a != b)
                    .count();
                assert_eq!(
                    diff,
                    0,
                    "{stem} {} pad {pad}: {diff} pixels differ",
                    enc.name()
                );
            }
        }
    }
}

#[test]
fn yuv422_takes_the_luma_bytes() {
    let gray = golden_gray("camera");
    let (w, h) = (gray.width, gray.height);
    for (name, y_off) in [("yuv422", 1), ("uyvy", 1), ("yuv422_yuy2", 0), ("yuyv", 0)] {
        let step = w * 2 + 4;
        let mut buf = vec![0u8; step * h];
        for y in 0..h {
            for x in 0..w {
                buf[y * step + 2 * x + y_off] = gray.get(x, y);
                buf[y * step + 2 * x + 1 - y_off] = (x * 7 + y) as u8; // chroma: ignored
            }
        }
        let view = ImageView::new(&buf, w, h, step, name, false).unwrap();
        let mut got = GrayImage::default();
        decode(&view, &mut got);
        assert_eq!(got, gray, "{name}");
    }
}

#[test]
fn mono16_scales_like_convert_to_in_both_byte_orders() {
    let gray = golden_gray("box");
    let (w, h) = (gray.width, gray.height);
    // v * 257 scales back to exactly v; + offsets probe the rounding.
    for (offset, big) in [(0u16, false), (127, true), (128, false), (129, true)] {
        let mut le = Vec::new();
        let mut expect = GrayImage::new(w, h);
        for (i, &g) in gray.data.iter().enumerate() {
            let v = (g as u16 * 256).saturating_add(offset);
            le.extend_from_slice(&if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
            // OpenCV convertTo(CV_8U, 1/256): cvRound = round half to even.
            let exact = v as f64 / 256.0;
            let r = exact.round_ties_even().min(255.0);
            expect.data[i] = r as u8;
        }
        for name in ["mono16", "16UC1"] {
            let view = ImageView::new(&le, w, h, w * 2, name, big).unwrap();
            let mut got = GrayImage::default();
            decode(&view, &mut got);
            assert_eq!(got, expect, "{name} offset {offset} big_endian {big}");
        }
    }
}

#[test]
fn every_bad_buffer_is_a_typed_error() {
    let data = vec![0u8; 100];
    let e = |r: Result<ImageView, DecodeError>| r.unwrap_err();
    assert_eq!(
        e(ImageView::new(&data, 10, 10, 10, "rgb9", false)),
        DecodeError::UnknownEncoding("rgb9".into())
    );
    assert!(matches!(
        e(ImageView::new(&data, 10, 10, 10, "", false)),
        DecodeError::UnknownEncoding(_)
    ));
    assert_eq!(
        e(ImageView::new(&data, 0, 10, 10, "mono8", false)),
        DecodeError::ZeroSize {
            width: 0,
            height: 10
        }
    );
    assert!(matches!(
        e(ImageView::new(&data, 10, 0, 10, "mono8", false)),
        DecodeError::ZeroSize { .. }
    ));
    assert!(matches!(
        e(ImageView::new(&data, 100_000, 1, 100_000, "mono8", false)),
        DecodeError::TooLarge { .. }
    ));
    assert!(matches!(
        e(ImageView::new(&data, 16000, 16800, 16000, "mono8", false)),
        DecodeError::TooLarge { .. }
    ));
    assert_eq!(
        e(ImageView::new(&data, 10, 10, 9, "mono8", false)),
        DecodeError::StepTooSmall { step: 9, min: 10 }
    );
    assert_eq!(
        e(ImageView::new(&data, 10, 10, 20, "mono16", false)),
        DecodeError::BufferTooShort {
            len: 100,
            need: 200
        }
    );
    assert_eq!(
        e(ImageView::new(&data, 10, 4, 30, "bgr8", false)),
        DecodeError::BufferTooShort {
            len: 100,
            need: 120
        }
    );
    assert!(matches!(
        e(ImageView::new(&data, 5, 2, 10, "yuv422", false)),
        DecodeError::OddWidth { width: 5, .. }
    ));
    assert!(matches!(
        e(ImageView::new(&data, 5, 2, 10, "yuyv", false)),
        DecodeError::OddWidth { .. }
    ));
    // step * height overflowing usize must not wrap into a "valid" size.
    assert!(ImageView::new(&data, 8, 16000, usize::MAX / 2, "mono8", false).is_err());
}

#[test]
fn tiny_and_padded_frames_run_through_the_cpu_pipeline() {
    let mut p = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
    for (w, h) in [(1, 1), (2, 1), (1, 7), (3, 3), (40, 2), (64, 64)] {
        let step = w + 3;
        let data: Vec<u8> = (0..step * h).map(|i| (i * 37 % 251) as u8).collect();
        let view = ImageView::new(&data, w, h, step, "mono8", false).unwrap();
        let f = p.process(&view).unwrap();
        assert_eq!(f.edges.as_ref().map(|e| (e.width, e.height)), Some((w, h)));
        for k in &f.keypoints {
            assert!(k.x >= 0.0 && k.y >= 0.0 && k.x < w as f32 && k.y < h as f32);
        }
    }
}
