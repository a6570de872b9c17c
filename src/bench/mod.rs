//! `gpu_features bench`: times every stage and the whole pipeline at several frame sizes on
//! real photos, beside the CPU reference and (when Python OpenCV is importable) OpenCV's
//! cv::FAST, cv::Canny and ORB on the same frames, and prints a markdown table with ratios.
//!
//! Method (docs/benchmarks.md):
//! - Inputs: gray (mono8) crops, never scaled, of the photos in `bench-data/`
//!   (scripts/fetch-bench-data.sh); `--distinct` different frames per size (at least 4) are
//!   rotated frame by frame so that caches do not flatter. Without bench-data the photos of
//!   tests/data are tiled to size, and the output says so.
//! - Ours: `Pipeline::process_into` on each backend, `--warmup` frames first, then the
//!   median and p90 of `--frames` frames of each stage timing (CUDA events on the GPU, wall
//!   time on the CPU), of the GPU's event total and of the wall time of the whole call
//!   (upload, kernels, download and host work).
//! - Same output as OpenCV: the configs config/opencv_{fast,canny,orb}.yaml (embedded), whose
//!   results equal cv::FAST, cv::Canny and ORB's detectAndCompute bit for bit (opencv_orb
//!   with `describe.enabled: false`: ORB's detect), are timed the same way.
//! - OpenCV: scripts/bench_opencv.py (embedded, run as a subprocess on the frames written
//!   as PNG) with 1 thread and with all threads.
//!
//! May import: `config`, `cpu`, `cuda`, `error`, `features`, `image`, `matching`, `pipeline`,
//! `report`, `track` (the stages it times and the peers it runs on the same frames).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::config::Config;
use crate::cpu::decode::load_gray;
use crate::error::{Error, Result};
use crate::features::Descriptor;
use crate::features::Features;
use crate::image::{save_gray_png, Encoding, GrayImage, ImageView};
use crate::matching::{MatchParams, Matcher};
use crate::pipeline::{BackendChoice, BackendKind, Pipeline};

const DEFAULT_YAML: &str = include_str!("../../config/default.yaml");
const OPENCV_SCRIPT: &str = include_str!("../../scripts/bench_opencv.py");
const PEERS_SCRIPT: &str = include_str!("../../scripts/bench_peers.py");
/// Configs whose output equals an OpenCV call's: (key, file, what it equals). The `orb` key
/// runs the file with `describe.enabled: false` (ORB's detect alone).
const MATCHED: [(&str, &str, &str); 4] = [
    (
        "fast",
        include_str!("../../config/opencv_fast.yaml"),
        "config/opencv_fast.yaml",
    ),
    (
        "canny",
        include_str!("../../config/opencv_canny.yaml"),
        "config/opencv_canny.yaml",
    ),
    (
        "orb",
        include_str!("../../config/opencv_orb.yaml"),
        "config/opencv_orb.yaml, describe off",
    ),
    (
        "orb_desc",
        include_str!("../../config/opencv_orb.yaml"),
        "config/opencv_orb.yaml",
    ),
];

/// One photo that frames are cut from.
struct Photo {
    name: String,
    img: GrayImage,
}

/// The frames of one size and where they come from.
struct FrameSet {
    frames: Vec<GrayImage>,
    sources: Vec<String>,
    tiled: bool,
}

mod args;
mod frames;
#[cfg(feature = "cuda")]
mod input_path;
mod matching;
mod measure;
mod opencv;
mod peers;
mod plots;
mod report;
mod run;
mod streams;
mod system;
mod tracks;
mod tracks_stereo;

pub use self::args::{BenchArgs, Size, Stat};
use self::frames::*;
use self::matching::*;
pub use self::measure::Pacer;
use self::measure::*;
use self::opencv::*;
use self::peers::*;
use self::plots::*;
use self::report::*;
pub use self::run::run;
use self::system::*;

fn load_config(args: &BenchArgs) -> Result<(Config, String)> {
    let (mut cfg, name) = match &args.config {
        Some(p) => (Config::from_file(p)?, p.display().to_string()),
        None => {
            let p = Path::new("config/default.yaml");
            if p.is_file() {
                (Config::from_file(p)?, "config/default.yaml".to_string())
            } else {
                (
                    Config::from_yaml(DEFAULT_YAML)?,
                    "config/default.yaml (embedded)".to_string(),
                )
            }
        }
    };
    for s in &args.set {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| Error::Config(format!("--set {s:?}: expected KEY=VALUE")))?;
        cfg = cfg.with_value(k.trim(), v.trim())?;
    }
    let name = if args.set.is_empty() {
        name
    } else {
        format!("{name} with {}", args.set.join(", "))
    };
    Ok((cfg, name))
}

/// The photos frames are cut from (--images, else bench-data/, else tests/data) and whether
/// they are real photos rather than the tests/data fallback; notes what the report must say.
fn load_inputs(args: &BenchArgs, notes: &mut Vec<String>) -> Result<(Vec<Photo>, bool)> {
    let (files, from_bench_data) = if !args.images.is_empty() {
        (image_files(&args.images)?, true)
    } else if let Some(d) = find_dir("bench-data") {
        (image_files(&[d])?, true)
    } else {
        let d = find_dir("tests/data").ok_or_else(|| {
            Error::Config("no bench-data/ and no tests/data/: pass --images".into())
        })?;
        notes.push(
            "bench-data/ is absent (scripts/fetch-bench-data.sh fetches it): the frames are \
             mosaics of the small tests/data photos"
                .into(),
        );
        (image_files(&[d])?, false)
    };
    if files.is_empty() {
        return Err(Error::Config("no image files found for the bench".into()));
    }
    eprintln!("bench: loading {} photos", files.len());
    let photos = load_photos(&files)?;
    let distinct = args.distinct.max(1);
    if distinct < 4 {
        notes.push(format!(
            "only {distinct} distinct frames per size: the L2 cache may flatter"
        ));
    }
    Ok((photos, from_bench_data))
}

/// How the markdown links the `--plots` directory: relative to the markdown file's folder
/// when the directory lies under it, else the path as given.
fn plot_link_dir(dir: &Path, markdown: Option<&Path>) -> String {
    let base = markdown
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty());
    let rel = match base {
        Some(b) => dir.strip_prefix(b).ok(),
        None if dir.is_relative() => Some(dir),
        None => None,
    };
    rel.unwrap_or(dir).display().to_string()
}

struct ReportInput<'a> {
    args: &'a BenchArgs,
    cfg_name: &'a str,
    gpu: bool,
    gpu_desc: Option<&'a str>,
    cpu_frames: usize,
    cpu_warmup: usize,
    from_bench_data: bool,
    photos: usize,
    cv_version: &'a str,
    cv_threads: u64,
    /// Our CPU rows' threads (`cpu.threads`).
    cpu_threads: usize,
    matched: &'a [(&'a str, Config, &'a str)],
    results: &'a [SizeResult],
    notes: &'a [String],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_median_and_p90() {
        let s = Stat::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.median, s.p90, s.n), (3.0, 5.0, 5));
        let s = Stat::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.median, 2.5);
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(Stat::of(&v).unwrap().p90, 180.0);
        assert!(Stat::of(&[]).is_none());
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(
            "1920x1080".parse::<Size>().unwrap(),
            Size {
                width: 1920,
                height: 1080
            }
        );
        assert!("1920".parse::<Size>().is_err());
        assert!("0x10".parse::<Size>().is_err());
    }

    #[test]
    fn stream_counts_parse() {
        assert_eq!(args::parse_streams(" 8"), Ok(8));
        for bad in ["0", "65", "x", "", "-1", "1.5"] {
            let e = args::parse_streams(bad).unwrap_err();
            assert!(e.contains("1..=64"), "{bad}: {e}");
        }
    }

    #[test]
    fn frames_are_crops_or_mosaics() {
        let mut big = GrayImage::new(300, 200);
        for (i, p) in big.data.iter_mut().enumerate() {
            *p = (i * 7 % 251) as u8;
        }
        let small = GrayImage::new(50, 40);
        let photos = vec![
            Photo {
                name: "big".into(),
                img: big.clone(),
            },
            Photo {
                name: "small".into(),
                img: small,
            },
        ];
        let set = make_frames(&photos, Size::from_str("128x96").unwrap(), 4);
        assert!(!set.tiled);
        assert_eq!(set.frames.len(), 4);
        // Frame 1: top-left crop of the big photo.
        assert_eq!(set.frames[1].row(0), &big.row(0)[..128]);
        let distinct: std::collections::HashSet<_> =
            set.frames.iter().map(|f| f.data.clone()).collect();
        assert_eq!(distinct.len(), 4);
        let set = make_frames(&photos, Size::from_str("400x300").unwrap(), 4);
        assert!(set.tiled);
        assert!(set.frames.iter().all(|f| f.width == 400 && f.height == 300));
    }

    #[test]
    fn plot_links_are_relative_to_the_markdown() {
        let l = |d: &str, m: Option<&str>| plot_link_dir(Path::new(d), m.map(Path::new));
        assert_eq!(l("out/plots", Some("out/bench.md")), "plots");
        assert_eq!(l("out", Some("out/bench.md")), "");
        assert_eq!(l("plots", Some("bench.md")), "plots");
        assert_eq!(l("/abs/plots", Some("other/bench.md")), "/abs/plots");
        assert_eq!(l("plots", None), "plots");
    }

    #[test]
    fn date_is_iso() {
        let d = utc_date();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }
}
