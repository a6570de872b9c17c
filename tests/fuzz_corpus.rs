//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/`) through the harness the
//! cargo-fuzz target calls (`gpu_features::fuzzing`), on stable, in seconds: no input may
//! panic, take long or allocate wildly, and each corpus must still reach the accepting path
//! (a corpus the library now rejects whole has stopped testing anything).
//!
//! `cargo test --test fuzz_corpus -- --ignored write_seed_corpus` writes the seed inputs
//! (small real frames, configs, bags, messages and image files) that `scripts/fuzz.sh` starts
//! from when a corpus directory is empty.

mod bag_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bag_common::*;
use gpu_features::fuzzing::TARGETS;

struct PeakAlloc;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only records sizes in a const thread-local.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = PEAK.try_with(|p| p.set(p.get().max(l.size())));
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let _ = PEAK.try_with(|p| p.set(p.get().max(l.size())));
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let _ = PEAK.try_with(|c| c.set(c.get().max(new)));
        System.realloc(p, l, new)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

/// Per input: at most this long (test profile, a loaded CI machine) ...
const MAX_TIME: Duration = Duration::from_secs(5);
/// ... and no single allocation above this (the fuzzers run with -rss_limit_mb=2048).
const MAX_ALLOC: usize = 512 << 20;
/// The committed corpora stay small.
const MAX_CORPUS_BYTES: u64 = 3 << 20;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn corpus_files(target: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(corpus_dir(target))
        .unwrap_or_else(|e| panic!("fuzz/corpus/{target}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn every_corpus_input_is_handled() {
    let mut total_bytes = 0;
    let mut failures = Vec::new();
    for &(target, harness) in TARGETS {
        let files = corpus_files(target);
        assert!(!files.is_empty(), "fuzz/corpus/{target} is empty");
        let mut accepted = 0;
        let mut slowest = (Duration::ZERO, PathBuf::new());
        for path in &files {
            let data = std::fs::read(path).unwrap();
            total_bytes += data.len() as u64;
            PEAK.with(|p| p.set(0));
            let t = Instant::now();
            let r = std::panic::catch_unwind(|| harness(&data));
            let dt = t.elapsed();
            let peak = PEAK.with(|p| p.get());
            let name = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
            match r {
                Ok(ok) => accepted += ok as usize,
                Err(_) => failures.push(format!("{}: panicked", name.display())),
            }
            if dt > MAX_TIME {
                failures.push(format!("{}: took {dt:?}", name.display()));
            }
            if peak > MAX_ALLOC {
                failures.push(format!(
                    "{}: allocated {} MiB at once",
                    name.display(),
                    peak >> 20
                ));
            }
            if dt > slowest.0 {
                slowest = (dt, name.to_path_buf());
            }
        }
        eprintln!(
            "{target}: {} inputs, {accepted} accepted, slowest {:?} ({})",
            files.len(),
            slowest.0,
            slowest.1.display()
        );
        if accepted == 0 {
            failures.push(format!("{target}: no corpus input is accepted any more"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        total_bytes <= MAX_CORPUS_BYTES,
        "the corpora hold {total_bytes} bytes; minimise them (scripts/fuzz.sh --cmin)"
    );
}

#[test]
fn harnesses_reject_garbage_and_accept_real_inputs() {
    // The harnesses themselves: a real input is accepted, noise is rejected, neither panics.
    let frames = pan("graf1.png", 1, 24, 16);
    let f = &frames[0];
    let mut frame = vec![5u8, 24, 0, 16, 0, 0, 0, 0]; // bgr8 24x16, tight rows
    frame.extend(f.bgr());
    assert!(gpu_features::fuzzing::frame(&frame));
    frame[3] = 17; // one row more than the data holds
    assert!(!gpu_features::fuzzing::frame(&frame));
    assert!(gpu_features::fuzzing::image_file(&f.png()));
    assert!(!gpu_features::fuzzing::image_file(
        b"\x89PNG\r\n\x1a\n garbage"
    ));
    assert!(gpu_features::fuzzing::config(
        b"canny:\n  low_threshold: 10\n\0pyramid.levels = 3\n"
    ));
    assert!(!gpu_features::fuzzing::config(b"canny: 3"));
    assert!(!gpu_features::fuzzing::config(b"{}\0pyramid.levels=0"));
    let mut msg = vec![0u8];
    msg.extend(image_msg(0, f));
    assert!(gpu_features::fuzzing::cdr(&msg));
    msg[0] = 1; // the same bytes read as a CompressedImage: not an image file
    assert!(!gpu_features::fuzzing::cdr(&msg));
    let dir = scratch("fuzz_harness_bag");
    write_mcap(&dir.join("a.mcap"), &frames, true);
    let bag = std::fs::read(dir.join("a.mcap")).unwrap();
    assert!(gpu_features::fuzzing::bag(&bag));
    assert!(!gpu_features::fuzzing::bag(&bag[..bag.len() / 2]));
}

fn put(target: &str, name: &str, data: &[u8]) {
    let d = corpus_dir(target);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(format!("seed-{name}")), data).unwrap();
}

fn encode_image(
    f: &Frame,
    color: ::image::ExtendedColorType,
    fmt: ::image::ImageFormat,
) -> Vec<u8> {
    let gray: Vec<u8> = f.rgb.chunks_exact(3).map(|p| p[1]).collect();
    let data: Vec<u8> = match color {
        ::image::ExtendedColorType::L8 => gray,
        ::image::ExtendedColorType::L16 => gray.iter().flat_map(|&g| [g, g]).collect(),
        ::image::ExtendedColorType::Rgba8 => f
            .rgb
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 200])
            .collect(),
        _ => f.rgb.clone(),
    };
    let mut out = std::io::Cursor::new(Vec::new());
    ::image::write_buffer_with_format(&mut out, &data, f.width as u32, f.height as u32, color, fmt)
        .unwrap();
    out.into_inner()
}

/// Writes the seed corpora (run by scripts/fuzz.sh when a corpus directory is empty).
#[test]
#[ignore]
fn write_seed_corpus() {
    use ::image::{ExtendedColorType as C, ImageFormat as F};
    let frames = pan("graf1.png", 2, 32, 24);
    let f = &frames[0];
    // frame: every encoding name (valid and not), tight and padded rows, a raw step.
    let gray: Vec<u8> = f.rgb.chunks_exact(3).map(|p| p[1]).collect();
    for enc in 0u8..16 {
        let bpp = [1, 1, 2, 2, 3, 3, 4, 4, 2, 2, 2, 2, 1, 1, 1, 1][enc as usize];
        let pad = if enc % 3 == 0 { 5 } else { 0 };
        let (w, h) = (32usize, 24usize);
        let mut v = vec![
            enc,
            w as u8,
            0,
            h as u8,
            0,
            (enc % 8) | (0x40 * (enc % 2)),
            pad,
            0,
        ];
        for y in 0..h {
            for x in 0..w {
                let g = gray[y * w + x];
                v.extend(std::iter::repeat(g).take(bpp));
            }
            v.extend(std::iter::repeat(0).take(pad as usize));
        }
        put("frame", &format!("enc{enc}"), &v);
    }
    for (name, w, h) in [("1x1", 1u8, 1u8), ("1x40", 1, 40), ("40x1", 40, 1)] {
        let mut v = vec![0, w, 0, h, 0, 0x80, w, 0];
        v.extend((0..w as usize * h as usize).map(|i| (i * 37) as u8));
        put("frame", name, &v);
    }
    // config: the presets, and updates after the NUL.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for p in [
        "default",
        "opencv_fast",
        "opencv_orb",
        "orb_slam3",
        "opencv_canny",
    ] {
        put(
            "config",
            p,
            &std::fs::read(root.join(format!("config/{p}.yaml"))).unwrap(),
        );
    }
    put(
        "config",
        "sets",
        b"pyramid:\n  levels: 4\n\0select.spread=quadtree\ndetector.low_threshold_retry=true\ncanny.blur_ksize = 5\n",
    );
    // bag: MCAP with raw + PNG-compressed images, and a sqlite3 .db3.
    let dir = scratch("fuzz_seed_bags");
    write_mcap(&dir.join("a.mcap"), &frames, true);
    put("bag", "mcap", &std::fs::read(dir.join("a.mcap")).unwrap());
    write_mcap(&dir.join("raw.mcap"), &frames[..1], false);
    put(
        "bag",
        "mcap_raw",
        &std::fs::read(dir.join("raw.mcap")).unwrap(),
    );
    write_db3_dir(&dir.join("db"), &frames[..1], true);
    put(
        "bag",
        "db3",
        &std::fs::read(dir.join("db/bag_0.db3")).unwrap(),
    );
    // cdr: an Image and CompressedImage (PNG, JPEG) message.
    let mut m = vec![0u8];
    m.extend(image_msg(0, f));
    put("cdr", "image", &m);
    let mut m = vec![1u8];
    m.extend(compressed_msg(0, f));
    put("cdr", "compressed_png", &m);
    let jpeg = gpu_features::cdr::CompressedImage {
        header: header(1),
        format: "jpeg".into(),
        data: encode_image(f, C::Rgb8, F::Jpeg).into(),
    };
    let mut m = vec![3u8];
    m.extend(jpeg.encode());
    put("cdr", "compressed_jpeg", &m);
    // image_file: PNG in every colour type the loader maps, JPEG, PGM, PPM.
    for (name, c, fmt) in [
        ("gray.png", C::L8, F::Png),
        ("gray16.png", C::L16, F::Png),
        ("rgb.png", C::Rgb8, F::Png),
        ("rgba.png", C::Rgba8, F::Png),
        ("rgb.jpg", C::Rgb8, F::Jpeg),
        ("gray.jpg", C::L8, F::Jpeg),
        ("gray.pgm", C::L8, F::Pnm),
        ("rgb.ppm", C::Rgb8, F::Pnm),
    ] {
        put("image_file", name, &encode_image(f, c, fmt));
    }
}
