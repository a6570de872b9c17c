//! `gpu_features replay` on the command line: its arguments and entry point.

use std::path::PathBuf;

use super::{run, ReplayOptions};
use crate::camera::vins::VinsConfig;
use crate::error::{Error, Result};
use crate::eval::HomographyPair;
use crate::pipeline::BackendChoice;
use crate::Config;

/// Command-line arguments of `gpu_features replay` (flattened into the binary's clap tree).
#[derive(clap::Args, Clone, Debug)]
pub struct ReplayArgs {
    /// YAML config (as for `detect`; see config/default.yaml); defaults when absent.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override one setting, e.g. `--set canny.low_threshold=30` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// auto: CUDA when usable, else CPU (says why on stderr).
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Image topic to replay (repeatable); default: every Image / CompressedImage topic.
    #[arg(long = "topic", value_name = "T")]
    pub topics: Vec<String>,
    /// Output directory: out.mcap, report.md, report.json and the plots.
    #[arg(long)]
    pub out: PathBuf,
    /// Stop after N frames.
    #[arg(long, value_name = "N")]
    pub max_frames: Option<usize>,
    /// No progress bar (it is only drawn on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Image pair with a ground-truth homography for the repeatability section:
    /// `[NAME=]IMG1,IMG2,H` (e.g. tests/data/graf1.png,tests/data/graf3.png,tests/data/H1to3p.xml).
    #[arg(long, value_name = "[NAME=]IMG1,IMG2,H")]
    pub homography: Vec<HomographyPair>,
    /// JSON written by scripts/eval_homography.py, shown beside our numbers.
    #[arg(long, value_name = "FILE")]
    pub opencv_eval: Option<PathBuf>,
    /// A VINS-Fusion config (what vins_node is started with): the cameras come from its
    /// camodocal files and the tracker runs as its FeatureTracker (max_cnt, min_dist,
    /// flow_back; track.enabled). `--set` still overrides.
    #[arg(long, value_name = "FILE")]
    pub vins_config: Option<PathBuf>,
    /// With tracking: also write T/debug_image, VINS-Fusion's tracking picture (bgr8), as the
    /// node publishes it on debug_image.
    #[arg(long)]
    pub debug_image: bool,
    /// A bag directory (with metadata.yaml) or one .mcap / .db3 file.
    pub bag: PathBuf,
}

impl ReplayArgs {
    pub fn options(&self) -> Result<ReplayOptions> {
        let mut config = match &self.config {
            Some(p) => Config::from_file(p)?,
            None => Config::default(),
        };
        let vins = match &self.vins_config {
            Some(p) => {
                let v = VinsConfig::load(p).map_err(Error::Config)?;
                v.apply(&mut config.track);
                Some(v)
            }
            None => None,
        };
        for s in &self.set {
            let (k, v) = s
                .split_once('=')
                .ok_or_else(|| Error::Config(format!("--set {s:?}: expected KEY=VALUE")))?;
            config = config.with_value(k.trim(), v.trim())?;
        }
        Ok(ReplayOptions {
            bag: self.bag.clone(),
            out_dir: self.out.clone(),
            topics: self.topics.clone(),
            config,
            backend: self.backend,
            progress: !self.no_progress,
            max_frames: self.max_frames,
            homography: self.homography.clone(),
            opencv_eval: self.opencv_eval.clone(),
            vins,
            debug_image: self.debug_image,
        })
    }
}

/// `gpu_features replay`: runs and prints a one-line summary; errors go to stderr.
pub fn main(args: &ReplayArgs) -> std::process::ExitCode {
    let result = args.options().and_then(|o| run(&o));
    match result {
        Ok(s) => {
            let topics: Vec<String> = s
                .per_topic
                .iter()
                .map(|(t, n)| format!("{t}: {n}"))
                .collect();
            println!(
                "replayed {} frames ({}; {} skipped) on {} in {:.1} s -> {}, {}",
                s.frames,
                topics.join(", "),
                s.skipped,
                s.backend,
                s.wall_s,
                s.out_bag.display(),
                s.report_md.display()
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
