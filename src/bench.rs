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

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::image::{load_gray, save_gray_png, GrayImage, ImageView};
use crate::matching::{Descriptor, MatchParams, Matcher};
use crate::pipeline::{BackendChoice, BackendKind, Features, Pipeline};

const DEFAULT_YAML: &str = include_str!("../config/default.yaml");
const OPENCV_SCRIPT: &str = include_str!("../scripts/bench_opencv.py");
/// Configs whose output equals an OpenCV call's: (key, file, what it equals). The `orb` key
/// runs the file with `describe.enabled: false` (ORB's detect alone).
const MATCHED: [(&str, &str, &str); 4] = [
    (
        "fast",
        include_str!("../config/opencv_fast.yaml"),
        "config/opencv_fast.yaml",
    ),
    (
        "canny",
        include_str!("../config/opencv_canny.yaml"),
        "config/opencv_canny.yaml",
    ),
    (
        "orb",
        include_str!("../config/opencv_orb.yaml"),
        "config/opencv_orb.yaml, describe off",
    ),
    (
        "orb_desc",
        include_str!("../config/opencv_orb.yaml"),
        "config/opencv_orb.yaml",
    ),
];

/// A frame size, `WIDTHxHEIGHT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub width: usize,
    pub height: usize,
}

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (w, h) = s
            .trim()
            .split_once(['x', 'X'])
            .ok_or_else(|| format!("{s:?}: expected WIDTHxHEIGHT"))?;
        let parse = |v: &str| {
            v.trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| (64..=16384).contains(&n))
                .ok_or_else(|| format!("{s:?}: sides must be 64..=16384"))
        };
        Ok(Size {
            width: parse(w)?,
            height: parse(h)?,
        })
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// Command-line arguments of `gpu_features bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// cuda: GPU rows plus the CPU reference; cpu: CPU reference only; auto: cuda if usable.
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// YAML config of the whole-pipeline rows (default: config/default.yaml, ORB-style 2000
    /// points + Canny; the embedded copy when the file is not there).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override one setting of that config, e.g. `--set select.max_keypoints=1000`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Timed frames per size and config (median and p90 over these).
    #[arg(long, default_value_t = 200)]
    pub frames: usize,
    /// Untimed frames first (per size and config).
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Frame sizes, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1280x720,1920x1080,3840x2160"
    )]
    pub sizes: Vec<Size>,
    /// Photos: directories (their .jpg/.jpeg/.png/.pgm files) or files, comma-separated or
    /// repeated (default: bench-data/, else the tiled photos of tests/data).
    #[arg(long, value_delimiter = ',', value_name = "DIR|FILES")]
    pub images: Vec<PathBuf>,
    /// Distinct frames per size, rotated frame by frame (at least 4).
    #[arg(long, default_value_t = 8)]
    pub distinct: usize,
    /// Timed frames of the CPU reference (default: --frames with --backend cpu, else
    /// min(--frames, 20): it is slow at 4K).
    #[arg(long)]
    pub cpu_frames: Option<usize>,
    /// Skip the CPU reference when the GPU is benchmarked.
    #[arg(long)]
    pub no_cpu: bool,
    /// Skip the configs that match OpenCV's output (config/opencv_*.yaml).
    #[arg(long)]
    pub no_matched: bool,
    /// Python with cv2 for the OpenCV rows; `none` skips them.
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    pub opencv: String,
    /// Timed runs of each OpenCV op per thread count (>= 50 for the published table).
    #[arg(long, default_value_t = 50)]
    pub opencv_runs: usize,
    /// Descriptors per set of the matcher rows (random and ORB pairs); 0 skips them.
    #[arg(long, default_value_t = 2000)]
    pub match_descriptors: usize,
    /// Write every number (and the table's inputs) as JSON here.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
    /// Also write the markdown report here (it always goes to stdout).
    #[arg(long, value_name = "OUT")]
    pub markdown: Option<PathBuf>,
}

/// Median and p90 (nearest rank) of a sample, in ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub p90: f64,
    pub n: usize,
}

impl Stat {
    pub fn of(v: &[f64]) -> Option<Stat> {
        if v.is_empty() {
            return None;
        }
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            0.5 * (s[n / 2 - 1] + s[n / 2])
        };
        let p90 = s[((0.9 * n as f64).ceil() as usize).max(1) - 1];
        Some(Stat { median, p90, n })
    }

    fn json(&self) -> Value {
        json!({"median_ms": self.median, "p90_ms": self.p90, "n": self.n})
    }
}

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

/// Timings of one config on one backend at one size.
struct RunStats {
    frames: usize,
    /// Stage name -> timings, in the pipeline's order.
    stages: Vec<(&'static str, Stat)>,
    /// Sum of the stages timed by CUDA events (every stage not marked "(host)").
    events_total: Stat,
    wall: Stat,
    /// Keypoints per frame, mean over the distinct frames.
    keypoints: f64,
    /// Edge pixels per frame, mean over the distinct frames (Canny on).
    edges: Option<f64>,
}

impl RunStats {
    fn json(&self) -> Value {
        let stages: serde_json::Map<String, Value> = self
            .stages
            .iter()
            .map(|(k, s)| (k.to_string(), s.json()))
            .collect();
        json!({
            "frames": self.frames,
            "stages": stages,
            "events_total": self.events_total.json(),
            "wall": self.wall.json(),
            "keypoints_mean": self.keypoints,
            "edge_pixels_mean": self.edges,
        })
    }
}

/// `cmd` arguments; the report prints them.
fn command_line() -> String {
    let mut v: Vec<String> = std::env::args().collect();
    if let Some(first) = v.first_mut() {
        if let Some(name) = Path::new(first.as_str()).file_name() {
            *first = name.to_string_lossy().into_owned();
        }
    }
    v.join(" ")
}

/// Today's UTC date, YYYY-MM-DD (civil-from-days; no date crate needed).
fn utc_date() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn cpu_model() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    format!("{model}, {n} logical CPUs")
}

/// GPU name, driver and CUDA version from nvidia-smi, when it is there.
fn gpu_info() -> Option<String> {
    let q = Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let line = String::from_utf8_lossy(&q.stdout)
        .lines()
        .next()?
        .trim()
        .to_string();
    let cuda = Command::new("nvidia-smi")
        .output()
        .ok()
        .and_then(|o| {
            let s = String::from_utf8_lossy(&o.stdout).into_owned();
            s.split("CUDA Version:")
                .nth(1)
                .and_then(|r| r.split_whitespace().next().map(str::to_string))
        })
        .unwrap_or_else(|| "?".into());
    let mut parts = line.split(',').map(str::trim);
    let name = parts.next().unwrap_or("?");
    let driver = parts.next().unwrap_or("?");
    let mem = parts.next().unwrap_or("?");
    Some(format!("{name} ({mem}), driver {driver}, CUDA {cuda}"))
}

fn is_image(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .map(|e| {
            matches!(
                e.to_ascii_lowercase().as_str(),
                "jpg" | "jpeg" | "png" | "pgm"
            )
        })
        .unwrap_or(false)
}

/// Image files named by `--images` (directories expand to their image files, sorted).
fn image_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Error::io(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && is_image(f))
                .collect();
            v.sort();
            out.extend(v);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(Error::Config(format!(
                "--images: {} is neither a file nor a directory",
                p.display()
            )));
        }
    }
    Ok(out)
}

/// The first of `rel` (as given, then beside Cargo.toml) that exists.
fn find_dir(rel: &str) -> Option<PathBuf> {
    [
        PathBuf::from(rel),
        Path::new(env!("CARGO_MANIFEST_DIR")).join(rel),
    ]
    .into_iter()
    .find(|p| p.is_dir())
}

fn load_photos(files: &[PathBuf]) -> Result<Vec<Photo>> {
    let mut photos = Vec::new();
    for f in files {
        let img = load_gray(f)?;
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        photos.push(Photo { name, img });
    }
    Ok(photos)
}

/// Crop positions (fractions of the free range), used in turn for the frames of one photo.
const POS: [(f64, f64); 9] = [
    (0.5, 0.5),
    (0.0, 0.0),
    (1.0, 1.0),
    (1.0, 0.0),
    (0.0, 1.0),
    (0.25, 0.25),
    (0.75, 0.75),
    (0.75, 0.25),
    (0.25, 0.75),
];

fn crop(src: &GrayImage, x0: usize, y0: usize, w: usize, h: usize) -> GrayImage {
    let mut out = GrayImage::new(w, h);
    for y in 0..h {
        out.row_mut(y).copy_from_slice(&src.row(y0 + y)[x0..x0 + w]);
    }
    out
}

/// `n` frames of `size`: crops of the photos at least that large (photo k % candidates, at
/// position POS[k / candidates]); when none is that large, mosaics of crops of all photos.
fn make_frames(photos: &[Photo], size: Size, n: usize) -> FrameSet {
    let (w, h) = (size.width, size.height);
    let cands: Vec<&Photo> = photos
        .iter()
        .filter(|p| p.img.width >= w && p.img.height >= h)
        .collect();
    let mut set = FrameSet {
        frames: Vec::new(),
        sources: Vec::new(),
        tiled: cands.is_empty(),
    };
    if !cands.is_empty() {
        for k in 0..n {
            let p = cands[k % cands.len()];
            let (fx, fy) = POS[(k / cands.len()) % POS.len()];
            let x0 = ((p.img.width - w) as f64 * fx).round() as usize;
            let y0 = ((p.img.height - h) as f64 * fy).round() as usize;
            set.frames.push(crop(&p.img, x0, y0, w, h));
            set.sources.push(format!("{}@{x0},{y0}", p.name));
        }
        return set;
    }
    // Mosaic: cells of the smallest photo's size, each cell a crop of another photo.
    let cw = photos.iter().map(|p| p.img.width).min().unwrap_or(w).max(1);
    let ch = photos
        .iter()
        .map(|p| p.img.height)
        .min()
        .unwrap_or(h)
        .max(1);
    for k in 0..n {
        let mut img = GrayImage::new(w, h);
        let (fx, fy) = POS[k % POS.len()];
        let mut t = 0;
        for ty in (0..h).step_by(ch) {
            for tx in (0..w).step_by(cw) {
                let p = &photos[(k + t) % photos.len()];
                t += 1;
                let x0 = ((p.img.width - cw) as f64 * fx).round() as usize;
                let y0 = ((p.img.height - ch) as f64 * fy).round() as usize;
                let (tw, th) = (cw.min(w - tx), ch.min(h - ty));
                for y in 0..th {
                    img.row_mut(ty + y)[tx..tx + tw]
                        .copy_from_slice(&p.img.row(y0 + y)[x0..x0 + tw]);
                }
            }
        }
        set.frames.push(img);
        set.sources
            .push(format!("mosaic of {cw}x{ch} crops, starting at photo {k}"));
    }
    set
}

/// Runs `warmup` untimed then `n` timed frames, rotating through `frames`.
fn measure(p: &mut Pipeline, frames: &[GrayImage], warmup: usize, n: usize) -> Result<RunStats> {
    let views: Vec<ImageView> = frames
        .iter()
        .map(|f| ImageView::mono8(&f.data, f.width, f.height))
        .collect::<std::result::Result<_, _>>()?;
    let mut out = Features::default();
    for i in 0..warmup {
        p.process_into(&views[i % views.len()], &mut out)?;
    }
    let mut names: Vec<&'static str> = Vec::new();
    let mut per_stage: Vec<Vec<f64>> = Vec::new();
    let (mut walls, mut totals) = (Vec::new(), Vec::new());
    // Per distinct frame, once (untimed): (keypoints, edge pixels).
    let mut counts: Vec<Option<(usize, Option<usize>)>> = vec![None; views.len()];
    for i in 0..n {
        let j = (warmup + i) % views.len();
        let t = Instant::now();
        p.process_into(&views[j], &mut out)?;
        walls.push(t.elapsed().as_secs_f64() * 1e3);
        if counts[j].is_none() {
            let edges = out
                .edges
                .as_ref()
                .map(|e| e.data.iter().filter(|&&v| v != 0).count());
            counts[j] = Some((out.keypoints.len(), edges));
        }
        let mut total = 0.0;
        for st in &out.timings {
            let j = match names.iter().position(|&s| s == st.stage) {
                Some(j) => j,
                None => {
                    names.push(st.stage);
                    per_stage.push(Vec::new());
                    names.len() - 1
                }
            };
            per_stage[j].push(st.ms);
            if !st.stage.contains("(host)") {
                total += st.ms;
            }
        }
        totals.push(total);
    }
    // Frames the timed loop did not reach (fewer frames than distinct ones): count them too,
    // untimed, so that every backend's counts cover the same frames.
    for (j, c) in counts.iter_mut().enumerate() {
        if c.is_none() {
            p.process_into(&views[j], &mut out)?;
            let edges = out
                .edges
                .as_ref()
                .map(|e| e.data.iter().filter(|&&v| v != 0).count());
            *c = Some((out.keypoints.len(), edges));
        }
    }
    let seen: Vec<(usize, Option<usize>)> = counts.into_iter().flatten().collect();
    let mean = |v: &mut dyn Iterator<Item = usize>| {
        v.map(|x| x as f64).sum::<f64>() / seen.len().max(1) as f64
    };
    let keypoints = mean(&mut seen.iter().map(|c| c.0));
    let edges = seen
        .iter()
        .all(|c| c.1.is_some())
        .then(|| mean(&mut seen.iter().filter_map(|c| c.1)));
    let none = || Error::Config("bench: --frames must be at least 1".into());
    Ok(RunStats {
        frames: n,
        stages: names
            .into_iter()
            .zip(per_stage.iter().map(|v| Stat::of(v)))
            .filter_map(|(k, s)| s.map(|s| (k, s)))
            .collect(),
        events_total: Stat::of(&totals).ok_or_else(none)?,
        wall: Stat::of(&walls).ok_or_else(none)?,
        keypoints,
        edges,
    })
}

/// Writes the frames as PNG and runs the OpenCV script on them: its JSON, or why not.
fn run_opencv(
    python: &str,
    dir: &Path,
    size: Size,
    frames: &[GrayImage],
    runs: usize,
) -> std::result::Result<Value, String> {
    let script = dir.join("bench_opencv.py");
    if !script.exists() {
        std::fs::write(&script, OPENCV_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    }
    let mut files = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let path = dir.join(format!("{size}_{i}.png"));
        save_gray_png(f, &path).map_err(|e| e.to_string())?;
        files.push(path);
    }
    let out = Command::new(python)
        .arg(&script)
        .args(["--runs", &runs.to_string(), "--warmup", "3"])
        .args(&files)
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").trim().to_string();
        return Err(format!("{python} failed: {last}"));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bad JSON from the script: {e}"))
}

/// Every number of one size, by key (`gpu.default.wall`, `cv1.fast`, ...), for the table.
#[derive(Default)]
struct SizeResult {
    values: BTreeMap<String, Stat>,
    counts: BTreeMap<String, f64>,
    runs: BTreeMap<String, RunStats>,
    opencv: Option<Value>,
    frames: Option<FrameSet>,
}

impl SizeResult {
    fn add_run(&mut self, key: &str, r: RunStats) {
        for (stage, s) in &r.stages {
            self.values.insert(format!("{key}.stage.{stage}"), *s);
        }
        self.values.insert(format!("{key}.events"), r.events_total);
        self.values.insert(format!("{key}.wall"), r.wall);
        self.counts.insert(format!("{key}.keypoints"), r.keypoints);
        if let Some(e) = r.edges {
            self.counts.insert(format!("{key}.edges"), e);
        }
        self.runs.insert(key.to_string(), r);
    }

    fn add_opencv(&mut self, v: Value) {
        let all = v["threads_all"].as_u64().unwrap_or(1);
        for (tag, threads) in [("cv1", 1u64), ("cvN", all)] {
            let Some(ops) = v["results"][threads.to_string()].as_object() else {
                continue;
            };
            for (op, r) in ops {
                let (Some(m), Some(p)) = (r["median_ms"].as_f64(), r["p90_ms"].as_f64()) else {
                    continue;
                };
                let n = v["runs"].as_u64().unwrap_or(0) as usize;
                self.values.insert(
                    format!("{tag}.{op}"),
                    Stat {
                        median: m,
                        p90: p,
                        n,
                    },
                );
            }
            // What our default pipeline does, in OpenCV: ORB detectAndCompute + Canny (sum
            // of the medians).
            if let (Some(a), Some(b)) = (
                self.values.get(&format!("{tag}.orb_desc")).copied(),
                self.values.get(&format!("{tag}.canny")).copied(),
            ) {
                self.values.insert(
                    format!("{tag}.orb_desc+canny"),
                    Stat {
                        median: a.median + b.median,
                        p90: a.p90 + b.p90,
                        n: a.n,
                    },
                );
            }
        }
        if let Some(c) = v["counts"].as_object() {
            for (op, n) in c {
                if let Some(n) = n.as_f64() {
                    self.counts.insert(format!("cv.{op}.count"), n);
                }
            }
        }
        self.opencv = Some(v);
    }
}

enum Row {
    Header(String),
    Time(String, String),
    Count(String, String),
    /// Several counts in one cell, "a / b / c".
    Counts(String, Vec<String>),
    Ratio(String, String, String),
}

fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn render_table(sizes: &[Size], results: &[SizeResult], rows: &[Row]) -> String {
    let mut s = String::from("| |");
    for z in sizes {
        s.push_str(&format!(" {z} |"));
    }
    s.push_str("\n|---|");
    for _ in sizes {
        s.push_str("---:|");
    }
    s.push('\n');
    for row in rows {
        let (label, cells): (String, Vec<String>) = match row {
            Row::Header(h) => (format!("**{h}**"), vec![String::new(); sizes.len()]),
            Row::Time(l, k) => (
                l.clone(),
                results
                    .iter()
                    .map(|r| match r.values.get(k) {
                        Some(v) => format!("{} ({})", fmt_ms(v.median), fmt_ms(v.p90)),
                        None => "—".into(),
                    })
                    .collect(),
            ),
            Row::Count(l, k) => (
                l.clone(),
                results
                    .iter()
                    .map(|r| match r.counts.get(k) {
                        Some(v) => format!("{v:.0}"),
                        None => "—".into(),
                    })
                    .collect(),
            ),
            Row::Counts(l, keys) => (
                l.clone(),
                results
                    .iter()
                    .map(|r| {
                        let v: Vec<String> = keys
                            .iter()
                            .map(|k| match r.counts.get(k) {
                                Some(v) => format!("{v:.0}"),
                                None => "—".into(),
                            })
                            .collect();
                        if v.iter().all(|c| c == "—") {
                            "—".into()
                        } else {
                            v.join(" / ")
                        }
                    })
                    .collect(),
            ),
            Row::Ratio(l, num, den) => (
                l.clone(),
                results
                    .iter()
                    .map(|r| match (r.values.get(num), r.values.get(den)) {
                        (Some(a), Some(b)) if b.median > 0.0 => {
                            let x = a.median / b.median;
                            if x >= 10.0 {
                                format!("{x:.0}x")
                            } else {
                                format!("{x:.2}x")
                            }
                        }
                        _ => "—".into(),
                    })
                    .collect(),
            ),
        };
        // Drop rows with no value at any size (a header stays if a row under it stays).
        if !matches!(row, Row::Header(_)) && cells.iter().all(|c| c == "—") {
            continue;
        }
        s.push_str(&format!("| {label} |"));
        for c in cells {
            s.push_str(&format!(" {c} |"));
        }
        s.push('\n');
    }
    // Remove headers followed directly by another header or by the end.
    let lines: Vec<&str> = s.lines().collect();
    let mut kept = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let is_header = l.starts_with("| **");
        let next_header = lines.get(i + 1).map_or(true, |n| n.starts_with("| **"));
        if !(is_header && next_header) {
            kept.push(*l);
        }
    }
    kept.join("\n") + "\n"
}

fn stage_label(stage: &str, gpu: bool) -> String {
    match (stage, gpu) {
        ("decode", true) => "decode (host copy to pinned + upload)".into(),
        _ => stage.to_string(),
    }
}

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

/// `gpu_features bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.frames == 0 {
        return Err(Error::Config("--frames must be at least 1".into()));
    }
    let (cfg, cfg_name) = load_config(args)?;
    let mut notes: Vec<String> = Vec::new();

    // Photos.
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
    if python.is_some() {
        std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    } else {
        notes.push("OpenCV rows omitted: --opencv none".into());
    }
    let mut opencv_failed: Option<String> = None;

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
                let r = measure(p, &set.frames, args.warmup, args.frames)?;
                eprintln!(
                    "  gpu {key}: {} frames, wall median {:.3} ms ({:.1} s)",
                    r.frames,
                    r.wall.median,
                    t.elapsed().as_secs_f64()
                );
                res.add_run(&format!("gpu.{key}"), r);
            }
        }
        if let Some(p) = cpu.as_mut() {
            for (key, c) in &jobs {
                p.set_config((*c).clone())?;
                let t = Instant::now();
                let r = measure(p, &set.frames, cpu_warmup, cpu_frames)?;
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
        res.frames = Some(set);
        results.push(res);
    }
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
    if python.is_some() {
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
    if let Some(m) = &matching {
        md.push_str(&m.markdown);
    }
    print!("{md}");
    if let Some(p) = &args.markdown {
        std::fs::write(p, &md).map_err(|e| Error::io(p, e))?;
    }
    if let Some(p) = &args.json {
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
        let doc = json!({
            "date": utc_date(),
            "command": command_line(),
            "backend": if gpu { "cuda" } else { "cpu" },
            "gpu": gpu_desc,
            "cpu": cpu_model(),
            "config": cfg_name,
            "frames": args.frames,
            "warmup": args.warmup,
            "cpu_frames": cpu_frames,
            "opencv_runs": args.opencv_runs,
            "notes": notes,
            "sizes": sizes,
            "matching": matching.as_ref().map(|m| m.json.clone()),
        });
        let text = serde_json::to_string_pretty(&doc).expect("json");
        std::fs::write(p, text).map_err(|e| Error::io(p, e))?;
    }
    Ok(())
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

fn report(r: ReportInput) -> String {
    let a = r.args;
    let mut s = String::new();
    s.push_str(&format!("## gpu_features bench, {}\n\n", utc_date()));
    s.push_str(&format!("- command: `{}`\n", command_line()));
    s.push_str(&format!(
        "- GPU: {}\n",
        match (r.gpu, r.gpu_desc) {
            (true, Some(d)) => d.to_string(),
            (true, None) => "CUDA device (nvidia-smi not found)".into(),
            (false, Some(d)) => format!("{d} (not used)"),
            (false, None) => "none used".into(),
        }
    ));
    s.push_str(&format!("- CPU: {}\n", cpu_model()));
    s.push_str(&format!(
        "- OpenCV: {}\n",
        if r.cv_threads > 0 {
            format!(
                "{} (python cv2), 1 thread and {} threads; {} runs per op after 3 warm-up",
                r.cv_version, r.cv_threads, a.opencv_runs
            )
        } else {
            "not run".into()
        }
    ));
    s.push_str(&format!("- config: {}\n", r.cfg_name));
    s.push_str(&format!(
        "- inputs: {} distinct mono8 frames per size, rotated frame by frame; {} ({} photos)\n",
        a.distinct,
        if r.from_bench_data {
            "crops (not scaled) of real photos"
        } else {
            "mosaics of tests/data photos"
        },
        r.photos
    ));
    for (z, res) in a.sizes.iter().zip(r.results) {
        if let Some(f) = &res.frames {
            let mut names: Vec<&str> = f
                .sources
                .iter()
                .map(|x| x.split('@').next().unwrap_or(x))
                .collect();
            names.dedup();
            s.push_str(&format!(
                "- {z}: {}\n",
                if f.tiled {
                    format!("{} mosaics of crops of every photo", f.frames.len())
                } else {
                    format!("{} crops of {}", f.frames.len(), names.join(", "))
                }
            ));
        }
    }
    if r.gpu {
        s.push_str(&format!(
            "- ours GPU: {} frames after {} warm-up per size and config; CPU reference: {} \
             frames after {} warm-up\n",
            a.frames, a.warmup, r.cpu_frames, r.cpu_warmup
        ));
    } else {
        s.push_str(&format!(
            "- ours CPU reference: {} frames after {} warm-up per size and config\n",
            r.cpu_frames, r.cpu_warmup
        ));
    }
    for n in r.notes {
        s.push_str(&format!("- note: {n}\n"));
    }
    s.push_str(
        "\nTimes: median ms (p90). Stage rows: CUDA events on the GPU, wall time on the CPU; \
         `process_into` wall: the whole call on the host clock (upload, kernels, download, \
         host selection).\n\n",
    );

    let mut rows = Vec::new();
    let stage_names = |key: &str| -> Vec<&'static str> {
        r.results
            .iter()
            .find_map(|x| x.runs.get(key))
            .map(|run| run.stages.iter().map(|(k, _)| *k).collect())
            .unwrap_or_default()
    };
    for (be, title, gpu) in [
        ("gpu", "ours GPU", true),
        ("cpu", "ours CPU reference (1 thread)", false),
    ] {
        let key = format!("{be}.default");
        rows.push(Row::Header(format!("{title}: {}", r.cfg_name)));
        for st in stage_names(&key) {
            rows.push(Row::Time(stage_label(st, gpu), format!("{key}.stage.{st}")));
        }
        if gpu {
            rows.push(Row::Time(
                "GPU pipeline total (events, decode..download)".into(),
                format!("{key}.events"),
            ));
        }
        rows.push(Row::Time(
            "**whole `process_into` (wall)**".into(),
            format!("{key}.wall"),
        ));
        rows.push(Row::Count(
            "keypoints / frame (mean over the distinct frames)".into(),
            format!("{key}.keypoints"),
        ));
        rows.push(Row::Count(
            "edge pixels / frame".into(),
            format!("{key}.edges"),
        ));
    }
    if !r.matched.is_empty() {
        rows.push(Row::Header(
            "ours, configs with OpenCV's exact output, whole `process_into` (wall)".into(),
        ));
        for (k, _, file) in r.matched {
            for (be, name) in [("gpu", "GPU"), ("cpu", "CPU")] {
                rows.push(Row::Time(
                    format!("{name} {file}"),
                    format!("{be}.{k}.wall"),
                ));
            }
            let (what, ours) = if *k == "canny" {
                ("edge pixels", "edges")
            } else {
                ("keypoints", "keypoints")
            };
            rows.push(Row::Counts(
                format!("{what} / frame: GPU / CPU / OpenCV (same work)"),
                vec![
                    format!("gpu.{k}.{ours}"),
                    format!("cpu.{k}.{ours}"),
                    format!("cv.{k}.count"),
                ],
            ));
        }
    }
    let all = format!("{} threads", r.cv_threads);
    for (tag, threads) in [("cv1", "1 thread"), ("cvN", all.as_str())] {
        rows.push(Row::Header(format!("OpenCV {}, {threads}", r.cv_version)));
        for (op, label) in [
            ("fast", "cv::FAST (t=20, NMS), level 0 only"),
            ("canny", "cv::Canny (50, 150, L2)"),
            ("orb", "ORB(2000) detect"),
            ("orb_desc", "ORB(2000) detectAndCompute"),
            ("orb_desc+canny", "ORB detectAndCompute + Canny (sum)"),
        ] {
            rows.push(Row::Time(label.into(), format!("{tag}.{op}")));
        }
    }
    s.push_str(&render_table(&a.sizes, r.results, &rows));

    let mut ratios = Vec::new();
    let ops = [
        ("fast", "FAST: cv::FAST vs opencv_fast.yaml"),
        ("canny", "Canny: cv::Canny vs opencv_canny.yaml"),
        ("orb", "ORB detect vs opencv_orb.yaml, describe off"),
        ("orb_desc", "ORB detectAndCompute vs opencv_orb.yaml"),
    ];
    if r.gpu {
        ratios.push(Row::Header("CPU reference / ours GPU (wall)".into()));
        ratios.push(Row::Ratio(
            format!("whole pipeline ({})", r.cfg_name),
            "cpu.default.wall".into(),
            "gpu.default.wall".into(),
        ));
        for (k, _, file) in r.matched {
            ratios.push(Row::Ratio(
                file.to_string(),
                format!("cpu.{k}.wall"),
                format!("gpu.{k}.wall"),
            ));
        }
        for (tag, threads) in [("cv1", "1 thread"), ("cvN", all.as_str())] {
            ratios.push(Row::Header(format!(
                "OpenCV {threads} / ours GPU (wall; same output)"
            )));
            for (k, label) in ops {
                ratios.push(Row::Ratio(
                    label.into(),
                    format!("{tag}.{k}"),
                    format!("gpu.{k}.wall"),
                ));
            }
            ratios.push(Row::Ratio(
                "ORB detectAndCompute + Canny vs our default pipeline".into(),
                format!("{tag}.orb_desc+canny"),
                "gpu.default.wall".into(),
            ));
        }
    }
    for (tag, threads) in [("cv1", "1 thread"), ("cvN", all.as_str())] {
        ratios.push(Row::Header(format!(
            "OpenCV {threads} / ours CPU reference (1 thread; same output)"
        )));
        for (k, label) in ops {
            ratios.push(Row::Ratio(
                label.into(),
                format!("{tag}.{k}"),
                format!("cpu.{k}.wall"),
            ));
        }
        ratios.push(Row::Ratio(
            "ORB detectAndCompute + Canny vs our default pipeline".into(),
            format!("{tag}.orb_desc+canny"),
            "cpu.default.wall".into(),
        ));
    }
    s.push_str("\nRatios of medians (> 1: ours is faster by that factor).\n\n");
    s.push_str(&render_table(&a.sizes, r.results, &ratios));
    s
}

// =============================================================================================
// Matcher rows: brute-force Hamming matching (src/matching), ours on the GPU and the CPU
// against cv2.BFMatcher(NORM_HAMMING).knnMatch(k=2), on the same descriptor sets.

/// The matcher section of the report, and its numbers for the JSON.
struct MatchBench {
    markdown: String,
    json: Value,
}

/// A named (query, train) pair of descriptor sets.
struct DescriptorPair {
    name: String,
    query: Vec<Descriptor>,
    train: Vec<Descriptor>,
}

/// `n` random queries and `n` train descriptors of which half are noisy copies (up to 40
/// flipped bits) of random queries, half unrelated: the shape of frame-to-frame matching,
/// with a fixed seed so every run (and OpenCV) sees the same sets.
fn synthetic_pair(n: usize) -> DescriptorPair {
    let mut state = 0x5eed_u64;
    let mut next = move || {
        // SplitMix64.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let random = |next: &mut dyn FnMut() -> u64| {
        let mut d = [0u8; 32];
        for c in d.chunks_mut(8) {
            c.copy_from_slice(&next().to_le_bytes());
        }
        d
    };
    let query: Vec<Descriptor> = (0..n).map(|_| random(&mut next)).collect();
    let train = (0..n)
        .map(|_| {
            if n == 0 || next() % 2 == 0 {
                return random(&mut next);
            }
            let mut d = query[(next() % n as u64) as usize];
            for _ in 0..next() % 41 {
                let bit = (next() % 256) as usize;
                d[bit / 8] ^= 1 << (bit % 8);
            }
            d
        })
        .collect();
    DescriptorPair {
        name: format!("random {n}x{n}"),
        query,
        train,
    }
}

/// Real ORB descriptors (the CPU pipeline, default config, `n` points): `frame` against the
/// same frame shifted by (7, 5) pixels. `Err`: why not.
fn orb_pair(frame: &GrayImage, n: usize) -> std::result::Result<DescriptorPair, String> {
    let cfg = Config::from_yaml(DEFAULT_YAML)
        .and_then(|c| c.with_value("describe.enabled", "true"))
        .and_then(|c| c.with_value("canny.enabled", "false"))
        .and_then(|c| c.with_value("select.max_keypoints", &n.to_string()))
        .map_err(|e| e.to_string())?;
    let mut p = Pipeline::new(cfg, BackendChoice::Cpu).map_err(|e| e.to_string())?;
    let (w, h) = (frame.width, frame.height);
    let shifted = crop(frame, 7, 5, w - 7, h - 5);
    let mut describe = |img: &GrayImage| {
        let view = ImageView::mono8(&img.data, img.width, img.height).map_err(|e| e.to_string())?;
        p.process(&view)
            .map(|f| f.descriptors)
            .map_err(|e| e.to_string())
    };
    let (query, train) = (describe(frame)?, describe(&shifted)?);
    if query.len() < 2 || train.len() < 2 {
        return Err("the pipeline gave fewer than 2 descriptors".into());
    }
    Ok(DescriptorPair {
        name: format!("ORB {}x{} ({w}x{h} frame)", query.len(), train.len()),
        query,
        train,
    })
}

/// Wall time of `Matcher::match_into` (copies included on the GPU): `warmup` untimed calls,
/// then `runs` timed ones; also the number of matches.
fn time_matcher(
    m: &mut Matcher,
    pair: &DescriptorPair,
    params: &MatchParams,
    warmup: usize,
    runs: usize,
) -> Result<(Stat, usize)> {
    let mut out = Vec::new();
    for _ in 0..warmup {
        m.match_into(&pair.query, &pair.train, params, &mut out)?;
    }
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        m.match_into(&pair.query, &pair.train, params, &mut out)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok((Stat::of(&ms).expect("at least one run"), out.len()))
}

/// Writes the pair as raw descriptor files and runs the OpenCV script's `--match` mode.
fn run_opencv_match(
    python: &str,
    dir: &Path,
    tag: usize,
    pair: &DescriptorPair,
    runs: usize,
    ratio: f32,
) -> std::result::Result<Value, String> {
    let script = dir.join("bench_opencv.py");
    if !script.exists() {
        std::fs::write(&script, OPENCV_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    }
    let (q, t) = (
        dir.join(format!("match{tag}_query.bin")),
        dir.join(format!("match{tag}_train.bin")),
    );
    for (path, set) in [(&q, &pair.query), (&t, &pair.train)] {
        std::fs::write(path, set.as_flattened()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let out = Command::new(python)
        .arg(&script)
        .args(["--runs", &runs.to_string(), "--warmup", "3"])
        .args(["--ratio", &ratio.to_string(), "--match"])
        .args([&q, &t])
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").trim().to_string();
        return Err(format!("{python} failed: {last}"));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bad JSON from the script: {e}"))
}

/// Everything the matcher rows need from `run`.
struct MatchBenchInput<'a> {
    n: usize,
    gpu: bool,
    cpu: bool,
    python: Option<&'a str>,
    dir: &'a Path,
    /// A bench frame for the real-descriptor pair.
    frame: Option<&'a GrayImage>,
    gpu_runs: (usize, usize),
    cpu_runs: (usize, usize),
    opencv_runs: usize,
}

/// The numbers of one descriptor pair, by key (`gpu.ratio`, `cpu.cross`, `cv1`, ...).
#[derive(Default)]
struct PairResult {
    ms: BTreeMap<String, Stat>,
    counts: BTreeMap<String, f64>,
    opencv: Option<Value>,
}

/// Times the matcher (k=2 + ratio 0.8, the `knnMatch` + Lowe test equivalent, and with
/// our cross-check added) on a random and a real descriptor pair, beside OpenCV.
fn bench_matching(a: MatchBenchInput) -> Result<MatchBench> {
    const RATIO: f32 = 0.8;
    let knn_ratio = MatchParams {
        ratio: Some(RATIO),
        cross_check: false,
        max_distance: None,
    };
    let with_cross = MatchParams {
        cross_check: true,
        ..knn_ratio
    };
    let mut notes = Vec::new();
    let mut pairs = vec![synthetic_pair(a.n)];
    match a.frame.map(|f| orb_pair(f, a.n)) {
        Some(Ok(p)) => pairs.push(p),
        Some(Err(why)) => notes.push(format!("no ORB descriptor pair: {why}")),
        None => {}
    }
    let mut matchers = Vec::new();
    if a.gpu {
        matchers.push(("gpu", Matcher::new(BackendChoice::Cuda)?, a.gpu_runs));
    }
    if a.cpu {
        matchers.push(("cpu", Matcher::new(BackendChoice::Cpu)?, a.cpu_runs));
    }
    let mut results: Vec<PairResult> = Vec::new();
    for (tag, pair) in pairs.iter().enumerate() {
        let mut r = PairResult::default();
        for (backend, m, (warmup, runs)) in matchers.iter_mut() {
            let (s, kept) = time_matcher(m, pair, &knn_ratio, *warmup, *runs)?;
            eprintln!("  match {} {backend}: {:.3} ms", pair.name, s.median);
            r.ms.insert(format!("{backend}.ratio"), s);
            r.counts.insert(format!("{backend}.kept"), kept as f64);
            let (s, _) = time_matcher(m, pair, &with_cross, *warmup, *runs)?;
            r.ms.insert(format!("{backend}.cross"), s);
        }
        if let Some(py) = a.python {
            match run_opencv_match(py, a.dir, tag, pair, a.opencv_runs, RATIO) {
                Ok(v) => {
                    let all = v["threads_all"].as_u64().unwrap_or(1);
                    let n = v["runs"].as_u64().unwrap_or(0) as usize;
                    for (key, threads) in [("cv1", 1u64), ("cvN", all)] {
                        let t = &v["results"][threads.to_string()]["knn2"];
                        if let (Some(median), Some(p90)) =
                            (t["median_ms"].as_f64(), t["p90_ms"].as_f64())
                        {
                            r.ms.insert(key.into(), Stat { median, p90, n });
                        }
                    }
                    if let Some(k) = v["counts"]["ratio"].as_f64() {
                        r.counts.insert("cv.kept".into(), k);
                    }
                    r.opencv = Some(v);
                }
                Err(why) => notes.push(format!("OpenCV rows omitted for {}: {why}", pair.name)),
            }
        }
        results.push(r);
    }

    let cv_threads = results
        .iter()
        .find_map(|r| r.opencv.as_ref()?["threads_all"].as_u64())
        .unwrap_or(0);
    let mut md = format!(
        "\n### Brute-force Hamming matching, median (p90) ms\n\n| |{}\n|---|{}\n",
        pairs
            .iter()
            .map(|p| format!(" {} |", p.name))
            .collect::<String>(),
        "---:|".repeat(pairs.len())
    );
    // One row: a cell per pair; left out when no pair has a value.
    let mut row = |label: &str, cell: &dyn Fn(&PairResult) -> Option<String>| {
        let cells: Vec<String> = results
            .iter()
            .map(|r| cell(r).unwrap_or_else(|| "—".into()))
            .collect();
        if cells.iter().any(|c| c != "—") {
            md.push_str(&format!("| {label} |"));
            for c in cells {
                md.push_str(&format!(" {c} |"));
            }
            md.push('\n');
        }
    };
    let time_rows = [
        (
            "gpu.ratio",
            "GPU, k=2 + ratio 0.8 (wall: copies + kernels)".to_string(),
        ),
        ("gpu.cross", "GPU, k=2 + ratio 0.8 + cross-check".into()),
        (
            "cpu.ratio",
            "CPU reference (1 thread), k=2 + ratio 0.8".into(),
        ),
        (
            "cpu.cross",
            "CPU reference (1 thread), k=2 + ratio 0.8 + cross-check".into(),
        ),
        (
            "cv1",
            "OpenCV BFMatcher(NORM_HAMMING).knnMatch k=2, 1 thread".into(),
        ),
        (
            "cvN",
            format!("OpenCV BFMatcher(NORM_HAMMING).knnMatch k=2, {cv_threads} threads"),
        ),
    ];
    for (key, label) in &time_rows {
        row(label, &|r| {
            let s = r.ms.get(*key)?;
            Some(format!("{} ({})", fmt_ms(s.median), fmt_ms(s.p90)))
        });
    }
    for (ours, label) in [
        ("gpu.ratio", "speed-up GPU vs OpenCV 1 thread"),
        ("cpu.ratio", "speed-up CPU vs OpenCV 1 thread"),
    ] {
        row(label, &|r| {
            let (a, b) = (r.ms.get(ours)?, r.ms.get("cv1")?);
            Some(format!("{:.1}x", b.median / a.median))
        });
    }
    row("queries kept by the ratio test: GPU / CPU / OpenCV", &|r| {
        let v: Vec<String> = ["gpu.kept", "cpu.kept", "cv.kept"]
            .iter()
            .map(|k| r.counts.get(*k).map_or("—".into(), |n| format!("{n:.0}")))
            .collect();
        Some(v.join(" / "))
    });
    md.push_str(
        "\nOurs: `matching::Matcher::match_into`, wall time of the call (upload, kernels, \
         download and the host filter on the GPU). OpenCV: the `knnMatch` call only (its ratio \
         test is counted untimed). The kept counts must agree: they depend only on the two \
         nearest distances, not on how ties are broken.\n",
    );
    for n in &notes {
        md.push_str(&format!("- note: {n}\n"));
    }
    let json = json!({
        "descriptors": a.n,
        "ratio": RATIO,
        "notes": notes,
        "pairs": pairs.iter().zip(&results).map(|(p, r)| json!({
            "name": p.name,
            "query": p.query.len(),
            "train": p.train.len(),
            "ms": r.ms.iter().map(|(k, s)| (k.clone(), s.json())).collect::<serde_json::Map<_, _>>(),
            "counts": r.counts,
            "opencv": r.opencv,
        })).collect::<Vec<_>>(),
    });
    Ok(MatchBench { markdown: md, json })
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
    fn date_is_iso() {
        let d = utc_date();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }
}
