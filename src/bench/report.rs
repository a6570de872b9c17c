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
        "\nTimes: median ms (p90). Stage rows: CUDA events on the GPU (with the CUDA graphs, \
         of every `cuda.stage_timings`-th frame), wall time on the CPU; `process_into` wall: \
         the whole call on the host clock (upload, kernels, download, host selection). \
         `after decode (no stage events)`: the GPU's work after the decode as a whole \
         (pyramid to download, Canny beside it), by two events around the graphs on the \
         frames halfway between two stage-timed ones, whose graphs hold no event nodes.\n\n",
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
    let (peer_times, peer_ratios) = super::peers::peer_rows(r.results);
    rows.extend(peer_times);
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

/// `--plots DIR`: per size, our stage medians (GPU beside the CPU reference) and the
/// same-work comparison with OpenCV (1 and N threads), as grouped bars on a log axis.
/// Returns (file name, caption) of each PNG written.
pub(super) fn plots(
    sizes: &[Size],
    results: &[SizeResult],
    cv_threads: u64,
    dir: &Path,
) -> Result<Vec<(String, String)>> {
    use crate::bag::plot::{bars, BarGroup, Labels, Scale};
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut out = Vec::new();
    let median = |r: &SizeResult, k: &str| r.values.get(k).map(|s| s.median);
    // Groups with at least one value; None when no group has any.
    let keep = |groups: Vec<BarGroup>| -> Option<Vec<BarGroup>> {
        let g: Vec<BarGroup> = groups
            .into_iter()
            .filter(|g| g.values.iter().any(Option::is_some))
            .collect();
        (!g.is_empty()).then_some(g)
    };
    let all = format!("OpenCV, {cv_threads} threads");
    for (z, r) in sizes.iter().zip(results) {
        // Stage names in pipeline order, GPU's first, then any the CPU adds.
        let mut stages: Vec<&str> = Vec::new();
        for be in ["gpu", "cpu"] {
            if let Some(run) = r.runs.get(&format!("{be}.default")) {
                for (st, _) in &run.stages {
                    if !stages.contains(st) {
                        stages.push(st);
                    }
                }
            }
        }
        let mut cats: Vec<String> = stages.iter().map(|s| s.to_string()).collect();
        cats.push("whole\nprocess_into".into());
        let group = |be: &str, name: &str| BarGroup {
            name: name.into(),
            values: stages
                .iter()
                .map(|st| median(r, &format!("{be}.default.stage.{st}")))
                .chain([median(r, &format!("{be}.default.wall"))])
                .collect(),
        };
        if let Some(groups) = keep(vec![
            group("gpu", "ours GPU"),
            group("cpu", "ours CPU reference (1 thread)"),
        ]) {
            let who: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
            let file = format!("bench_stages_{z}.png");
            bars(
                &dir.join(&file),
                Labels {
                    title: &format!(
                        "Stage times per frame, {z}, default config: {}",
                        who.join(" vs ")
                    ),
                    x: "pipeline stage",
                    y: "median time (ms, log scale)",
                },
                &cats,
                &groups,
                Scale::Log,
            )?;
            out.push((
                file,
                format!("{z}: median time per stage, {}", who.join(" and ")),
            ));
        }

        // Same work: our matched configs (whole call) and the OpenCV op, per op.
        let ops = [
            ("fast", "FAST", "fast"),
            ("canny", "Canny", "canny"),
            ("orb", "ORB detect", "orb"),
            ("orb_desc", "ORB detect\n+ describe", "orb_desc"),
            (
                "default",
                "default pipeline /\nORB + Canny",
                "orb_desc+canny",
            ),
        ];
        let cats: Vec<String> = ops.iter().map(|o| o.1.to_string()).collect();
        let ours = |be: &str, name: &str| BarGroup {
            name: name.into(),
            values: ops
                .iter()
                .map(|(k, _, _)| median(r, &format!("{be}.{k}.wall")))
                .collect(),
        };
        let cv = |tag: &str, name: &str| BarGroup {
            name: name.into(),
            values: ops
                .iter()
                .map(|(_, _, op)| median(r, &format!("{tag}.{op}")))
                .collect(),
        };
        let groups = keep(vec![
            ours("gpu", "ours GPU"),
            ours("cpu", "ours CPU reference (1 thread)"),
            cv("cv1", "OpenCV, 1 thread"),
            cv("cvN", &all),
        ]);
        // Only worth a chart when OpenCV ran.
        if let Some(groups) = groups.filter(|g| g.iter().any(|g| g.name.starts_with("OpenCV"))) {
            let file = format!("bench_vs_opencv_{z}.png");
            bars(
                &dir.join(&file),
                Labels {
                    title: &format!("Same work, ours vs OpenCV, {z}"),
                    x: "operation (ours: whole process_into with the matching config)",
                    y: "median time (ms, log scale)",
                },
                &cats,
                &groups,
                Scale::Log,
            )?;
            out.push((
                file,
                format!("{z}: ours (GPU, CPU) vs OpenCV (1 and N threads), same work"),
            ));
        }
    }
    Ok(out)
}

/// The markdown section linking the plots; `link_dir` is how the markdown reaches `DIR`.
pub(super) fn plots_markdown(plots: &[(String, String)], link_dir: &str) -> String {
    if plots.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n### Plots\n\n");
    for (file, caption) in plots {
        let link = if link_dir.is_empty() {
            file.clone()
        } else {
            format!("{}/{file}", link_dir.trim_end_matches('/'))
        };
        s.push_str(&format!("{caption}\n\n![{caption}]({link})\n\n"));
    }
    s
}

/// Label of the rows timed by [`super::measure_input_buffer`].
const INPUT_BUFFER_ROW: &str =
    "whole `process_input_into` (wall; the frame already in the pipeline's pinned input buffer)";

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(median: f64) -> Stat {
        Stat {
            median,
            p90: median * 1.2,
            n: 10,
        }
    }

    fn run(stages: &[(&'static str, f64)], wall: f64) -> RunStats {
        RunStats {
            frames: 10,
            stages: stages.iter().map(|(k, v)| (*k, stat(*v))).collect(),
            events_total: Some(stat(wall * 0.9)),
            wall: stat(wall),
            keypoints: 1000.0,
            edges: None,
        }
    }

    #[test]
    fn plots_per_size_and_links() {
        let dir =
            std::env::temp_dir().join(format!("gpu_features_bench_plots_{}", std::process::id()));
        let sizes = [
            Size::from_str("320x240").unwrap(),
            Size::from_str("640x480").unwrap(),
        ];
        let mut a = SizeResult::default();
        a.add_run(
            "gpu.default",
            run(&[("decode", 0.05), ("pyramid", 0.2), ("fast", 0.3)], 0.9),
        );
        a.add_run(
            "cpu.default",
            run(&[("decode", 0.4), ("pyramid", 3.0), ("fast", 9.0)], 14.0),
        );
        a.add_run("cpu.fast", run(&[], 8.0));
        a.add_opencv(json!({
            "threads_all": 4, "runs": 50,
            "results": {"1": {"fast": {"median_ms": 2.0, "p90_ms": 2.5}},
                        "4": {"fast": {"median_ms": 0.8, "p90_ms": 1.0}}}
        }));
        // Second size: CPU only, no OpenCV: one chart.
        let mut b = SizeResult::default();
        b.add_run("cpu.default", run(&[("decode", 1.0), ("fast", 30.0)], 40.0));
        let p = plots(&sizes, &[a, b], 4, &dir).unwrap();
        let files: Vec<&str> = p.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            files,
            [
                "bench_stages_320x240.png",
                "bench_vs_opencv_320x240.png",
                "bench_stages_640x480.png"
            ]
        );
        for f in &files {
            let img = ::image::open(dir.join(f)).unwrap().to_rgb8();
            assert_eq!(img.dimensions(), (crate::bag::plot::W, crate::bag::plot::H));
            let ink = crate::bag::plot::ink_pixels(&img, 0..img.width(), 0..img.height());
            assert!(ink > 5_000, "{f}: {ink}");
        }
        let md = plots_markdown(&p, "plots");
        assert!(md.contains("](plots/bench_stages_320x240.png)"), "{md}");
        assert!(md.contains("(1 and N threads)"), "{md}");
        assert!(
            md.contains("640x480: median time per stage, ours CPU reference (1 thread)\n"),
            "{md}"
        );
        assert!(
            md.contains("320x240: median time per stage, ours GPU and ours CPU reference"),
            "{md}"
        );
        assert_eq!(md.matches("![").count(), 3);
        assert_eq!(
            plots_markdown(&p[..1], ""),
            format!(
                "\n### Plots\n\n{0}\n\n![{0}](bench_stages_320x240.png)\n\n",
                p[0].1
            )
        );
        assert!(plots_markdown(&[], "x").is_empty());
    }
}
