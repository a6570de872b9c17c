//! The markdown report: tables of medians and ratios per frame size.

#[allow(unused_imports)]
use super::*;

/// Every number of one size, by key (`gpu.default.wall`, `cv1.fast`, ...), for the table.
#[derive(Default)]
pub(super) struct SizeResult {
    pub(super) values: BTreeMap<String, Stat>,
    pub(super) counts: BTreeMap<String, f64>,
    pub(super) runs: BTreeMap<String, RunStats>,
    pub(super) opencv: Option<Value>,
    pub(super) frames: Option<FrameSet>,
}

impl SizeResult {
    pub(super) fn add_run(&mut self, key: &str, r: RunStats) {
        for (stage, s) in &r.stages {
            self.values.insert(format!("{key}.stage.{stage}"), *s);
        }
        if let Some(e) = r.events_total {
            self.values.insert(format!("{key}.events"), e);
        }
        self.values.insert(format!("{key}.wall"), r.wall);
        self.counts.insert(format!("{key}.keypoints"), r.keypoints);
        if let Some(e) = r.edges {
            self.counts.insert(format!("{key}.edges"), e);
        }
        self.runs.insert(key.to_string(), r);
    }

    /// The wall time of `process_input_into` (the frame written into the pipeline's input
    /// buffer first, untimed) for the run `key`.
    pub(super) fn add_input_buffer_run(&mut self, key: &str, wall: Stat) {
        self.values.insert(format!("{key}.wall_input"), wall);
    }

    pub(super) fn add_opencv(&mut self, v: Value) {
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

pub(super) enum Row {
    Header(String),
    Time(String, String),
    Count(String, String),
    /// Several counts in one cell, "a / b / c".
    Counts(String, Vec<String>),
    Ratio(String, String, String),
}

/// The mean of per-frame counts (0 for none).
pub(super) fn mean_count(v: &[usize]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<usize>() as f64 / v.len() as f64
    }
}

/// The distinct (size, max_features) of the tracker rows, in the order they first appear:
/// a table's lines.
pub(super) fn size_settings<'a>(
    rows: impl Iterator<Item = (&'a str, usize)>,
) -> Vec<(String, usize)> {
    let mut keys: Vec<(String, usize)> = Vec::new();
    for (size, feats) in rows {
        if !keys.iter().any(|(s, f)| s == size && *f == feats) {
            keys.push((size.to_string(), feats));
        }
    }
    keys
}

pub(super) fn fmt_ms(v: f64) -> String {
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

pub(super) fn render_table(sizes: &[Size], results: &[SizeResult], rows: &[Row]) -> String {
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

pub(super) fn stage_label(stage: &str, gpu: bool) -> String {
    match (stage, gpu) {
        ("decode", true) => "decode (host copy to pinned + upload)".into(),
        _ => stage.to_string(),
    }
}

/// The report's `- GPU:` line: the device when it was used, else why not.
pub(super) fn gpu_line(used: bool, desc: Option<&str>) -> String {
    let what = match (used, desc) {
        (true, Some(d)) => d.to_string(),
        (true, None) => "CUDA device (nvidia-smi not found)".into(),
        (false, Some(d)) => format!("{d} (not used)"),
        (false, None) => "none used".into(),
    };
    format!("- GPU: {what}\n")
}

pub(super) fn report(r: ReportInput) -> String {
    let mut s = header(&r);
    let (peer_times, peer_ratios) = super::peers::peer_rows(r.results);
    let mut rows = time_rows(&r);
    rows.extend(peer_times);
    s.push_str(&render_table(&r.args.sizes, r.results, &rows));
    let ratios = ratio_rows(&r, peer_ratios);
    s.push_str("\nRatios of medians (> 1: ours is faster by that factor).\n\n");
    s.push_str(&render_table(&r.args.sizes, r.results, &ratios));
    s
}

/// The report's title, its list of what ran where, and the note on the times.
fn header(r: &ReportInput) -> String {
    let a = r.args;
    let mut s = String::new();
    s.push_str(&format!("## gpu_features bench, {}\n\n", utc_date()));
    s.push_str(&format!("- command: `{}`\n", command_line()));
    s.push_str(&gpu_line(r.gpu, r.gpu_desc));
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
        "- inputs: {} distinct {} frames per size, rotated frame by frame; {} ({} photos)\n",
        a.distinct,
        a.encoding.name(),
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
        "\nTimes: median ms (p90). Stage rows: CUDA events on the GPU (with the CUDA graphs, \
         of every `cuda.stage_timings`-th frame), wall time on the CPU; `process_into` wall: \
         the whole call on the host clock (upload, kernels, download, host selection). \
         `after decode (no stage events)`: the GPU's work after the decode as a whole \
         (pyramid to download, Canny beside it), by two events around the graphs on the \
         frames halfway between two stage-timed ones, whose graphs hold no event nodes.\n\n",
    );

    s
}

/// The table of times: ours on the GPU and the CPU per stage, the configs with OpenCV's
/// exact output, OpenCV on 1 and N threads (the peers' rows follow).
fn time_rows(r: &ReportInput) -> Vec<Row> {
    let mut rows = Vec::new();
    let stage_names = |key: &str| -> Vec<&'static str> {
        r.results
            .iter()
            .find_map(|x| x.runs.get(key))
            .map(|run| run.stages.iter().map(|(k, _)| *k).collect())
            .unwrap_or_default()
    };
    let ours_cpu = ours_cpu(r.cpu_threads);
    for (be, title, gpu) in [("gpu", "ours GPU", true), ("cpu", ours_cpu.as_str(), false)] {
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
        if gpu {
            rows.push(Row::Time(
                INPUT_BUFFER_ROW.into(),
                format!("{key}.wall_input"),
            ));
        }
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
            rows.push(Row::Time(
                format!("GPU {file}, frame already in the input buffer"),
                format!("gpu.{k}.wall_input"),
            ));
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
    rows
}

/// The table of ratios: the CPU reference and OpenCV against ours (GPU rows only when the
/// GPU ran), then `peer_ratios`.
fn ratio_rows(r: &ReportInput, peer_ratios: Vec<Row>) -> Vec<Row> {
    let all = format!("{} threads", r.cv_threads);
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
        ratios.push(Row::Header(format!(
            "OpenCV {all} / ours GPU, the frame already in the input buffer (wall; same output)"
        )));
        for (k, label) in ops {
            ratios.push(Row::Ratio(
                label.into(),
                format!("cvN.{k}"),
                format!("gpu.{k}.wall_input"),
            ));
        }
        ratios.push(Row::Ratio(
            "ORB detectAndCompute + Canny vs our default pipeline".into(),
            "cvN.orb_desc+canny".into(),
            "gpu.default.wall_input".into(),
        ));
        ratios.extend(peer_ratios);
    }
    for (tag, threads) in [("cv1", "1 thread"), ("cvN", all.as_str())] {
        ratios.push(Row::Header(format!(
            "OpenCV {threads} / {} (same output)",
            ours_cpu(r.cpu_threads)
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
    ratios
}

/// "ours CPU reference (N threads)".
fn ours_cpu(threads: usize) -> String {
    let s = if threads == 1 { "" } else { "s" };
    format!("ours CPU reference ({threads} thread{s})")
}

/// Label of the rows timed by [`super::measure_input_buffer`].
const INPUT_BUFFER_ROW: &str =
    "whole `process_input_into` (wall; the frame already in the pipeline's pinned input buffer)";

/// Prints the markdown report and writes it to `--markdown`, and the JSON document (built
/// only when asked) to `--json`.
pub(super) fn emit(args: &BenchArgs, md: &str, doc: impl FnOnce() -> Value) -> Result<()> {
    print!("{md}");
    if let Some(p) = &args.markdown {
        std::fs::write(p, md).map_err(|e| Error::io(p, e))?;
    }
    if let Some(p) = &args.json {
        let text = serde_json::to_string_pretty(&doc()).expect("json");
        std::fs::write(p, text).map_err(|e| Error::io(p, e))?;
    }
    Ok(())
}
