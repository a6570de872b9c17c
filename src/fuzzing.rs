//! Fuzz harnesses: one function per input surface, taking arbitrary bytes. The cargo-fuzz
//! targets (`fuzz/fuzz_targets/*.rs`) are one-line calls of these, and `tests/fuzz_corpus.rs`
//! replays every committed corpus file (`fuzz/corpus/<target>/`) through the same functions on
//! stable Rust, so a crash the fuzzer found stays fixed.
//!
//! A harness returns whether the input was accepted (a valid frame, config, bag, ...) or
//! rejected with an error; either is fine. It panics only when the library misbehaves: a
//! panic inside the library, or an accepted input whose result breaks an invariant (a
//! keypoint outside the frame, a config that does not validate, two decoders that disagree).
//!
//! Work per input is bounded by the input's length (frames must hold their pixels), except
//! for compressed images, whose decoded size is bounded by the frame limits
//! ([`crate::image::MAX_SIDE`], [`crate::image::MAX_PIXELS`]); the pipeline runs on decoded
//! images only up to [`PIPELINE_MAX_PIXELS`].
//!
//! May import: `bag`, `cdr`, `config`, `cpu`, `features`, `image`, `pipeline`, `replay`, `select` (the
//! fuzz harnesses drive the rooms they test).

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::bag::Bag;
use crate::cdr;
use crate::config::{Config, DetectorMethod};
use crate::features::Features;
use crate::image::{decode_encoded, load_view_owned, ImageView};
use crate::pipeline::{BackendChoice, Pipeline};
use crate::replay;

/// A harness: arbitrary bytes in, whether the input was accepted out.
pub type Harness = fn(&[u8]) -> bool;

/// Every harness by name: the name is the cargo-fuzz target and the corpus directory.
pub const TARGETS: &[(&str, Harness)] = &[
    ("frame", frame),
    ("config", config),
    ("bag", bag),
    ("cdr", cdr),
    ("image_file", image_file),
];

/// Decoded images (files, compressed messages) larger than this are checked but not run
/// through the pipeline, to keep each input fast.
pub const PIPELINE_MAX_PIXELS: usize = 1 << 18;

/// Encoding strings a frame can name: every accepted one and its aliases, and a few that
/// must be refused.
const ENCODINGS: [&str; 16] = [
    "mono8",
    "8UC1",
    "mono16",
    "16UC1",
    "rgb8",
    "bgr8",
    "rgba8",
    "bgra8",
    "yuv422",
    "uyvy",
    "yuv422_yuy2",
    "yuyv",
    "bayer_rggb8",
    "rgb16",
    "",
    "MONO8",
];

/// Configs the frame harness runs: the presets and variants that reach the other code paths
/// (dense Harris, edges only, small border with descriptors, blur, grid spread).
fn configs() -> &'static [Config] {
    static CONFIGS: OnceLock<Vec<Config>> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        let presets = [
            include_str!("../config/default.yaml"),
            include_str!("../config/opencv_fast.yaml"),
            include_str!("../config/opencv_orb.yaml"),
            include_str!("../config/orb_slam3.yaml"),
        ];
        let mut v: Vec<Config> = presets
            .iter()
            .map(|t| Config::from_yaml(t).expect("bundled preset"))
            .collect();
        let d = Config::default();
        let sets: &[&[&str]] = &[
            &["detector.method=harris", "select.spread=grid"],
            &["detector.method=none", "canny.blur_ksize=5"],
            &[
                "orient.enabled=false",
                "detector.border=3",
                "detector.nonmax_suppression=false",
                "select.max_keypoints=0",
            ],
            &[
                "pyramid.levels=3",
                "pyramid.scale_factor=2",
                "canny.l2_gradient=false",
                "detector.score=fast",
            ],
        ];
        for s in sets {
            let mut c = d.clone();
            for kv in *s {
                c = c.with_set(kv).expect("harness config");
            }
            v.push(c);
        }
        v
    })
}

thread_local! {
    /// One CPU pipeline per config, reused across inputs (as a stream reuses its buffers).
    static PIPELINES: RefCell<Vec<Pipeline>> = const { RefCell::new(Vec::new()) };
}

/// Runs the CPU pipeline (config `which`, modulo the list) on a valid view and checks the
/// result's invariants.
fn run_pipeline(view: &ImageView, which: usize) {
    let cfgs = configs();
    let i = which % cfgs.len();
    PIPELINES.with(|p| {
        let mut p = p.borrow_mut();
        if p.is_empty() {
            for c in cfgs {
                p.push(Pipeline::new(c.clone(), BackendChoice::Cpu).expect("valid config"));
            }
        }
        let mut out = Features::default();
        p[i].process_into(view, &mut out)
            .expect("the CPU pipeline accepts every valid view");
        check_features(&out, &cfgs[i], view.width(), view.height());
    });
}

/// What every result must satisfy, whatever the input.
pub fn check_features(f: &Features, cfg: &Config, w: usize, h: usize) {
    assert_eq!(f.level_sizes.first(), Some(&(w, h)), "level 0 size");
    if let Some(e) = &f.edges {
        assert!(cfg.canny.enabled, "edges while canny is off");
        assert_eq!((e.width, e.height, e.data.len()), (w, h, w * h), "edge map");
    } else {
        assert!(!cfg.canny.enabled, "canny on but no edges");
    }
    if cfg.detector.method == DetectorMethod::None {
        assert!(f.keypoints.is_empty());
    }
    if cfg.describe.enabled {
        assert_eq!(
            f.descriptors.len(),
            f.keypoints.len(),
            "one descriptor each"
        );
    }
    if cfg.select.max_keypoints > 0 {
        assert!(f.keypoints.len() <= crate::select::max_kept(cfg, &f.level_sizes));
    }
    for k in &f.keypoints {
        assert!(
            k.x.is_finite()
                && k.y.is_finite()
                && k.x >= 0.0
                && k.y >= 0.0
                && k.x < w as f32
                && k.y < h as f32
                && k.response.is_finite(),
            "{k:?} outside {w}x{h} or not finite"
        );
    }
}

fn u16_at(b: &[u8], i: usize) -> usize {
    u16::from_le_bytes([b[i], b[i + 1]]) as usize
}

/// A raw frame (`sensor_msgs/Image` fields) from bytes: 8 header bytes, then the pixels.
///
/// * byte 0: encoding (index into a list of valid and invalid names);
/// * bytes 1-2, 3-4: width, height (u16 LE, any value: the view must refuse what does not
///   fit);
/// * byte 5: bit 7 = raw step, bit 6 = big endian, bits 0-5 = config index;
/// * bytes 6-7: the step (u16 LE) when raw, else row padding (mod 16) after the pixels.
///
/// Valid views run through the CPU pipeline and its result is checked.
pub fn frame(data: &[u8]) -> bool {
    if data.len() < 8 {
        return false;
    }
    let (head, pixels) = data.split_at(8);
    let enc = ENCODINGS[head[0] as usize % ENCODINGS.len()];
    let (w, h) = (u16_at(head, 1), u16_at(head, 3));
    let bpp = crate::Encoding::parse(enc).map_or(1, |e| e.bytes_per_pixel());
    let step = if head[5] & 0x80 != 0 {
        u16_at(head, 6)
    } else {
        w * bpp + u16_at(head, 6) % 16
    };
    let big_endian = head[5] & 0x40 != 0;
    let view = match ImageView::new(pixels, w, h, step, enc, big_endian) {
        Ok(v) => v,
        Err(_) => return false,
    };
    assert!(view.height() * view.step() <= pixels.len());
    run_pipeline(&view, (head[5] & 0x3f) as usize);
    true
}

/// A config: YAML text, then optionally a NUL byte and `KEY=VALUE` lines applied as the
/// CLI's `--set` does. An accepted config must validate, survive a YAML round trip and be
/// rebuilt exactly from its flattened dotted keys.
pub fn config(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let (yaml, sets) = text.split_once('\0').unwrap_or((&text, ""));
    let mut cfg = match Config::from_yaml(yaml) {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return false;
        }
    };
    for line in sets.lines() {
        match cfg.with_set(line) {
            Ok(c) => cfg = c,
            Err(_) => return false,
        }
    }
    cfg.validate().expect("an accepted config validates");
    let back = Config::from_yaml(&cfg.to_yaml()).expect("to_yaml output is accepted");
    assert_eq!(back, cfg, "YAML round trip");
    let rebuilt = Config::default()
        .with_values(&cfg.flatten())
        .expect("flattened keys are accepted");
    assert_eq!(rebuilt, cfg, "dotted keys round trip");
    true
}

/// A temporary file holding the input, removed (with any SQLite side files) on drop.
struct ScratchFile(PathBuf);

impl ScratchFile {
    fn new(tag: &str, data: &[u8]) -> ScratchFile {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "gpu_features_fuzz_{}_{}_{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&p, data).expect("write a scratch file");
        ScratchFile(p)
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(Path::new(&p));
        }
    }
}

/// Decodes one image message as the replay does; valid frames are checked as views (and
/// small ones run through the pipeline).
fn image_message(msgtype: &str, data: &[u8], which: usize) -> bool {
    let frame = match replay::decode_frame(msgtype, data) {
        Ok(Ok(f)) => f,
        _ => return false,
    };
    let Ok(view) = frame.view() else {
        return false;
    };
    if view.width() * view.height() <= PIPELINE_MAX_PIXELS {
        run_pipeline(&view, which);
    }
    true
}

/// A bag file (MCAP or sqlite3, told apart by its magic bytes as `Bag::open` does): open it,
/// list its topics, read every message and decode the image ones. Accepted = the whole bag
/// read without error.
pub fn bag(data: &[u8]) -> bool {
    let file = ScratchFile::new("bag", data);
    let Ok(bag) = Bag::open(&file.0) else {
        return false;
    };
    let Ok(topics) = bag.topics() else {
        return false;
    };
    let names: HashSet<String> = topics.iter().map(|t| t.name.clone()).collect();
    let mut n = 0usize;
    let r = bag.read(&names, &mut |m| {
        n += 1;
        assert!(names.contains(m.topic), "message of an unlisted topic");
        if m.msgtype == cdr::IMAGE || m.msgtype == cdr::COMPRESSED_IMAGE {
            image_message(m.msgtype, m.data, n);
        }
        Ok(crate::bag::reader::Flow::Continue(()))
    });
    r.is_ok()
}

/// One CDR message: byte 0 picks `sensor_msgs/Image` (even) or `CompressedImage` (odd), the
/// rest is the serialized message. A decoded Image must encode back to a message that decodes
/// to the same value.
pub fn cdr(data: &[u8]) -> bool {
    let Some((&sel, msg)) = data.split_first() else {
        return false;
    };
    if sel % 2 == 0 {
        if let Ok(img) = cdr::Image::decode(msg) {
            let again = img.encode();
            assert_eq!(
                cdr::Image::decode(&again).ok(),
                Some(img),
                "Image round trip"
            );
        }
        image_message(cdr::IMAGE, msg, sel as usize / 2)
    } else {
        if let Ok(img) = cdr::CompressedImage::decode(msg) {
            let again = img.encode();
            assert_eq!(
                cdr::CompressedImage::decode(&again).ok(),
                Some(img),
                "CompressedImage round trip"
            );
        }
        image_message(cdr::COMPRESSED_IMAGE, msg, sel as usize / 2)
    }
}

/// An image file's bytes (PNG, JPEG, PGM, or anything): decoded from memory and through the
/// file loader `detect` uses; both must agree, and a decoded image must be a valid frame.
pub fn image_file(data: &[u8]) -> bool {
    let mem = decode_encoded(data);
    let file = ScratchFile::new("img", data);
    let loaded = load_view_owned(&file.0);
    match (&mem, &loaded) {
        (Ok(a), Ok(b)) => assert!(
            (a.width, a.height, a.encoding, &a.data) == (b.width, b.height, b.encoding, &b.data),
            "memory and file decoders disagree"
        ),
        (Err(_), Err(_)) => return false,
        (a, b) => panic!(
            "memory decode {:?} but file load {:?}",
            a.as_ref().err(),
            b.as_ref().err().map(|e| e.to_string())
        ),
    }
    let img = mem.expect("checked above");
    let view = img.view().expect("a decoded image is a valid frame");
    let mut gray = crate::GrayImage::default();
    crate::cpu::decode::decode(&view, &mut gray);
    assert_eq!(gray.data.len(), img.width * img.height);
    if img.width * img.height <= PIPELINE_MAX_PIXELS {
        run_pipeline(&view, data.len());
    }
    true
}
