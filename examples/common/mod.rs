//! Helpers shared by the examples, each of which includes this file with
//! `#[path = "common/mod.rs"] mod common;` (not every example uses every helper).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use gpu_features::cpu::decode::load_gray;
use gpu_features::GrayImage;

/// The repository root: the examples read tests/data and bench-data from it.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The command line; with `dump FILE`, runs `dump(FILE, root())` instead and returns `None`.
pub fn args_unless_dump(dump: fn(&str, &Path)) -> Option<Vec<String>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("dump") {
        dump(&args[2], root());
        return None;
    }
    Some(args)
}

/// `args[1]` as the number of timed runs, else `default`.
pub fn runs_arg(args: &[String], default: usize) -> usize {
    args.get(1).and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The value after `name` on the command line (`--rate 60`), else `default`.
pub fn named_arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

/// The PNG fixtures in `root`/tests/data, sorted by path.
pub fn fixture_paths(root: &Path) -> Vec<PathBuf> {
    let mut names: Vec<_> = std::fs::read_dir(root.join("tests/data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "png"))
        .collect();
    names.sort();
    names
}

/// The fixtures as gray images, ordered by size (then first pixel: no two tie).
pub fn fixtures_by_size(root: &Path) -> Vec<GrayImage> {
    let mut imgs: Vec<GrayImage> = fixture_paths(root)
        .iter()
        .map(|p| load_gray(p).unwrap())
        .collect();
    imgs.sort_by_key(|i| (i.width, i.height, i.data.len(), i.data[0]));
    imgs
}

/// Mirror tiling (or cropping) of `src` to `w x h`: the seams look like image content, not
/// steps.
pub fn tile(src: &GrayImage, w: usize, h: usize) -> GrayImage {
    let mut img = GrayImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            let (tx, ty) = (x / src.width, y / src.height);
            let mut sx = x % src.width;
            let mut sy = y % src.height;
            if tx % 2 == 1 {
                sx = src.width - 1 - sx;
            }
            if ty % 2 == 1 {
                sy = src.height - 1 - sy;
            }
            img.data[y * w + x] = src.get(sx, sy);
        }
    }
    img
}

/// The `w x h` window of `src` whose top-left pixel is `(x0, y0)` (inside `src`).
pub fn crop(src: &GrayImage, x0: usize, y0: usize, w: usize, h: usize) -> GrayImage {
    let mut img = GrayImage::new(w, h);
    for (y, row) in img.data.chunks_exact_mut(w.max(1)).enumerate() {
        row.copy_from_slice(&src.row(y0 + y)[x0..x0 + w]);
    }
    img
}

/// Median wall time of `runs` calls of `f` (after one warm-up call), in ms.
pub fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

/// One xorshift64 step (13, 7, 17) of `s`; returns the new state.
pub fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}
