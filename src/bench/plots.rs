//! `bench --plots DIR`: the tables' medians drawn as PNG bar charts (with the report room's
//! `plot`), and the markdown section that links them.

#[allow(unused_imports)]
use super::*;
use crate::report::plot::{bars, BarGroup, Labels, Scale};

/// `--plots DIR`: per size, our stage medians (GPU beside the CPU reference) and the
/// same-work comparison with OpenCV (1 and N threads), as grouped bars on a log axis.
/// Returns (file name, caption) of each PNG written.
pub(super) fn plots(
    sizes: &[Size],
    results: &[SizeResult],
    cv_threads: u64,
    dir: &Path,
) -> Result<Vec<(String, String)>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut out = Vec::new();
    let all = format!("OpenCV, {cv_threads} threads");
    for (z, r) in sizes.iter().zip(results) {
        out.extend(stage_chart(dir, z, r)?);
        out.extend(opencv_chart(dir, z, r, &all)?);
    }
    Ok(out)
}

fn median(r: &SizeResult, k: &str) -> Option<f64> {
    r.values.get(k).map(|s| s.median)
}

/// The groups with at least one value; None when no group has any.
fn keep(groups: Vec<BarGroup>) -> Option<Vec<BarGroup>> {
    let g: Vec<BarGroup> = groups
        .into_iter()
        .filter(|g| g.values.iter().any(Option::is_some))
        .collect();
    (!g.is_empty()).then_some(g)
}

/// Size `z`'s chart of the time per stage, ours on the GPU and the CPU: (file, caption).
fn stage_chart(dir: &Path, z: &Size, r: &SizeResult) -> Result<Option<(String, String)>> {
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
    let Some(groups) = keep(vec![
        group("gpu", "ours GPU"),
        group("cpu", "ours CPU reference (1 thread)"),
    ]) else {
        return Ok(None);
    };
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
    Ok(Some((
        file,
        format!("{z}: median time per stage, {}", who.join(" and ")),
    )))
}

/// Size `z`'s chart of the same work, ours against OpenCV (`all`: the N-thread label), when
/// OpenCV ran: (file, caption).
fn opencv_chart(
    dir: &Path,
    z: &Size,
    r: &SizeResult,
    all: &str,
) -> Result<Option<(String, String)>> {
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
        cv("cvN", all),
    ]);
    // Only worth a chart when OpenCV ran.
    let Some(groups) = groups.filter(|g| g.iter().any(|g| g.name.starts_with("OpenCV"))) else {
        return Ok(None);
    };
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
    Ok(Some((
        file,
        format!("{z}: ours (GPU, CPU) vs OpenCV (1 and N threads), same work"),
    )))
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
            assert_eq!(
                img.dimensions(),
                (crate::report::plot::W, crate::report::plot::H)
            );
            let ink = crate::report::plot::ink_pixels(&img, 0..img.width(), 0..img.height());
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
