//! `gpu_features_load`: a ROS 2 load generator for a running `gpu_features_node` (r2r, so the
//! GPU machine needs no Python). It publishes crops of real photos on the node's inputs at a
//! fixed rate, times each frame's round trip to its `keypoints` cloud (by header stamp),
//! reads the node's counters and stage times from /diagnostics and, given the node's pid
//! and log, stops it and reads its latency summary. Two uses:
//!
//! - the node benchmark (scripts/node-gpu-bench.sh): one row per input with frames
//!   sent/answered/dropped, round trip p50/p99, node latency p50/p99 and per-stage times;
//!   its floor is the same load against [`relay`] (`--answer relayed`), a no-op node that
//!   republishes each Image, and the node's rows print that floor beside their own
//!   (`--floor RELAY.json`);
//! - the loopback soak (scripts/node-soak.sh): a mix of sizes and encodings with malformed
//!   frames for a long time, the node's RSS sampled, judged at the end (exit status 1 when
//!   memory grows, throughput drops or a frame is unaccounted for).

mod frames;
mod process;
pub mod relay;
mod report;
mod run;
mod schedule;
mod wiring;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

pub use report::{InputResult, LoadReport};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "gpu_features_load",
    about = "Publish camera frames to a running gpu_features_node and measure it (round trip, \
             drops, node latency and stages; with --node-pid also its memory)"
)]
pub struct LoadArgs {
    /// The node's `inputs` parameter, comma-separated (empty: its single `image` input)
    #[arg(long, value_delimiter = ',')]
    pub inputs: Vec<String>,
    /// The node's namespace (its topics are NAMESPACE/INPUT/image, ...)
    #[arg(long, default_value = "")]
    pub namespace: String,
    /// Frame sizes, comma-separated; several: frames cycle through them
    #[arg(long, value_delimiter = ',', default_value = "1920x1080")]
    pub sizes: Vec<String>,
    /// Encodings (mono8, bgr8, rgb8, bgra8, mono16), comma-separated; several: frames cycle
    #[arg(long, value_delimiter = ',', default_value = "mono8")]
    pub encodings: Vec<String>,
    /// Frames per second on each input
    #[arg(long, default_value_t = 30.0)]
    pub rate: f64,
    /// How long to publish: seconds, or with a unit (90s, 30m)
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// Photos (a file or a directory of .jpg/.png/.pgm) to crop the frames from
    #[arg(long, default_value = "bench-data")]
    pub images: PathBuf,
    /// Distinct frames per size and encoding (different crops), published in turn
    #[arg(long, default_value_t = 4)]
    pub distinct: usize,
    /// DX,DY: a moving camera instead of a new scene every frame: the --distinct frames pan
    /// across the first photo (centred on it), moving (DX, DY) px per frame, then the pan
    /// starts over (one jump per --distinct frames); e.g. `--pan 3,2 --distinct 60`
    #[arg(long, value_name = "DX,DY")]
    pub pan: Option<String>,
    /// QoS reliability of the image publishers: best_effort or reliable
    #[arg(long, default_value = "reliable")]
    pub reliability: String,
    /// Share of malformed frames (short buffer, wrong step, unknown encoding), percent
    #[arg(long, default_value_t = 0.0)]
    pub malformed_percent: f64,
    /// Publish a `camera_info` (plumb_bob, no distortion, focal length width / 1.6, the
    /// centre in the middle) with each frame, just before its image and with its stamp, as
    /// a camera driver does: the tracker then lifts its points and publishes `feature`
    #[arg(long)]
    pub camera_info: bool,
    /// The node's process id: its RSS is sampled, and it is stopped (SIGINT) at the end
    #[arg(long)]
    pub node_pid: Option<u32>,
    /// The node's stdout log: its shutdown summary gives the node latency percentiles
    #[arg(long)]
    pub node_log: Option<PathBuf>,
    /// RSS sampling period (with --node-pid)
    #[arg(long, default_value = "10s")]
    pub sample_every: String,
    /// Judge the run as a soak: fail on RSS growth beyond the warm-up maximum + this (MiB),
    /// a minute's throughput under half the first minute's, or a frame not accounted for
    #[arg(long)]
    pub soak_rss_growth_mib: Option<f64>,
    /// A label for the report's rows (e.g. "1080p mono8 30 Hz")
    #[arg(long, default_value = "")]
    pub label: String,
    /// Write every number as JSON here
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Append the report's markdown rows here
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// What answers a frame: `keypoints` (gpu_features_node's cloud), `tracks` (its tracks
    /// cloud, with track.enabled), `feature` (its `sensor_msgs/PointCloud` for VINS, with
    /// track.enabled: the round trip of a VINS front-end, and nobody listens to
    /// `keypoints`), `edges` (its edge map: the round trip of an edge consumer, nobody
    /// listening to `keypoints`) or `relayed` (gpu_features_relay's copy of the Image: the
    /// transport floor). A comma-separated list names one per input, the last repeated
    /// (`feature,tracks` for a stereo pair: the first camera's `feature` carries both, the
    /// second camera answers on its `tracks`)
    #[arg(long, default_value = "keypoints")]
    pub answer: String,
    /// A relay run's --json from the same machine and run: its round trip is printed beside
    /// this run's as the floor, with the difference
    #[arg(long)]
    pub floor: Option<PathBuf>,
}

/// The answers `--answer` may name.
const ANSWERS: [&str; 5] = ["keypoints", "tracks", "feature", "relayed", "edges"];

impl LoadArgs {
    /// The answer topic of input `k` (`--answer`'s k-th entry, or its last).
    fn answer(&self, k: usize) -> &str {
        let mut all = self.answer.split(',').map(str::trim);
        let last = all.clone().next_back().unwrap_or("keypoints");
        all.nth(k).unwrap_or(last)
    }
    /// `--answer`'s entries, checked.
    fn check_answers(&self) -> Result<(), String> {
        match self
            .answer
            .split(',')
            .map(str::trim)
            .find(|a| !ANSWERS.contains(a))
        {
            Some(a) => Err(format!(
                "answer {a:?}: one of {ANSWERS:?} (a comma-separated list: one per input)"
            )),
            None => Ok(()),
        }
    }
    fn duration(&self) -> Result<Duration, String> {
        crate::config::parse_duration(&self.duration)
    }
    fn sizes(&self) -> Result<Vec<(usize, usize)>, String> {
        self.sizes
            .iter()
            .map(|s| {
                let (w, h) = s
                    .split_once('x')
                    .ok_or_else(|| format!("size {s:?}: expected WxH"))?;
                let p = |v: &str| v.parse::<usize>().ok().filter(|&n| n > 0 && n <= 16384);
                match (p(w), p(h)) {
                    (Some(w), Some(h)) => Ok((w, h)),
                    _ => Err(format!("size {s:?}: expected WxH with 1..16384 each")),
                }
            })
            .collect()
    }
    /// `--pan DX,DY` as pixels per frame.
    fn pan(&self) -> Result<Option<(usize, usize)>, String> {
        let Some(s) = &self.pan else {
            return Ok(None);
        };
        let p = |v: &str| v.trim().parse::<usize>().ok().filter(|&n| n <= 1000);
        match s.split_once(',').map(|(a, b)| (p(a), p(b))) {
            Some((Some(dx), Some(dy))) => Ok(Some((dx, dy))),
            _ => Err(format!(
                "pan {s:?}: expected DX,DY in pixels per frame, 0..1000 each"
            )),
        }
    }
}

/// Entry point of `gpu_features_load`; returns the exit code.
pub fn main() -> i32 {
    let args = LoadArgs::parse();
    match run::run(&args) {
        Ok(rep) => {
            print!("{}", rep.to_markdown());
            if rep.failures.is_empty() {
                0
            } else {
                eprintln!("gpu_features_load: FAIL: {}", rep.failures.join("; "));
                1
            }
        }
        Err(e) => {
            eprintln!("gpu_features_load: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LoadArgs;
    use clap::Parser;

    #[test]
    fn pan_takes_two_steps_and_refuses_the_rest() {
        let pan = |v: &str| {
            let arg = format!("--pan={v}");
            LoadArgs::try_parse_from(["load", arg.as_str()])
                .unwrap()
                .pan()
        };
        assert_eq!(pan("3,2"), Ok(Some((3, 2))));
        assert_eq!(pan(" 0 , 5"), Ok(Some((0, 5))));
        for bad in ["3", "3,2,1", "-1,2", "a,b", "2000,1"] {
            assert!(pan(bad).is_err(), "{bad}");
        }
        assert_eq!(LoadArgs::try_parse_from(["load"]).unwrap().pan(), Ok(None));
    }

    #[test]
    fn answers_name_one_topic_per_input_the_last_repeated() {
        let args = |v: &str| {
            let arg = format!("--answer={v}");
            LoadArgs::try_parse_from(["load", arg.as_str()]).unwrap()
        };
        let a = args("feature,tracks");
        assert_eq!(a.check_answers(), Ok(()));
        assert_eq!(
            (a.answer(0), a.answer(1), a.answer(2)),
            ("feature", "tracks", "tracks")
        );
        let a = LoadArgs::try_parse_from(["load"]).unwrap();
        assert_eq!((a.answer(0), a.answer(3)), ("keypoints", "keypoints"));
        let a = args(" edges ");
        assert_eq!((a.check_answers(), a.answer(1)), (Ok(()), "edges"));
        for bad in ["features", "feature,", "keypoints,nothing"] {
            let e = args(bad).check_answers().unwrap_err();
            assert!(e.contains("answer"), "{bad}: {e}");
        }
    }
}
