//! The bench's command line (`BenchArgs`, frame sizes) and its summary statistic.

#[allow(unused_imports)]
use super::*;

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
    /// Python with kornia and/or cuCIM (and torch/cupy) for the GPU peer rows, run beside the
    /// GPU rows; `none` skips them; libraries that are missing are named in a note.
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    pub peers: String,
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
    /// Draw PNG charts of the stage times per size into this directory (created) and link
    /// them from the markdown (relative to the --markdown file when DIR is under its folder).
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Throughput mode: for each count N (comma-separated, 1..=64, e.g. `1,2,4,8`) run N
    /// pipelines at once, one thread and one CUDA stream each, on distinct frames of each
    /// --sizes, and report aggregate frames/s and per-frame latency p50/p99. Replaces the
    /// stage tables (the OpenCV, matched-config and matcher options are then ignored).
    #[arg(long, value_delimiter = ',', value_name = "N,...", value_parser = parse_streams)]
    pub streams: Vec<usize>,
    /// Time the pieces of a frame's way to the GPU instead (copy into pinned memory on 1..N
    /// threads, write-combined or plain; uploads; the copy overlapped with the upload in
    /// pieces, and Canny's floor: that upload, then a packed edge map back and unpacked) for
    /// 720p and 1080p mono8, 1080p bgr8 and 4K mono8; `--frames` calls per row. Needs a GPU.
    #[arg(long)]
    pub input_path: bool,
    /// Pace the GPU rows: each frame starts 1/HZ s after the previous one (e.g. 60, a
    /// camera's rate), so that the GPU and the CPU idle between frames as they do in the
    /// node, and wakes the copy crew at its start as the node does (`cuda.prewake_us`;
    /// `--set cuda.prewake_us=0`: without); without it frames run back to back
    #[arg(long, value_name = "HZ")]
    pub pace: Option<f64>,
    /// The stage rows' frames as messages of this encoding: mono8, or bgr8 (each gray value
    /// in all three channels, which decodes back to the same gray frame: the same features,
    /// three times the bytes to bring to the GPU, as a color camera's).
    #[arg(long, default_value = "mono8", value_parser = parse_encoding)]
    pub encoding: Encoding,
    /// Feature-tracker mode (VINS-Fusion's front-end, `track.*`): at each size (default
    /// 752x480,1280x720,1920x1080), 150 and 1000 features, the tracker per frame on camera
    /// pans over the photos: ours on the GPU (`--frames` timed after `--warmup`) and the CPU
    /// reference (`--cpu-frames`), beside OpenCV's VINS pipeline on 1 and all threads
    /// (scripts/bench_vins_opencv.py with `--opencv`'s Python). Replaces the stage tables.
    #[arg(long, value_name = "SIZES", num_args = 0..=1, value_delimiter = ',',
          default_missing_values = TRACK_SIZES)]
    pub tracks: Option<Vec<Size>>,
}

/// `--tracks` without sizes: EuRoC's, 720p, 1080p.
const TRACK_SIZES: [&str; 3] = ["752x480", "1280x720", "1920x1080"];

/// `--encoding`: mono8 or bgr8.
pub(super) fn parse_encoding(s: &str) -> std::result::Result<Encoding, String> {
    match Encoding::parse(s.trim()) {
        Ok(e @ (Encoding::Mono8 | Encoding::Bgr8)) => Ok(e),
        _ => Err(format!("{s:?}: expected mono8 or bgr8")),
    }
}

/// One `--streams` count: a whole number of pipelines, 1..=64.
pub(super) fn parse_streams(s: &str) -> std::result::Result<usize, String> {
    s.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=64).contains(n))
        .ok_or_else(|| format!("{s:?}: expected a pipeline count 1..=64"))
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

    pub(super) fn json(&self) -> Value {
        json!({"median_ms": self.median, "p90_ms": self.p90, "n": self.n})
    }
}
