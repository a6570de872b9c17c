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

/// `gpu_features bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.frames == 0 {
        return Err(Error::Config("--frames must be at least 1".into()));
    }
    if args.input_path {
        #[cfg(feature = "cuda")]
        return input_path::run(args);
        #[cfg(not(feature = "cuda"))]
        return Err(Error::Cuda(
            "--input-path needs the CUDA backend (built without the `cuda` feature)".into(),
        ));
    }
    let (cfg, cfg_name) = load_config(args)?;
    let mut notes: Vec<String> = Vec::new();
    let (photos, from_bench_data) = load_inputs(args, &mut notes)?;
    if let Some(hz) = args.pace {
        notes.push(format!(
            "--pace {hz}: each GPU frame (with --tracks: each tracked frame, ours) starts 1/{hz} s \
             after the previous one, so the GPU and the CPU idle between frames as in the node \
             (without it, back to back); the stage rows' frames first wake the copy crew as the \
             node does (cuda.prewake_us: {} us; -1 = auto)",
            cfg.cuda.prewake_us
        ));
    }
    if !args.streams.is_empty() {
        return streams::run(args, &cfg, &cfg_name, &photos, from_bench_data, notes);
    }
    if let Some(sizes) = &args.tracks {
        return tracks::run(args, sizes, &photos, notes);
    }
    let distinct = args.distinct.max(1);

    // Backends.
    let primary = Pipeline::new(cfg.clone(), args.backend)?;
    let gpu = primary.backend() == BackendKind::Cuda;
    let gpu_desc = gpu_info();
    if !gpu {
        notes.push(match primary.fallback_reason() {
            Some(why) => format!("GPU rows omitted: no usable CUDA device ({why})"),
            None => "GPU rows omitted: --backend cpu".into(),
        });
    }
    let cpu_frames = args
        .cpu_frames
        .unwrap_or(if gpu {
            args.frames.min(20)
        } else {
            args.frames
        })
        .max(1);
    let cpu_warmup = args.warmup.min(2);
    let (mut gpu_pipe, mut cpu) = if !gpu {
        (None, Some(primary))
    } else if args.no_cpu {
        (Some(primary), None)
    } else {
        let cpu = Pipeline::new(cfg.clone(), BackendChoice::Cpu)?;
        (Some(primary), Some(cpu))
    };
    let matched: Vec<(&str, Config, &str)> = if args.no_matched {
        Vec::new()
    } else {
        MATCHED
            .iter()
            .map(|(k, y, f)| {
                let cfg = Config::from_yaml(y)?;
                let cfg = if *k == "orb" {
                    cfg.with_value("describe.enabled", "false")?
                } else {
                    cfg
                };
                Ok((*k, cfg, *f))
            })
            .collect::<Result<_>>()?
    };

    let tmp = std::env::temp_dir().join(format!("gpu_features_bench_{}", std::process::id()));
    let python = (args.opencv != "none").then_some(args.opencv.as_str());
    let peers_python = (args.peers != "none").then_some(args.peers.as_str());
    if python.is_some() || peers_python.is_some() {
        std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    if python.is_none() {
        notes.push("OpenCV rows omitted: --opencv none".into());
    }
    let mut opencv_failed: Option<String> = None;
    // Why the peers script cannot run at all (then it is not tried again), and which of
    // its libraries were missing (it still runs for the others).
    let mut peers_failed: Option<String> = (peers_python.is_some() && gpu_pipe.is_none())
        .then(|| "GPU peer rows omitted: no GPU rows".into());
    let mut peers_missing: Option<String> = None;

    let mut results: Vec<SizeResult> = Vec::new();
    for &size in &args.sizes {
        let mut res = SizeResult::default();
        let set = make_frames(&photos, size, distinct);
        eprintln!(
            "bench {size}: {} frames ({})",
            set.frames.len(),
            if set.tiled { "mosaic" } else { "crops" }
        );
        let mut jobs: Vec<(&str, &Config)> = vec![("default", &cfg)];
        jobs.extend(matched.iter().map(|(k, c, _)| (*k, c)));
        if let Some(p) = gpu_pipe.as_mut() {
            for (key, c) in &jobs {
                p.set_config((*c).clone())?;
                let t = Instant::now();
                let mut pace = Pacer::new(args.pace);
                let frames = (args.warmup, args.frames);
                let r = measure(p, &set.frames, args.encoding, frames, &mut pace)?;
                eprintln!(
                    "  gpu {key}: {} frames, wall median {:.3} ms ({:.1} s)",
                    r.frames,
                    r.wall.median,
                    t.elapsed().as_secs_f64()
                );
                res.add_run(&format!("gpu.{key}"), r);
                let wall = measure_input_buffer(p, &set.frames, args.encoding, frames, &mut pace)?;
                res.add_input_buffer_run(&format!("gpu.{key}"), wall);
            }
        }
        if let Some(p) = cpu.as_mut() {
            for (key, c) in &jobs {
                p.set_config((*c).clone())?;
                let t = Instant::now();
                let r = measure(
                    p,
                    &set.frames,
                    args.encoding,
                    (cpu_warmup, cpu_frames),
                    &mut Pacer::new(None),
                )?;
                eprintln!(
                    "  cpu {key}: {} frames, wall median {:.2} ms ({:.1} s)",
                    r.frames,
                    r.wall.median,
                    t.elapsed().as_secs_f64()
                );
                res.add_run(&format!("cpu.{key}"), r);
            }
        }
        if let (Some(py), None) = (python, &opencv_failed) {
            let t = Instant::now();
            match run_opencv(py, &tmp, size, &set.frames, args.opencv_runs) {
                Ok(v) => {
                    eprintln!("  opencv: done ({:.1} s)", t.elapsed().as_secs_f64());
                    res.add_opencv(v);
                }
                Err(why) => {
                    eprintln!("  opencv: {why}");
                    opencv_failed = Some(why);
                }
            }
        }
        if let (Some(py), None) = (peers_python, &peers_failed) {
            let t = Instant::now();
            // On the PNG files the OpenCV script reads (written once per size).
            let script = ("bench_peers.py", PEERS_SCRIPT);
            match run_frames_script(py, &tmp, script, size, &set.frames, args.opencv_runs) {
                Ok(v) => {
                    eprintln!("  gpu peers: done ({:.1} s)", t.elapsed().as_secs_f64());
                    res.add_peers(&v);
                    peers_missing = missing_note(&v);
                }
                Err(why) => {
                    eprintln!("  gpu peers: {why}");
                    peers_failed = Some(format!("GPU peer rows omitted: {why}"));
                }
            }
        }
        res.frames = Some(set);
        results.push(res);
    }
    notes.extend(peers_failed.or(peers_missing));
    let matching = if args.match_descriptors > 0 {
        eprintln!(
            "bench matcher: {} descriptors per set",
            args.match_descriptors
        );
        Some(bench_matching(MatchBenchInput {
            n: args.match_descriptors,
            gpu,
            cpu: cpu.is_some(),
            python: python.filter(|_| opencv_failed.is_none()),
            dir: &tmp,
            frame: results
                .first()
                .and_then(|r| r.frames.as_ref())
                .and_then(|f| f.frames.first()),
            gpu_runs: (args.warmup, args.frames),
            cpu_runs: (cpu_warmup, cpu_frames),
            opencv_runs: args.opencv_runs,
        })?)
    } else {
        None
    };
    if python.is_some() || peers_python.is_some() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if let Some(why) = &opencv_failed {
        notes.push(format!("OpenCV rows omitted: {why}"));
    }

    let cv = results.iter().find_map(|r| r.opencv.clone());
    let (cv_version, cv_threads) = match &cv {
        Some(v) => (
            v["version"].as_str().unwrap_or("?").to_string(),
            v["threads_all"].as_u64().unwrap_or(0),
        ),
        None => ("-".into(), 0),
    };
    let mut md = report(ReportInput {
        args,
        cfg_name: &cfg_name,
        gpu,
        gpu_desc: gpu_desc.as_deref(),
        cpu_frames,
        cpu_warmup,
        from_bench_data,
        photos: photos.len(),
        cv_version: &cv_version,
        cv_threads,
        matched: &matched,
        results: &results,
        notes: &notes,
    });
    if let Some(dir) = &args.plots {
        let written = plots(&args.sizes, &results, cv_threads, dir)?;
        md.push_str(&plots_markdown(
            &written,
            &plot_link_dir(dir, args.markdown.as_deref()),
        ));
    }
    if let Some(m) = &matching {
        md.push_str(&m.markdown);
    }
    emit(args, &md, || {
        let sizes: Vec<Value> = args
            .sizes
            .iter()
            .zip(&results)
            .map(|(z, r)| {
                let runs: serde_json::Map<String, Value> =
                    r.runs.iter().map(|(k, v)| (k.clone(), v.json())).collect();
                let fs = r.frames.as_ref();
                json!({
                    "size": z.to_string(),
                    "frames": fs.map(|f| f.sources.clone()),
                    "mosaic": fs.map(|f| f.tiled),
                    "runs": runs,
                    "opencv": r.opencv.clone(),
                })
            })
            .collect();
        json!({
            "date": utc_date(),
            "command": command_line(),
            "backend": if gpu { "cuda" } else { "cpu" },
            "gpu": gpu_desc,
            "cpu": cpu_model(),
            "config": cfg_name,
            "frames": args.frames,
            "warmup": args.warmup,
            "encoding": args.encoding.name(),
            "pace_hz": args.pace,
            "cpu_frames": cpu_frames,
            "opencv_runs": args.opencv_runs,
            "notes": notes,
            "sizes": sizes,
            "matching": matching.as_ref().map(|m| m.json.clone()),
        })
    })
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
