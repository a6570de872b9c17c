//! What the load generator measured, its soak verdict, and how it is printed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::Dist;

/// One input of the node.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InputResult {
    /// The node's input name ("" for its single `image` input).
    pub input: String,
    pub sent: u64,
    pub sent_malformed: u64,
    /// Frames skipped because the publisher was more than a period behind their due time
    /// (it could not keep the rate; the others stay on the common schedule).
    pub late: u64,
    /// Warm-up frames published before the timed run, and their answers.
    pub warmup_sent: u64,
    pub warmup_answered: u64,
    /// Valid frames whose keypoints came back.
    pub answered: u64,
    /// Round trip publish -> keypoints received, ms.
    pub round_trip_ms: Dist,
    /// The node's counters (last /diagnostics status of this input).
    pub node: BTreeMap<String, String>,
    /// Mean ms per stage over the run, weighted by each diagnostics window's frames.
    pub stage_ms: BTreeMap<String, f64>,
    /// From the node's shutdown summary: p50, p95, p99, max of receive -> publish, ms.
    pub node_latency_ms: BTreeMap<String, f64>,
    /// Frames answered per minute of the run.
    pub answered_per_minute: Vec<u64>,
    /// Mean points of the answered clouds (the keypoints published per frame, or the
    /// relay's `--points`); none when the answers are images.
    #[serde(default)]
    pub answer_points: Option<f64>,
    /// The same input's transport floor (a relay run of the same machine, --floor).
    pub floor: Option<Floor>,
}

/// A relay run's result for one input: what the transport alone costs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Floor {
    pub sent: u64,
    pub answered: u64,
    pub round_trip_ms: Dist,
}

/// The floor per input name from a relay run's --json.
pub fn read_floor(path: &std::path::Path) -> Result<BTreeMap<String, Floor>, String> {
    #[derive(Deserialize)]
    struct Run {
        inputs: Vec<Row>,
    }
    #[derive(Deserialize)]
    struct Row {
        input: String,
        #[serde(flatten)]
        floor: Floor,
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let run: Run = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a gpu_features_load --json: {e}", path.display()))?;
    Ok(run.inputs.into_iter().map(|r| (r.input, r.floor)).collect())
}

impl InputResult {
    fn node_count(&self, key: &str) -> Option<u64> {
        self.node.get(key).and_then(|v| v.parse().ok())
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RssSample {
    pub seconds: f64,
    pub rss_kib: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LoadReport {
    pub label: String,
    pub seconds: f64,
    pub rate_hz: f64,
    pub sizes: Vec<String>,
    pub encodings: Vec<String>,
    pub inputs: Vec<InputResult>,
    pub node_rss: Vec<RssSample>,
    /// CPU seconds (user + system) of the node and of the load generator over the run
    /// (with --node-pid; the load's own always on Linux).
    pub node_cpu_s: Option<f64>,
    pub load_cpu_s: Option<f64>,
    pub failures: Vec<String>,
}

/// `key=value` pairs of the node's `gpu_features_node summary input="NAME" ...` line (or
/// the relay's `gpu_features_relay summary ...`) for
/// `input` (the latency part: `latency_ms p50=.. p95=.. p99=.. max=..`).
pub fn parse_node_summary(log: &str, input: &str) -> Option<BTreeMap<String, f64>> {
    let tag = format!("input={input:?} ");
    let line = log.lines().find(|l| {
        (l.contains("gpu_features_node summary") || l.contains("gpu_features_relay summary"))
            && l.contains(&tag)
    })?;
    let lat = line.split_once("latency_ms ")?.1;
    Some(
        lat.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
            .collect(),
    )
}

impl LoadReport {
    /// The soak verdict: node RSS within `growth_mib` of its warm-up (first 10 %) maximum,
    /// every minute's answered frames at least half the first full minute's, and every
    /// frame accounted for by the node's counters.
    pub fn judge_soak(&mut self, growth_mib: f64) {
        let n_warm = self
            .node_rss
            .iter()
            .take_while(|s| s.seconds <= self.seconds * 0.1)
            .count()
            .max(1)
            .min(self.node_rss.len());
        if let Some(base) = self.node_rss[..n_warm].iter().map(|s| s.rss_kib).max() {
            let bound = base + (growth_mib * 1024.0) as u64;
            if let Some(s) = self.node_rss.iter().find(|s| s.rss_kib > bound) {
                self.failures.push(format!(
                    "node RSS {:.1} MiB at {:.0} s exceeds the warm-up maximum {:.1} MiB + {growth_mib} MiB",
                    s.rss_kib as f64 / 1024.0,
                    s.seconds,
                    base as f64 / 1024.0
                ));
            }
        } else {
            self.failures
                .push("no node RSS samples (--node-pid)".into());
        }
        for i in &self.inputs {
            let name = if i.input.is_empty() {
                "image"
            } else {
                &i.input
            };
            // the last minute is partial
            let full = &i.answered_per_minute[..i.answered_per_minute.len().saturating_sub(1)];
            if let Some(&first) = full.first() {
                for (m, &n) in full.iter().enumerate().skip(1) {
                    if n * 2 < first {
                        self.failures.push(format!(
                            "{name}: minute {} answered {n} frames, under half of the first minute's {first}",
                            m + 1
                        ));
                    }
                }
            }
            let count = |k: &str| i.node_count(k);
            let (Some(recv), Some(proc_), Some(drop), Some(dec), Some(perr)) = (
                count("frames_received"),
                count("frames_processed"),
                count("frames_dropped"),
                count("decode_errors"),
                count("process_errors"),
            ) else {
                self.failures
                    .push(format!("{name}: no node counters in /diagnostics"));
                continue;
            };
            let mut why = Vec::new();
            // Warm-up frames published before discovery completed may be lost; the timed
            // ones may not.
            let received_timed = recv.saturating_sub(i.warmup_answered);
            if recv < i.sent + i.warmup_answered || recv > i.sent + i.warmup_sent {
                why.push(format!(
                    "sent {} but the node received {received_timed} of them",
                    i.sent
                ));
            }
            if recv != proc_ + drop + dec + perr {
                why.push(format!(
                    "received {recv} != processed {proc_} + dropped {drop} + decode errors {dec} + process errors {perr}"
                ));
            }
            if perr > 0 {
                why.push(format!("{perr} process errors"));
            }
            if dec > i.sent_malformed || dec + drop < i.sent_malformed {
                why.push(format!(
                    "{} malformed sent, {dec} decode errors, {drop} dropped unseen",
                    i.sent_malformed
                ));
            }
            if i.answered + i.warmup_answered != proc_ {
                why.push(format!(
                    "processed {proc_} but {} (+{} warm-up) answered",
                    i.answered, i.warmup_answered
                ));
            }
            if !why.is_empty() {
                self.failures.push(format!("{name}: {}", why.join(", ")));
            }
        }
    }

    /// Markdown: one row per input, then the node's RSS curve when sampled.
    pub fn to_markdown(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\n{} — {} @ {:.0} Hz per input, {:.0} s, {} input(s)\n",
            if self.label.is_empty() {
                "load"
            } else {
                &self.label
            },
            self.sizes.join("+") + " " + &self.encodings.join("+"),
            self.rate_hz,
            self.seconds,
            self.inputs.len()
        );
        let _ = writeln!(s, "{}", table_header());
        for i in &self.inputs {
            let _ = writeln!(s, "{}", self.row(i));
        }
        if !self.node_rss.is_empty() {
            let mib = |k: u64| k as f64 / 1024.0;
            let _ = writeln!(s, "\nnode RSS (MiB) every sample:");
            let v: Vec<String> = self
                .node_rss
                .iter()
                .map(|r| format!("{:.0}s {:.1}", r.seconds, mib(r.rss_kib)))
                .collect();
            let _ = writeln!(s, "{}", v.join(", "));
        }
        let _ = writeln!(
            s,
            "\nresult: {}",
            if self.failures.is_empty() {
                "PASS".to_string()
            } else {
                format!("FAIL: {}", self.failures.join("; "))
            }
        );
        s
    }

    /// One table row (also used by scripts to gather the rows of several runs).
    pub fn row(&self, i: &InputResult) -> String {
        let name = if i.input.is_empty() {
            "image"
        } else {
            &i.input
        };
        let count = |k: &str| i.node_count(k).map_or("-".into(), |v| v.to_string());
        let lat = |k: &str| {
            i.node_latency_ms
                .get(k)
                .map_or("-".into(), |v| format!("{v:.2}"))
        };
        let mut stages: Vec<String> = ["handover", "pipeline", "keypoints", "rest"]
            .iter()
            .filter_map(|p| {
                let at = |q: &str| i.node_latency_ms.get(&format!("{p}_{q}")).copied();
                Some(format!("**{p} {:.3} / {:.3}**", at("p50")?, at("p99")?))
            })
            .collect();
        stages.extend(i.stage_ms.iter().map(|(k, v)| format!("{k} {v:.3}")));
        let secs = self.seconds.max(1e-9);
        let (floor, over) = match &i.floor {
            Some(f) => (
                format!(
                    "{:.2} / {:.2} ({} lost)",
                    f.round_trip_ms.p50,
                    f.round_trip_ms.p99,
                    f.sent.saturating_sub(f.answered)
                ),
                format!(
                    "{:+.2} / {:+.2}",
                    i.round_trip_ms.p50 - f.round_trip_ms.p50,
                    i.round_trip_ms.p99 - f.round_trip_ms.p99
                ),
            ),
            None => ("-".into(), "-".into()),
        };
        // Per frame answered, over all inputs (the node's CPU is the whole process's).
        let frames: u64 = self.inputs.iter().map(|i| i.answered).sum();
        let per = |s: Option<f64>| {
            s.filter(|_| frames > 0)
                .map_or("-".into(), |s| format!("{:.2}", s * 1e3 / frames as f64))
        };
        let cpu = format!("{} / {}", per(self.node_cpu_s), per(self.load_cpu_s));
        let points = i
            .answer_points
            .map_or(String::new(), |p| format!(", {p:.0} points"));
        format!(
            "| {} | {name} | {} | {} ({:.1}/s{points}) | {} | {} | {:.2} / {:.2} | {floor} | {over} | {} / {} | {cpu} | {} | {} |",
            self.label,
            i.sent,
            i.answered,
            i.answered as f64 / secs,
            i.sent.saturating_sub(i.answered),
            count("frames_dropped"),
            i.round_trip_ms.p50,
            i.round_trip_ms.p99,
            lat("p50"),
            lat("p99"),
            i.node.get("backend").map_or("-", String::as_str),
            stages.join(", ")
        )
    }
}

pub fn table_header() -> String {
    "| run | input | sent | answered | not answered | dropped in the node | round trip p50 / p99 (ms) | floor (relay) p50 / p99 (ms) | over the floor p50 / p99 (ms) | node latency p50 / p99 (ms) | CPU ms a frame: node / load | backend | node latency's parts p50 / p99, then GPU stages (mean), ms |\n\
     |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(sent: u64, answered: u64, node: &[(&str, u64)]) -> InputResult {
        InputResult {
            input: "a".into(),
            sent,
            sent_malformed: 2,
            warmup_sent: 1,
            warmup_answered: 1,
            answered,
            node: node
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            answered_per_minute: vec![100, 90, 95, 10],
            ..Default::default()
        }
    }

    #[test]
    fn the_summary_line_gives_the_latency_percentiles() {
        let log = "x\ngpu_features_node summary input=\"b\" received=3 latency_ms p50=9.00 p95=9 p99=9 max=9\n\
                   gpu_features_node summary input=\"a\" received=1 processed=1 latency_ms p50=1.25 p95=2.50 p99=3.75 max=4.00\n";
        let m = parse_node_summary(log, "a").unwrap();
        assert_eq!(m["p50"], 1.25);
        let parts = "gpu_features_node summary input=\"\" received=1 processed=1 latency_ms p50=0.50 p95=0.6 p99=0.7 max=0.8 parts_ms handover_p50=0.010 handover_p99=0.020 pipeline_p50=0.300 pipeline_p99=0.400 keypoints_p50=0.050 keypoints_p99=0.060 rest_p50=0.001 rest_p99=0.002\n";
        let p = parse_node_summary(parts, "").unwrap();
        assert_eq!(
            (p["p99"], p["pipeline_p50"], p["rest_p99"]),
            (0.7, 0.3, 0.002)
        );
        let rep = LoadReport {
            inputs: vec![InputResult {
                node_latency_ms: p,
                ..Default::default()
            }],
            ..Default::default()
        };
        let row = rep.row(&rep.inputs[0]);
        assert!(
            row.contains("**handover 0.010 / 0.020**, **pipeline 0.300 / 0.400**"),
            "{row}"
        );
        assert_eq!(m["p99"], 3.75);
        assert!(parse_node_summary(log, "c").is_none());
        let relay = "gpu_features_relay summary input=\"\" received=5 latency_ms p50=0.020 p95=0.030 p99=0.040 max=0.100\n";
        assert_eq!(parse_node_summary(relay, "").unwrap()["p99"], 0.04);
    }

    #[test]
    fn a_relay_run_is_read_back_as_the_floor_and_printed_beside_the_row() {
        let mut relay = LoadReport {
            label: "relay".into(),
            seconds: 10.0,
            inputs: vec![input(300, 297, &[])],
            ..Default::default()
        };
        relay.inputs[0].round_trip_ms = Dist::of([1.0, 1.5, 2.0]);
        let dir = std::env::temp_dir().join(format!("gf-floor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("relay.json");
        std::fs::write(&path, serde_json::to_string(&relay).unwrap()).unwrap();
        let floor = read_floor(&path).unwrap();
        assert_eq!(floor["a"].answered, 297);
        assert_eq!(floor["a"].round_trip_ms.p50, 1.5);
        let mut ours = LoadReport {
            label: "node".into(),
            seconds: 10.0,
            inputs: vec![input(300, 300, &[])],
            ..Default::default()
        };
        ours.inputs[0].round_trip_ms = Dist::of([2.0, 2.25, 3.0]);
        ours.inputs[0].floor = floor.get("a").cloned();
        let row = ours.row(&ours.inputs[0]);
        assert!(
            row.contains("| 1.50 / 2.00 (3 lost) | +0.75 / +1.00 |"),
            "{row}"
        );
        assert!(row.contains("| 300 (30.0/s) |"), "{row}");
        ours.inputs[0].answer_points = Some(1210.4);
        let row = ours.row(&ours.inputs[0]);
        assert!(row.contains("| 300 (30.0/s, 1210 points) |"), "{row}");
        assert_eq!(
            row.matches('|').count(),
            table_header().lines().next().unwrap().matches('|').count()
        );
        std::fs::write(&path, "{}").unwrap();
        assert!(read_floor(&path)
            .unwrap_err()
            .contains("not a gpu_features_load --json"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn soak_accounting_flags_lost_frames_growth_and_slowdown() {
        let ok_counts = [
            ("frames_received", 301),
            ("frames_processed", 295),
            ("frames_dropped", 4),
            ("decode_errors", 2),
            ("process_errors", 0),
        ];
        let rss = |grow: u64| -> Vec<RssSample> {
            (0..20)
                .map(|i| RssSample {
                    seconds: i as f64 * 10.0,
                    rss_kib: 50_000 + if i > 10 { grow } else { 0 },
                })
                .collect()
        };
        let mut good = LoadReport {
            seconds: 200.0,
            inputs: vec![input(300, 294, &ok_counts)],
            node_rss: rss(1000),
            ..Default::default()
        };
        good.judge_soak(64.0);
        assert!(good.failures.is_empty(), "{:?}", good.failures);
        assert!(good.to_markdown().contains("PASS"));

        let mut lost = LoadReport {
            seconds: 200.0,
            inputs: vec![input(310, 200, &ok_counts)],
            node_rss: rss(100 * 1024),
            ..Default::default()
        };
        lost.inputs[0].answered_per_minute = vec![100, 20, 5];
        lost.judge_soak(64.0);
        let all = lost.failures.join("\n");
        assert!(all.contains("RSS"), "{all}");
        assert!(all.contains("minute 2"), "{all}");
        assert!(all.contains("node received 300 of them"), "{all}");
        assert!(all.contains("answered"), "{all}");
    }
}
