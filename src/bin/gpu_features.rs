//! `gpu_features`: run the pipeline on image files (`detect`), print the effective
//! configuration (`config`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use gpu_features::camera::CameraModel;
use gpu_features::image::{load_view_owned, save_gray_png, save_rgb_png};
use gpu_features::output::{csv, overlay};
use gpu_features::track::{TrackParams, Tracker};
use gpu_features::{BackendChoice, Config, Error, GrayImage, Pipeline};

#[derive(Parser)]
#[command(
    name = "gpu_features",
    version,
    about = "ORB-style FAST+Harris corners and Canny edges, OpenCV-exact, on CPU or CUDA"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct PipelineArgs {
    /// YAML config (see config/default.yaml); defaults when absent.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting, e.g. `--set canny.low_threshold=30` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// auto: CUDA when usable, else CPU (says why on stderr).
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
}

/// With `track.enabled` the images are one sequence, in the order given.
#[derive(Args, Clone)]
struct TrackArgs {
    /// Frame rate of the sequence (the tracks' velocities are per second).
    #[arg(long, default_value_t = 30.0)]
    fps: f64,
    /// Camera calibration YAML (camera_calibration's format) for normalised coordinates.
    #[arg(long)]
    camera: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Detect keypoints and edges in image files (PNG/JPEG/PGM).
    Detect {
        #[command(flatten)]
        pipeline: PipelineArgs,
        /// Output directory (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// Skip the overlay picture.
        #[arg(long)]
        no_overlay: bool,
        #[command(flatten)]
        track: TrackArgs,
        #[arg(required = true)]
        images: Vec<PathBuf>,
    },
    /// Replay a ROS 2 bag (MCAP or sqlite3) through the pipeline: DIR/out.mcap + report.
    Replay(gpu_features::replay::ReplayArgs),
    /// Time every stage and the whole pipeline per frame size on real photos, beside the CPU
    /// reference and OpenCV (when python3 has cv2); prints a markdown table with ratios.
    Bench(gpu_features::bench::BenchArgs),
    /// Run the pipeline at a camera's rate for a long time on a mix of sizes, encodings and
    /// malformed frames, sampling RSS; non-zero exit on growth, slowdown or a miscount.
    Soak(SoakArgs),
    /// Write the copy of a VINS-Fusion config to run VINS with gpu_features as its tracker:
    /// the image topics pointed at a topic nobody publishes (else VINS also tracks the images
    /// itself and two feature sets with colliding ids reach its estimator), everything else
    /// kept byte for byte. Written beside the input (the camera files stay found); prints
    /// the node's matching settings.
    VinsConfig {
        /// The config VINS-Fusion's vins_node is started with.
        config: PathBuf,
        /// Where to write the copy (default: NAME_gpu_features.yaml beside CONFIG).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print the effective configuration as YAML.
    Config {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
}

#[derive(Args)]
struct SoakArgs {
    /// How long: seconds, or with a unit (90s, 30m, 1h).
    #[arg(long, default_value = "30m", value_parser = gpu_features::config::parse_duration)]
    duration: std::time::Duration,
    /// Target frame rate, Hz.
    #[arg(long, default_value_t = 30.0)]
    rate: f64,
    /// Share of malformed frames, percent.
    #[arg(long, default_value_t = 1.0)]
    malformed_percent: f64,
    /// Fail when RSS after the warm-up exceeds the warm-up maximum by this much (MiB).
    #[arg(long, default_value_t = 64.0)]
    rss_growth_mib: f64,
    /// Fail when a minute's throughput is below this fraction of the first minute's.
    #[arg(long, default_value_t = 0.5)]
    min_throughput: f64,
    #[arg(long, default_value = "cpu")]
    backend: BackendChoice,
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Also write the Markdown report here.
    #[arg(long)]
    report: Option<PathBuf>,
}

fn vins_config(config: &Path, out: Option<&Path>) -> ExitCode {
    use gpu_features::camera::vins::{for_external_tracker, VinsConfig};
    let v = match VinsConfig::load(config) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if v.mono {
        // VINS-Mono's estimator never reads images: nothing to point elsewhere.
        println!(
            "{}: a VINS-Mono config (its estimator reads only the feature and restart \
             topics): leave feature_tracker out of your launch file and run the node on \
             its image topic with -p vins_config:={} -r feature:=/feature_tracker/feature \
             -r restart:=/feature_tracker/restart (the config sets track.frontend: \
             vins_mono and feature_format: vins_mono)",
            config.display(),
            config.display()
        );
        return ExitCode::SUCCESS;
    }
    let run = || -> Result<PathBuf, String> {
        let text =
            std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
        let out = match out {
            Some(p) => p.to_path_buf(),
            None => {
                let stem = config
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("vins");
                config.with_file_name(format!("{stem}_gpu_features.yaml"))
            }
        };
        std::fs::write(&out, for_external_tracker(&text))
            .map_err(|e| format!("{}: {e}", out.display()))?;
        Ok(out)
    };
    match run() {
        Ok(out) => {
            println!(
                "wrote {}: image topics pointed nowhere, all else kept",
                out.display()
            );
            let mut t = gpu_features::config::TrackConfig::default();
            v.apply(&mut t);
            let topics = match &v.image_topics[..] {
                [] => "your image topic".to_string(),
                [one] => one.clone(),
                [first, second, ..] if t.stereo => format!("{first} and {second} (two inputs)"),
                [first, ..] => first.clone(),
            };
            println!(
                "run the node on {topics} with -p vins_config:={}, or by hand with \\\n  \
                 -p track.enabled:=true -p track.max_features:={} -p track.min_distance:={} \\\n  \
                 -p track.flow_back:={} -p track.ransac_threshold:=0.0 -p track.feature_every:={}{} \\\n  \
                 and camera_info; with -r feature:=/feature_tracker/feature -r restart:=/vins_restart \
                 (README, \"Replace VINS-Fusion's feature_tracker\")",
                v.path.display(),
                t.max_features,
                t.min_distance,
                t.flow_back,
                t.feature_every,
                if t.stereo { " -p track.stereo:=true" } else { "" },
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn soak(args: &SoakArgs) -> ExitCode {
    let opts = gpu_features::soak::SoakOptions {
        duration: args.duration,
        rate_hz: args.rate,
        malformed_percent: args.malformed_percent,
        rss_growth_limit_mib: args.rss_growth_mib,
        min_throughput_ratio: args.min_throughput,
        backend: args.backend,
        seed: args.seed,
        ..Default::default()
    };
    let rep = match gpu_features::soak::run(&opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let md = rep.to_markdown();
    print!("{md}");
    if let Some(p) = &args.report {
        if let Err(e) = std::fs::write(p, &md) {
            eprintln!("error: {}: {e}", p.display());
            return ExitCode::from(2);
        }
    }
    if rep.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        for f in &rep.failures {
            eprintln!("soak failed: {f}");
        }
        ExitCode::FAILURE
    }
}

fn load_config(path: Option<&Path>, sets: &[String]) -> Result<Config, Error> {
    let mut cfg = match path {
        Some(p) => Config::from_file(p)?,
        None => Config::default(),
    };
    for s in sets {
        cfg = cfg.with_set(s)?;
    }
    Ok(cfg)
}

fn make_pipeline(args: &PipelineArgs) -> Result<Pipeline, Error> {
    let cfg = load_config(args.config.as_deref(), &args.set)?;
    let pipeline = Pipeline::new(cfg, args.backend)?;
    if let Some(why) = pipeline.fallback_reason() {
        eprintln!("note: using the CPU backend ({why})");
    }
    Ok(pipeline)
}

/// The sequence's tracker, when `track.enabled`.
struct SequenceTracker {
    tracker: Tracker,
    camera: Option<CameraModel>,
    frame: usize,
    fps: f64,
}

fn detect_one(
    pipeline: &mut Pipeline,
    image: &Path,
    out: &Path,
    overlay_on: bool,
    tracking: Option<&mut SequenceTracker>,
) -> Result<usize, Error> {
    let frame = load_view_owned(image)?;
    let view = frame.view()?;
    let features = pipeline.process(&view)?;
    if let Some(t) = tracking {
        let stamp = t.frame as f64 / t.fps;
        t.frame += 1;
        let tracks = t.tracker.track_view(&view, stamp, t.camera.as_ref());
        let stem = image
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "image".into());
        let path = out.join(format!("{stem}.tracks.csv"));
        std::fs::write(&path, gpu_features::output::tracks::csv(tracks))
            .map_err(|e| Error::io(&path, e))?;
    }
    let stem = image
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    let csv_path = out.join(format!("{stem}.keypoints.csv"));
    let descriptors = features.descriptors_for(pipeline.config());
    std::fs::write(&csv_path, csv::to_string(&features.keypoints, descriptors))
        .map_err(|e| Error::io(&csv_path, e))?;
    if let Some(edges) = &features.edges {
        save_gray_png(edges, &out.join(format!("{stem}.edges.png")))?;
    }
    if overlay_on {
        let mut gray = GrayImage::default();
        gpu_features::cpu::decode::decode(&view, &mut gray);
        let pic = overlay::render(&gray, &features);
        let path = out.join(format!("{stem}.overlay.png"));
        save_rgb_png(&pic.data, pic.width, pic.height, &path)?;
    }
    Ok(features.keypoints.len())
}

fn detect(
    args: &PipelineArgs,
    out: &Path,
    no_overlay: bool,
    track: &TrackArgs,
    images: &[PathBuf],
) -> ExitCode {
    let mut pipeline = match make_pipeline(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut tracking = None;
    if pipeline.config().track.enabled {
        if !(track.fps.is_finite() && track.fps > 0.0) {
            eprintln!("error: --fps {} is not a positive frame rate", track.fps);
            return ExitCode::from(2);
        }
        let camera = match &track.camera {
            None => None,
            Some(p) => match std::fs::read_to_string(p)
                .map_err(|e| e.to_string())
                .and_then(|t| gpu_features::camera::from_calibration_yaml(&t))
            {
                Ok(c) => Some(c),
                Err(e) => {
                    eprintln!("error: {}: {e}", p.display());
                    return ExitCode::from(2);
                }
            },
        };
        let params = TrackParams::from_config(&pipeline.config().track);
        let (tracker, why) = Tracker::for_pipeline(&pipeline, params);
        if let Some(why) = why {
            eprintln!("note: tracker on the CPU: {why}");
        }
        tracking = Some(SequenceTracker {
            tracker,
            camera,
            frame: 0,
            fps: track.fps,
        });
    }
    if let Err(e) = std::fs::create_dir_all(out) {
        eprintln!("error: {}: {e}", out.display());
        return ExitCode::from(2);
    }
    let mut failed = 0;
    for image in images {
        match detect_one(&mut pipeline, image, out, !no_overlay, tracking.as_mut()) {
            Ok(n) => println!(
                "{}: {n} keypoints ({} backend)",
                image.display(),
                pipeline.backend().name()
            ),
            Err(e) => {
                eprintln!("error: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        eprintln!("{failed} of {} inputs failed", images.len());
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Detect {
            pipeline,
            out,
            no_overlay,
            track,
            images,
        } => detect(pipeline, out, *no_overlay, track, images),
        Command::Replay(args) => gpu_features::replay::main(args),
        Command::Bench(args) => match gpu_features::bench::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Soak(args) => soak(args),
        Command::VinsConfig { config, out } => vins_config(config, out.as_deref()),
        Command::Config { config, set } => match load_config(config.as_deref(), set) {
            Ok(cfg) => {
                print!("{}", cfg.to_yaml());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
    }
}
