//! The node's counters per input ([`Stats`]), the /diagnostics status built from them once
//! per period (its level by the rules of `diagnostics.*`: a dead camera is an ERROR, a rate
//! off the expected one or stamps far from the clock a WARN), and the rate limit of its log
//! lines.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use r2r::diagnostic_msgs::msg::{DiagnosticStatus, KeyValue};

use super::settings::DiagnosticsRules;

/// What the node knows of one input: totals since start, a window reset by each
/// diagnostics report, the whole run's latencies, the tracker's state.
#[derive(Default)]
pub(super) struct Stats {
    pub(super) count: Counts,
    pub(super) backend: String,
    pub(super) last_error: String,
    /// Why the GPU failed, once the input moved to the CPU backend (`Pipeline::gpu_failure`).
    pub(super) gpu_failure: String,
    pub(super) window: Window,
    pub(super) run: RunTimes,
    pub(super) track: TrackState,
    /// When the node started (the timeout's reference before the first frame).
    pub(super) started: Option<Instant>,
    /// When the last frame was received.
    pub(super) last_frame: Option<Instant>,
    /// (report instant, frames received by then) of the last [`RATE_REPORTS`] + 1 reports:
    /// the rate checked against `diagnostics.expected_hz` is over that span, as
    /// diagnostic_updater's FrequencyStatus counts over its window of updates.
    pub(super) rate_marks: std::collections::VecDeque<(Instant, u64)>,
    /// With `foxglove_annotations`: the topic published, or why there is none.
    pub(super) annotations: Option<Result<String, String>>,
}

/// How many diagnostics periods the checked rate spans.
pub(super) const RATE_REPORTS: usize = 5;

impl Stats {
    /// An input's stats from now on, its frames' instants kept in `trace`.
    pub(super) fn new(trace: crate::ros::trace::Trace) -> Self {
        Stats {
            window: Window {
                start: Some(Instant::now()),
                ..Window::default()
            },
            run: RunTimes {
                trace,
                ..RunTimes::default()
            },
            started: Some(Instant::now()),
            ..Stats::default()
        }
    }
}

/// Frame counts since start.
#[derive(Default)]
pub(super) struct Counts {
    pub(super) received: u64,
    pub(super) processed: u64,
    pub(super) dropped: u64,
    pub(super) decode_errors: u64,
    pub(super) process_errors: u64,
    /// 1 once the GPU failed and the input moved to the CPU backend.
    pub(super) gpu_failures: u64,
    /// Frames whose edge map was computed: only while someone subscribes to `edges`
    /// (`Pipeline::want_edges`).
    pub(super) edge_maps: u64,
}

/// The window since the last diagnostics report.
#[derive(Default)]
pub(super) struct Window {
    pub(super) processed: u64,
    pub(super) decode_errors: u64,
    pub(super) latency_ms: Vec<f64>,
    /// The latency's parts per frame of the window, in the order of [`PARTS`].
    pub(super) parts_ms: [Vec<f64>; 4],
    pub(super) stage_ms: BTreeMap<&'static str, (f64, u64)>,
    pub(super) start: Option<Instant>,
    /// The frames' stamps against the node's clock when received (s; positive: behind it),
    /// the largest in size of the window, with its sign.
    pub(super) stamp_lag_s: Option<f64>,
}

impl Window {
    /// A frame's stamp lag (clock - stamp, s) into the window's largest.
    pub(super) fn stamp_lag(&mut self, lag: f64) {
        if self.stamp_lag_s.map_or(true, |l| lag.abs() > l.abs()) {
            self.stamp_lag_s = Some(lag);
        }
    }
}

/// The whole run's latencies (for the summary at exit).
#[derive(Default)]
pub(super) struct RunTimes {
    pub(super) latency_ms: Vec<f64>,
    /// The latency's parts per frame, in the order of [`PARTS`].
    pub(super) parts_ms: [Vec<f64>; 4],
    /// Each frame's receive and keypoints-published instants, with `GF_TRACE_DIR`
    /// ([`crate::ros::trace`]).
    pub(super) trace: crate::ros::trace::Trace,
}

/// The tracker's state (`track.enabled`).
#[derive(Default)]
pub(super) struct TrackState {
    pub(super) enabled: bool,
    pub(super) tracks: usize,
    /// Stereo (the first input): the last pair's tracks in the second camera, and the
    /// frames tracked in both cameras so far.
    pub(super) right_tracks: usize,
    pub(super) stereo_pairs: u64,
    /// The tracking step's parts per frame, whole run (`tracks::TRACK_PARTS`).
    pub(super) ms: [Vec<f64>; super::tracks::TRACK_PARTS.len()],
    /// Why the last frame's tracks have no normalised coordinates (camera_info), or a
    /// stereo problem.
    pub(super) camera_problem: Option<String>,
    /// The camera model the last frame was tracked with and where it came from.
    pub(super) camera: super::cameras::CameraUse,
}

/// The parts of a frame's node latency: receive -> taken by the worker (`handover`), ->
/// features computed (`pipeline`), -> keypoints cloud built and published (`keypoints`), ->
/// the other outputs published (`rest`: edges, matches, tracks, debug image).
pub(super) const PARTS: [&str; 4] = ["handover", "pipeline", "keypoints", "rest"];

/// At most one log line per `period`, with the count of lines left out.
pub(super) struct RateLimit {
    pub(super) period: Duration,
    pub(super) last: Option<Instant>,
    pub(super) suppressed: u64,
}

impl RateLimit {
    pub(super) fn new(period: Duration) -> Self {
        RateLimit {
            period,
            last: None,
            suppressed: 0,
        }
    }
    /// Some(number suppressed since the last line) when a line may be written now.
    pub(super) fn allow(&mut self) -> Option<u64> {
        let now = Instant::now();
        match self.last {
            Some(t) if now - t < self.period => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

pub(super) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// ` NAME_p50=.. NAME_p99=..` for each part's values (ms; NaN entries, parts that did not
/// run in a frame, left out).
pub(super) fn p50_p99_fields(names: &[&str], values: &[Vec<f64>]) -> String {
    names
        .iter()
        .zip(values)
        .map(|(name, v)| {
            let mut v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
            v.sort_by(|a, b| a.total_cmp(b));
            format!(
                " {name}_p50={:.3} {name}_p99={:.3}",
                percentile(&v, 0.5),
                percentile(&v, 0.99)
            )
        })
        .collect()
}

pub(super) fn diagnostic_status(
    node: &str,
    input: &str,
    s: &mut Stats,
    rules: &DiagnosticsRules,
) -> DiagnosticStatus {
    let now = Instant::now();
    let window = s
        .window
        .start
        .map(|t| (now - t).as_secs_f64())
        .unwrap_or(0.0);
    let fps = if window > 0.0 {
        s.window.processed as f64 / window
    } else {
        0.0
    };
    let mut lat = std::mem::take(&mut s.window.latency_ms);
    lat.sort_by(|a, b| a.total_cmp(b));
    let mean = if lat.is_empty() {
        f64::NAN
    } else {
        lat.iter().sum::<f64>() / lat.len() as f64
    };
    let mut values = vec![
        kv("backend", s.backend.clone()),
        kv("fps", format!("{fps:.2}")),
        kv("frames_received", s.count.received.to_string()),
        kv("frames_processed", s.count.processed.to_string()),
        kv("frames_dropped", s.count.dropped.to_string()),
        kv("decode_errors", s.count.decode_errors.to_string()),
        kv("process_errors", s.count.process_errors.to_string()),
        kv("gpu_failures", s.count.gpu_failures.to_string()),
        kv("edge_maps", s.count.edge_maps.to_string()),
        kv("window_s", format!("{window:.3}")),
        kv("window_frames", lat.len().to_string()),
        kv("latency_ms_mean", format!("{mean:.3}")),
        kv("latency_ms_p50", format!("{:.3}", percentile(&lat, 0.5))),
        kv("latency_ms_p95", format!("{:.3}", percentile(&lat, 0.95))),
        kv("latency_ms_p99", format!("{:.3}", percentile(&lat, 0.99))),
        kv(
            "latency_ms_max",
            format!("{:.3}", lat.last().copied().unwrap_or(f64::NAN)),
        ),
    ];
    for (name, part) in PARTS.iter().zip(s.window.parts_ms.iter_mut()) {
        part.sort_by(|a, b| a.total_cmp(b));
        for (q, label) in [(0.5, "p50"), (0.99, "p99")] {
            values.push(kv(
                &format!("latency_parts_ms.{name}_{label}"),
                format!("{:.3}", percentile(part, q)),
            ));
        }
        part.clear();
    }
    for (stage, (sum, n)) in std::mem::take(&mut s.window.stage_ms) {
        values.push(kv(
            &format!("stage_ms.{stage}"),
            format!("{:.3}", sum / n.max(1) as f64),
        ));
    }
    push_output_values(s, &mut values);
    let since_frame = s.last_frame.map(|t| (now - t).as_secs_f64());
    values.push(kv(
        "since_last_frame_s",
        since_frame.map_or("never".into(), |t| format!("{t:.3}")),
    ));
    if let Some(lag) = s.window.stamp_lag_s {
        values.push(kv("stamp_lag_s", format!("{lag:.3}")));
    }
    if s.rate_marks.len() > RATE_REPORTS {
        s.rate_marks.pop_front();
    }
    s.rate_marks.push_back((now, s.count.received));
    let rate = match (s.rate_marks.front(), s.rate_marks.back()) {
        (Some(a), Some(b)) if b.0 > a.0 => Some((b.1 - a.1) as f64 / (b.0 - a.0).as_secs_f64()),
        _ => None,
    };
    if rules.expected_hz > 0.0 {
        values.push(kv("expected_hz", format!("{:.2}", rules.expected_hz)));
        values.push(kv(
            "rate_hz",
            rate.map_or("NaN".into(), |r| format!("{r:.2}")),
        ));
    }
    let up = s.started.map_or(0.0, |t| (now - t).as_secs_f64());
    let (level, message) = level_and_message(s, (window, fps, rate), (since_frame, up), rules);
    s.window.processed = 0;
    s.window.decode_errors = 0;
    s.window.stamp_lag_s = None;
    s.window.start = Some(now);
    let label = if input.is_empty() { "image" } else { input };
    DiagnosticStatus {
        level,
        name: format!("{}: {label}", node.trim_start_matches('/')),
        message,
        hardware_id: s.backend.clone(),
        values,
    }
}

fn kv(k: &str, v: String) -> KeyValue {
    KeyValue {
        key: k.to_string(),
        value: v,
    }
}

/// The tracker's values (with `track.enabled`) and `foxglove_annotations`' (when asked for).
fn push_output_values(s: &Stats, values: &mut Vec<KeyValue>) {
    if s.track.enabled {
        values.push(kv("tracks", s.track.tracks.to_string()));
        if s.track.stereo_pairs > 0 {
            values.push(kv("right_tracks", s.track.right_tracks.to_string()));
            values.push(kv("stereo_pairs", s.track.stereo_pairs.to_string()));
        }
        values.push(kv(
            "camera_info",
            s.track
                .camera_problem
                .clone()
                .unwrap_or_else(|| "ok".into()),
        ));
        values.push(kv("camera_model", s.track.camera.describe()));
    }
    match &s.annotations {
        None => {}
        Some(Ok(t)) => values.push(kv("foxglove_annotations", t.clone())),
        Some(Err(_)) => values.push(kv("foxglove_annotations", "unavailable".into())),
    }
}

/// diagnostic_msgs/DiagnosticStatus's levels.
const OK: u8 = 0;
const WARN: u8 = 1;
const ERROR: u8 = 2;

/// The status's level and message: every problem found, the worst first (ERROR: no frame for
/// `rules.timeout` after frames came; WARN: none since start for that long, a GPU failure,
/// malformed frames of the window, a camera problem of the tracker, a rate outside the
/// expected one's tolerance, stamps off the clock), joined by "; "; OK with the rate when
/// none. `window`: the window's length (s) and rate, and the rate received over the last
/// [`RATE_REPORTS`] periods; `since_frame`: seconds since the last frame, `up`: since start.
fn level_and_message(
    s: &Stats,
    (window, fps, rate): (f64, f64, Option<f64>),
    (since_frame, up): (Option<f64>, f64),
    rules: &DiagnosticsRules,
) -> (u8, String) {
    let mut found: Vec<(u8, String)> = Vec::new();
    match since_frame {
        Some(t) if rules.timeout > 0.0 && t > rules.timeout => found.push((
            ERROR,
            format!(
                "no image for {t:.1} s (diagnostics.timeout {} s): the camera stopped",
                rules.timeout
            ),
        )),
        None if rules.timeout > 0.0 && up > rules.timeout => {
            found.push((WARN, format!("no image received in {up:.1} s since start")))
        }
        _ => {}
    }
    if s.count.gpu_failures > 0 {
        // WARN for as long as the input runs on the CPU after a GPU failure.
        found.push((
            WARN,
            format!(
                "GPU failed, running on the CPU backend (same output): {}",
                s.gpu_failure
            ),
        ));
    }
    if s.window.decode_errors > 0 {
        found.push((
            WARN,
            format!(
                "{} malformed frame(s) in the last {window:.1} s: {}",
                s.window.decode_errors, s.last_error
            ),
        ));
    }
    if let (true, Some(p)) = (s.track.enabled, &s.track.camera_problem) {
        found.push((WARN, p.clone()));
    }
    if let Some(Err(why)) = &s.annotations {
        found.push((WARN, why.clone()));
    }
    // The rate once frames come (a stopped camera is the timeout's).
    let (lo, hi) = (
        rules.expected_hz * (1.0 - rules.hz_tolerance),
        rules.expected_hz * (1.0 + rules.hz_tolerance),
    );
    let off = rate.filter(|r| !(lo..=hi).contains(r));
    if let (true, Some(_), Some(r)) = (rules.expected_hz > 0.0, since_frame, off) {
        found.push((
            WARN,
            format!(
                "{r:.1} Hz received over the last {RATE_REPORTS} periods, expected {:.1} (+-{:.0} %)",
                rules.expected_hz,
                rules.hz_tolerance * 100.0
            ),
        ));
    }
    if let Some(lag) = s.window.stamp_lag_s {
        if rules.max_stamp_lag > 0.0 && lag.abs() > rules.max_stamp_lag {
            let how = if lag > 0.0 { "behind" } else { "ahead of" };
            found.push((
                WARN,
                format!(
                    "stamps {:.3} s {how} the node's clock (diagnostics.max_stamp_lag {} s; a bag played without use_sim_time?)",
                    lag.abs(),
                    rules.max_stamp_lag
                ),
            ));
        }
    }
    found.sort_by_key(|(level, _)| std::cmp::Reverse(*level));
    match found.first() {
        Some(&(level, _)) => {
            let text: Vec<&str> = found.iter().map(|(_, m)| m.as_str()).collect();
            (level, text.join("; "))
        }
        None if s.count.processed == 0 => (OK, "waiting for images".to_string()),
        None => (OK, format!("{fps:.1} fps")),
    }
}

#[cfg(test)]
mod tests;
