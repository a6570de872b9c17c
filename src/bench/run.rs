//! `gpu_features bench` ([`run`]): the modes that have their own module (`--input-path`,
//! `--streams`, `--tracks`), else the default tables: per size, our pipeline on the GPU and
//! the CPU for the default config and the matched presets, OpenCV and the GPU peers on the
//! same frames, then the matcher; the report as markdown and JSON.
//!
//! May import: as `bench`.

use super::*;

/// `gpu_features bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.frames == 0 {
        return Err(Error::Config("--frames must be at least 1".into()));
    }
    if args.input_path {
        #[cfg(feature = "cuda")]
        return input_path::run(args);
        #[cfg(not(feature = "cuda"))]
        return Err(Error::Cuda(
            "--input-path needs the CUDA backend (built without the `cuda` feature)".into(),
        ));
    }
    let (cfg, cfg_name) = load_config(args)?;
    let mut notes: Vec<String> = Vec::new();
    let (photos, from_bench_data) = load_inputs(args, &mut notes)?;
    if let Some(hz) = args.pace {
        notes.push(format!(
            "--pace {hz}: each GPU frame (with --tracks: each tracked frame, ours) starts 1/{hz} s \
             after the previous one, so the GPU and the CPU idle between frames as in the node \
             (without it, back to back); the stage rows' frames first wake the copy crew as the \
             node does (cuda.prewake_us: {} us; -1 = auto)",
            cfg.cuda.prewake_us
        ));
    }
    if !args.streams.is_empty() {
        return streams::run(args, &cfg, &cfg_name, &photos, from_bench_data, notes);
    }
    if let Some(sizes) = &args.tracks {
        return tracks::run(args, sizes, &photos, notes);
    }
    let mut p = Pipelines::new(args, &cfg, &mut notes)?;
    let matched = matched_configs(args, &cfg.cpu)?;
    let mut scripts = Scripts::new(args, p.gpu.is_some(), &mut notes)?;
    let mut results: Vec<SizeResult> = Vec::new();
    for &size in &args.sizes {
        let set = make_frames(&photos, size, args.distinct.max(1));
        eprintln!(
            "bench {size}: {} frames ({})",
            set.frames.len(),
            if set.tiled { "mosaic" } else { "crops" }
        );
        let mut jobs: Vec<(&str, &Config)> = vec![("default", &cfg)];
        jobs.extend(matched.iter().map(|(k, c, _)| (*k, c)));
        let mut res = p.measure(args, &set, &jobs)?;
        scripts.run(args, size, &set, &mut res);
        res.frames = Some(set);
        results.push(res);
    }
    notes.extend(
        scripts
            .peers_failed
            .clone()
            .or(scripts.peers_missing.clone()),
    );
    let gpu = p.gpu.is_some();
    let matching = run_matching(args, &p, &scripts, &results)?;
    scripts.finish(&mut notes);

    let (cv_version, cv_threads) = opencv_version(&results);
    let gpu_desc = gpu_info();
    let mut md = report(ReportInput {
        args,
        cfg_name: &cfg_name,
        gpu,
        gpu_desc: gpu_desc.as_deref(),
        cpu_frames: p.cpu_frames,
        cpu_warmup: p.cpu_warmup,
        from_bench_data,
        photos: photos.len(),
        cv_version: &cv_version,
        cv_threads,
        cpu_threads: cfg.cpu.threads_for(false),
        matched: &matched,
        results: &results,
        notes: &notes,
    });
    if let Some(dir) = &args.plots {
        let written = plots(&args.sizes, &results, cv_threads, dir)?;
        md.push_str(&plots_markdown(
            &written,
            &plot_link_dir(dir, args.markdown.as_deref()),
        ));
    }
    if let Some(m) = &matching {
        md.push_str(&m.markdown);
    }
    let summary = Summary {
        gpu,
        gpu_desc: gpu_desc.as_deref(),
        cfg_name: &cfg_name,
        cpu_frames: p.cpu_frames,
        notes: &notes,
    };
    emit(args, &md, || {
        summary.json(args, &results, matching.as_ref())
    })
}

/// `--match-descriptors N`: the matchers on N descriptors per set (the first frame's ORB
/// descriptors when there is one); None without it.
fn run_matching(
    args: &BenchArgs,
    p: &Pipelines,
    scripts: &Scripts,
    results: &[SizeResult],
) -> Result<Option<MatchBench>> {
    if args.match_descriptors == 0 {
        return Ok(None);
    }
    eprintln!(
        "bench matcher: {} descriptors per set",
        args.match_descriptors
    );
    Ok(Some(bench_matching(MatchBenchInput {
        n: args.match_descriptors,
        gpu: p.gpu.is_some(),
        cpu: p.cpu.is_some(),
        python: scripts.python.filter(|_| scripts.opencv_failed.is_none()),
        dir: &scripts.tmp,
        frame: results
            .first()
            .and_then(|r| r.frames.as_ref())
            .and_then(|f| f.frames.first()),
        gpu_runs: (args.warmup, args.frames),
        cpu_runs: (p.cpu_warmup, p.cpu_frames),
        opencv_runs: args.opencv_runs,
    })?))
}

/// Our pipelines: the GPU's (unless it is not usable) and the CPU's (unless `--no-cpu`),
/// with the CPU's frame counts.
struct Pipelines {
    gpu: Option<Pipeline>,
    cpu: Option<Pipeline>,
    cpu_frames: usize,
    cpu_warmup: usize,
}

impl Pipelines {
    fn new(args: &BenchArgs, cfg: &Config, notes: &mut Vec<String>) -> Result<Pipelines> {
        let primary = Pipeline::new(cfg.clone(), args.backend)?;
        let gpu = primary.backend() == BackendKind::Cuda;
        if !gpu {
            notes.push(match primary.fallback_reason() {
                Some(why) => format!("GPU rows omitted: no usable CUDA device ({why})"),
                None => "GPU rows omitted: --backend cpu".into(),
            });
        }
        let cpu_frames = args
            .cpu_frames
            .unwrap_or(if gpu {
                args.frames.min(20)
            } else {
                args.frames
            })
            .max(1);
        let (gpu, cpu) = if !gpu {
            (None, Some(primary))
        } else if args.no_cpu {
            (Some(primary), None)
        } else {
            let cpu = Pipeline::new(cfg.clone(), BackendChoice::Cpu)?;
            (Some(primary), Some(cpu))
        };
        Ok(Pipelines {
            gpu,
            cpu,
            cpu_frames,
            cpu_warmup: args.warmup.min(2),
        })
    }

    /// Every job (config) on the size's frames, on the GPU (also through the input buffer)
    /// and on the CPU.
    fn measure(
        &mut self,
        args: &BenchArgs,
        set: &FrameSet,
        jobs: &[(&str, &Config)],
    ) -> Result<SizeResult> {
        let mut res = SizeResult::default();
        if let Some(p) = self.gpu.as_mut() {
            for (key, c) in jobs {
                p.set_config((*c).clone())?;
                let t = Instant::now();
                let mut pace = Pacer::new(args.pace);
                let frames = (args.warmup, args.frames);
                let r = measure(p, &set.frames, args.encoding, frames, &mut pace)?;
                eprintln!(
                    "  gpu {key}: {} frames, wall median {:.3} ms ({:.1} s)",
                    r.frames,
                    r.wall.median,
                    t.elapsed().as_secs_f64()
                );
                res.add_run(&format!("gpu.{key}"), r);
                let wall = measure_input_buffer(p, &set.frames, args.encoding, frames, &mut pace)?;
                res.add_input_buffer_run(&format!("gpu.{key}"), wall);
            }
        }
        if let Some(p) = self.cpu.as_mut() {
            for (key, c) in jobs {
                p.set_config((*c).clone())?;
                let t = Instant::now();
                let runs = (self.cpu_warmup, self.cpu_frames);
                let r = measure(p, &set.frames, args.encoding, runs, &mut Pacer::new(None))?;
                eprintln!(
                    "  cpu {key}: {} frames, wall median {:.2} ms ({:.1} s)",
                    r.frames,
                    r.wall.median,
                    t.elapsed().as_secs_f64()
                );
                res.add_run(&format!("cpu.{key}"), r);
            }
        }
        Ok(res)
    }
}

/// The presets our pipeline runs besides the default, each matched to an OpenCV function
/// (`MATCHED`; ORB without its descriptors); none with `--no-matched`. They take the
/// bench config's `cpu` section (`--set cpu.threads=1`: every CPU row on one thread).
fn matched_configs(
    args: &BenchArgs,
    cpu: &crate::config::CpuConfig,
) -> Result<Vec<(&'static str, Config, &'static str)>> {
    if args.no_matched {
        return Ok(Vec::new());
    }
    MATCHED
        .iter()
        .map(|(k, y, f)| {
            let mut cfg = Config::from_yaml(y)?;
            cfg.cpu = cpu.clone();
            let cfg = if *k == "orb" {
                cfg.with_value("describe.enabled", "false")?
            } else {
                cfg
            };
            Ok((*k, cfg, *f))
        })
        .collect()
}

/// The Python scripts on the same frames (OpenCV's functions, the GPU peers) and why they
/// could not run: a script that fails is not tried again.
struct Scripts<'a> {
    python: Option<&'a str>,
    peers_python: Option<&'a str>,
    tmp: PathBuf,
    opencv_failed: Option<String>,
    peers_failed: Option<String>,
    /// Which of the peers' libraries were missing (it still runs for the others).
    peers_missing: Option<String>,
}

impl<'a> Scripts<'a> {
    fn new(args: &'a BenchArgs, gpu: bool, notes: &mut Vec<String>) -> Result<Scripts<'a>> {
        let tmp = std::env::temp_dir().join(format!("gpu_features_bench_{}", std::process::id()));
        let python = (args.opencv != "none").then_some(args.opencv.as_str());
        let peers_python = (args.peers != "none").then_some(args.peers.as_str());
        if python.is_some() || peers_python.is_some() {
            std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        if python.is_none() {
            notes.push("OpenCV rows omitted: --opencv none".into());
        }
        Ok(Scripts {
            python,
            peers_python,
            tmp,
            opencv_failed: None,
            peers_failed: (peers_python.is_some() && !gpu)
                .then(|| "GPU peer rows omitted: no GPU rows".into()),
            peers_missing: None,
        })
    }

    /// OpenCV and the peers on the size's frames, into `res`.
    fn run(&mut self, args: &BenchArgs, size: Size, set: &FrameSet, res: &mut SizeResult) {
        if let (Some(py), None) = (self.python, &self.opencv_failed) {
            let t = Instant::now();
            match run_opencv(py, &self.tmp, size, &set.frames, args.opencv_runs) {
                Ok(v) => {
                    eprintln!("  opencv: done ({:.1} s)", t.elapsed().as_secs_f64());
                    res.add_opencv(v);
                }
                Err(why) => {
                    eprintln!("  opencv: {why}");
                    self.opencv_failed = Some(why);
                }
            }
        }
        if let (Some(py), None) = (self.peers_python, &self.peers_failed) {
            let t = Instant::now();
            // On the PNG files the OpenCV script reads (written once per size).
            let script = ("bench_peers.py", PEERS_SCRIPT);
            match run_frames_script(py, &self.tmp, script, size, &set.frames, args.opencv_runs) {
                Ok(v) => {
                    eprintln!("  gpu peers: done ({:.1} s)", t.elapsed().as_secs_f64());
                    res.add_peers(&v);
                    self.peers_missing = missing_note(&v);
                }
                Err(why) => {
                    eprintln!("  gpu peers: {why}");
                    self.peers_failed = Some(format!("GPU peer rows omitted: {why}"));
                }
            }
        }
    }

    /// The scripts' folder removed; why OpenCV's rows are missing, if they are.
    fn finish(&self, notes: &mut Vec<String>) {
        if self.python.is_some() || self.peers_python.is_some() {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
        if let Some(why) = &self.opencv_failed {
            notes.push(format!("OpenCV rows omitted: {why}"));
        }
    }
}

/// What the JSON report says besides the per-size runs.
struct Summary<'a> {
    gpu: bool,
    gpu_desc: Option<&'a str>,
    cfg_name: &'a str,
    cpu_frames: usize,
    notes: &'a [String],
}

impl Summary<'_> {
    fn json(
        &self,
        args: &BenchArgs,
        results: &[SizeResult],
        matching: Option<&MatchBench>,
    ) -> Value {
        let sizes: Vec<Value> = args
            .sizes
            .iter()
            .zip(results)
            .map(|(z, r)| {
                let runs: serde_json::Map<String, Value> =
                    r.runs.iter().map(|(k, v)| (k.clone(), v.json())).collect();
                let fs = r.frames.as_ref();
                json!({
                    "size": z.to_string(),
                    "frames": fs.map(|f| f.sources.clone()),
                    "mosaic": fs.map(|f| f.tiled),
                    "runs": runs,
                    "opencv": r.opencv.clone(),
                })
            })
            .collect();
        json!({
            "date": utc_date(),
            "command": command_line(),
            "backend": if self.gpu { "cuda" } else { "cpu" },
            "gpu": self.gpu_desc,
            "cpu": cpu_model(),
            "config": self.cfg_name,
            "frames": args.frames,
            "warmup": args.warmup,
            "encoding": args.encoding.name(),
            "pace_hz": args.pace,
            "cpu_frames": self.cpu_frames,
            "opencv_runs": args.opencv_runs,
            "notes": self.notes,
            "sizes": sizes,
            "matching": matching.map(|m| m.json.clone()),
        })
    }
}

/// The OpenCV version and thread count the peers' scripts reported ("-" and 0 without).
fn opencv_version(results: &[SizeResult]) -> (String, u64) {
    match results.iter().find_map(|r| r.opencv.as_ref()) {
        Some(v) => (
            v["version"].as_str().unwrap_or("?").to_string(),
            v["threads_all"].as_u64().unwrap_or(0),
        ),
        None => ("-".into(), 0),
    }
}
