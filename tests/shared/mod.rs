//! Helpers shared by several integration tests (each test file includes what it uses with
//! `mod shared;`; unused items are expected in some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use gpu_features::cpu::decode::load_gray;
use gpu_features::GrayImage;

/// The real-image fixtures of tests/data with goldens in tests/golden (scripts/gen_golden.py).
pub const FIXTURES: [&str; 10] = [
    "astronaut",
    "basketball1",
    "box",
    "brick",
    "building",
    "camera",
    "coffee_odd",
    "graf1",
    "graf3",
    "left01",
];

/// `tests/golden/<stem>/<file>`.
pub fn golden(stem: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(stem)
        .join(file)
}

/// The `.png` files of `dir`, sorted by name.
pub fn png_files(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    names.sort();
    names
}

/// The real sequence of tests/data/seq (at least 8 frames), in name order.
pub fn sequence() -> Vec<GrayImage> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/seq");
    let names = png_files(&dir);
    assert!(names.len() >= 8, "{dir:?}");
    names.iter().map(|p| load_gray(p).unwrap()).collect()
}

/// The fixture's gray image as OpenCV converted it.
pub fn gray(stem: &str) -> GrayImage {
    load_gray(&golden(stem, "gray.png")).unwrap()
}

/// A GPU test's verdict on a backend that could not start: `SKIPPED` (printed straight to
/// stderr, visible without --nocapture) when this machine has no CUDA device, a failure when
/// a device is present but unusable (kernels that do not compile or load).
pub fn skip_without_gpu(test: &str, err: &dyn std::fmt::Display) {
    #[cfg(feature = "cuda")]
    {
        let n = gpu_features::cuda::device_count();
        assert!(
            n == 0,
            "{test}: {n} CUDA device(s) present but unusable: {err}"
        );
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: no CUDA device: {err} ({test})");
}

/// Appends one PNG chunk (length, type, body, CRC) to `out`: for hand-made PNG files.
pub fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], body: &[u8]) {
    out.extend((body.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend(kind);
    out.extend(body);
    let crc = crc32fast::hash(&out[start..]);
    out.extend(crc.to_be_bytes());
}

/// A stereo pair cut from one frame as scripts/gen_track_golden.py cuts it: left = columns
/// [0, w - 8), right = columns [8, w) (a disparity of 8 px, real pixels).
pub fn stereo_pair(img: &GrayImage) -> (GrayImage, GrayImage) {
    const D: usize = 8;
    let w = img.width - D;
    let (mut l, mut r) = (GrayImage::new(w, img.height), GrayImage::new(w, img.height));
    for y in 0..img.height {
        l.row_mut(y).copy_from_slice(&img.row(y)[..w]);
        r.row_mut(y).copy_from_slice(&img.row(y)[D..]);
    }
    (l, r)
}

/// A keypoint as comparable bits: x, y, response, size, angle, octave.
pub fn kp_bits(k: &gpu_features::Keypoint) -> [u32; 6] {
    [
        k.x.to_bits(),
        k.y.to_bits(),
        k.response.to_bits(),
        k.size.to_bits(),
        k.angle.to_bits(),
        k.octave as u32,
    ]
}
