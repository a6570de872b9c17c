//! The node's counters per input ([`Stats`]), the /diagnostics status built from them once
//! per period, and the rate limit of its log lines.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use r2r::diagnostic_msgs::msg::{DiagnosticStatus, KeyValue};

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
}

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

pub(super) fn diagnostic_status(node: &str, input: &str, s: &mut Stats) -> DiagnosticStatus {
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
    let kv = |k: &str, v: String| KeyValue {
        key: k.to_string(),
        value: v,
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
    }
    let (level, message) = level_and_message(s, window, fps);
    s.window.processed = 0;
    s.window.decode_errors = 0;
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

/// The status's level (0 OK, 1 WARN) and message: a GPU failure, then malformed frames of
/// the window (`window` seconds long), then a camera problem of the tracker.
fn level_and_message(s: &Stats, window: f64, fps: f64) -> (u8, String) {
    if s.count.gpu_failures > 0 {
        // WARN for as long as the input runs on the CPU after a GPU failure.
        (
            1u8,
            format!(
                "GPU failed, running on the CPU backend (same output): {}",
                s.gpu_failure
            ),
        )
    } else if s.window.decode_errors > 0 {
        (
            1u8,
            format!(
                "{} malformed frame(s) in the last {window:.1} s: {}",
                s.window.decode_errors, s.last_error
            ),
        )
    } else if let (true, Some(p)) = (s.track.enabled, &s.track.camera_problem) {
        (1u8, p.clone())
    } else if s.count.processed == 0 {
        (0u8, "waiting for images".to_string())
    } else {
        (0u8, format!("{fps:.1} fps"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_failure_is_a_warning_in_diagnostics() {
        let mut s = Stats {
            count: Counts {
                processed: 10,
                ..Default::default()
            },
            backend: "cpu".into(),
            ..Default::default()
        };
        let ok = diagnostic_status("/gpu_features", "", &mut s);
        assert_eq!(ok.level, 0);
        s.count.gpu_failures = 1;
        s.gpu_failure = "launching orb_describe: injected fault".into();
        let d = diagnostic_status("/gpu_features", "left", &mut s);
        assert_eq!(d.level, 1, "WARN");
        assert!(d.message.contains("CPU backend") && d.message.contains("injected"));
        assert!(d
            .values
            .iter()
            .any(|kv| kv.key == "gpu_failures" && kv.value == "1"));
        assert_eq!(d.name, "gpu_features: left");
    }

    #[test]
    fn the_latency_parts_of_the_window_are_in_diagnostics() {
        let mut s = Stats {
            count: Counts {
                processed: 100,
                ..Default::default()
            },
            ..Default::default()
        };
        for i in 0..100 {
            s.window.parts_ms[1].push(0.2 + i as f64 * 0.001);
            s.window.parts_ms[0].push(0.03);
        }
        s.window.parts_ms[1].push(5.0);
        let d = diagnostic_status("/gpu_features", "", &mut s);
        let get = |k: &str| {
            d.values
                .iter()
                .find(|kv| kv.key == k)
                .map(|kv| kv.value.clone())
                .unwrap_or_else(|| panic!("no {k}"))
        };
        assert_eq!(get("latency_parts_ms.handover_p50"), "0.030");
        assert_eq!(get("latency_parts_ms.pipeline_p50"), "0.250");
        assert_eq!(get("latency_parts_ms.pipeline_p99"), "0.299");
        assert_eq!(get("latency_parts_ms.rest_p50"), "NaN");
        // The window starts over.
        assert!(s.window.parts_ms.iter().all(|p| p.is_empty()));
    }
}
