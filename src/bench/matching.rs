//! Matcher rows: brute-force Hamming matching (src/matching), ours on the GPU and the CPU
//! against cv2.BFMatcher(NORM_HAMMING).knnMatch(k=2), on the same descriptor sets.

#[allow(unused_imports)]
use super::*;

// =============================================================================================
// Matcher rows: brute-force Hamming matching (src/matching), ours on the GPU and the CPU
// against cv2.BFMatcher(NORM_HAMMING).knnMatch(k=2), on the same descriptor sets.

/// The matcher section of the report, and its numbers for the JSON.
pub(super) struct MatchBench {
    pub(super) markdown: String,
    pub(super) json: Value,
}

/// A named (query, train) pair of descriptor sets.
pub(super) struct DescriptorPair {
    pub(super) name: String,
    pub(super) query: Vec<Descriptor>,
    pub(super) train: Vec<Descriptor>,
}

/// `n` random queries and `n` train descriptors of which half are noisy copies (up to 40
/// flipped bits) of random queries, half unrelated: the shape of frame-to-frame matching,
/// with a fixed seed so every run (and OpenCV) sees the same sets.
pub(super) fn synthetic_pair(n: usize) -> DescriptorPair {
    let mut state = 0x5eed_u64;
    let mut next = move || {
        // SplitMix64.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let random = |next: &mut dyn FnMut() -> u64| {
        let mut d = [0u8; 32];
        for c in d.chunks_mut(8) {
            c.copy_from_slice(&next().to_le_bytes());
        }
        d
    };
    let query: Vec<Descriptor> = (0..n).map(|_| random(&mut next)).collect();
    let train = (0..n)
        .map(|_| {
            if n == 0 || next() % 2 == 0 {
                return random(&mut next);
            }
            let mut d = query[(next() % n as u64) as usize];
            for _ in 0..next() % 41 {
                let bit = (next() % 256) as usize;
                d[bit / 8] ^= 1 << (bit % 8);
            }
            d
        })
        .collect();
    DescriptorPair {
        name: format!("random {n}x{n}"),
        query,
        train,
    }
}

/// Real ORB descriptors (the CPU pipeline, default config, `n` points): `frame` against the
/// same frame shifted by (7, 5) pixels. `Err`: why not.
pub(super) fn orb_pair(frame: &GrayImage, n: usize) -> std::result::Result<DescriptorPair, String> {
    let cfg = Config::from_yaml(DEFAULT_YAML)
        .and_then(|c| c.with_value("describe.enabled", "true"))
        .and_then(|c| c.with_value("canny.enabled", "false"))
        .and_then(|c| c.with_value("select.max_keypoints", &n.to_string()))
        .map_err(|e| e.to_string())?;
    let mut p = Pipeline::new(cfg, BackendChoice::Cpu).map_err(|e| e.to_string())?;
    let (w, h) = (frame.width, frame.height);
    let shifted = crop(frame, 7, 5, w - 7, h - 5);
    let mut describe = |img: &GrayImage| {
        let view = ImageView::mono8(&img.data, img.width, img.height).map_err(|e| e.to_string())?;
        p.process(&view)
            .map(|f| f.descriptors)
            .map_err(|e| e.to_string())
    };
    let (query, train) = (describe(frame)?, describe(&shifted)?);
    if query.len() < 2 || train.len() < 2 {
        return Err("the pipeline gave fewer than 2 descriptors".into());
    }
    Ok(DescriptorPair {
        name: format!("ORB {}x{} ({w}x{h} frame)", query.len(), train.len()),
        query,
        train,
    })
}

/// Wall time of `Matcher::match_into` (copies included on the GPU): `warmup` untimed calls,
/// then `runs` timed ones; also the number of matches.
pub(super) fn time_matcher(
    m: &mut Matcher,
    pair: &DescriptorPair,
    params: &MatchParams,
    warmup: usize,
    runs: usize,
) -> Result<(Stat, usize)> {
    let mut out = Vec::new();
    for _ in 0..warmup {
        m.match_into(&pair.query, &pair.train, params, &mut out)?;
    }
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        m.match_into(&pair.query, &pair.train, params, &mut out)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok((Stat::of(&ms).expect("at least one run"), out.len()))
}

/// Writes the pair as raw descriptor files and runs the OpenCV script's `--match` mode.
pub(super) fn run_opencv_match(
    python: &str,
    dir: &Path,
    tag: usize,
    pair: &DescriptorPair,
    runs: usize,
    ratio: f32,
) -> std::result::Result<Value, String> {
    let script = dir.join("bench_opencv.py");
    if !script.exists() {
        std::fs::write(&script, OPENCV_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    }
    let (q, t) = (
        dir.join(format!("match{tag}_query.bin")),
        dir.join(format!("match{tag}_train.bin")),
    );
    for (path, set) in [(&q, &pair.query), (&t, &pair.train)] {
        std::fs::write(path, set.as_flattened()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .args(["--runs", &runs.to_string(), "--warmup", "3"])
        .args(["--ratio", &ratio.to_string(), "--match"])
        .args([&q, &t]);
    script_json(python, cmd)
}

/// Everything the matcher rows need from `run`.
pub(super) struct MatchBenchInput<'a> {
    pub(super) n: usize,
    pub(super) gpu: bool,
    pub(super) cpu: bool,
    pub(super) python: Option<&'a str>,
    pub(super) dir: &'a Path,
    /// A bench frame for the real-descriptor pair.
    pub(super) frame: Option<&'a GrayImage>,
    pub(super) gpu_runs: (usize, usize),
    pub(super) cpu_runs: (usize, usize),
    pub(super) opencv_runs: usize,
}

/// The numbers of one descriptor pair, by key (`gpu.ratio`, `cpu.cross`, `cv1`, ...).
#[derive(Default)]
pub(super) struct PairResult {
    pub(super) ms: BTreeMap<String, Stat>,
    pub(super) counts: BTreeMap<String, f64>,
    pub(super) opencv: Option<Value>,
}

impl PairResult {
    /// OpenCV's timings (`cv1`, `cvN`) and its ratio-test count from the script's JSON.
    fn take_opencv(&mut self, v: Value) {
        let all = v["threads_all"].as_u64().unwrap_or(1);
        let n = v["runs"].as_u64().unwrap_or(0) as usize;
        for (key, threads) in [("cv1", 1u64), ("cvN", all)] {
            let t = &v["results"][threads.to_string()]["knn2"];
            if let (Some(median), Some(p90)) = (t["median_ms"].as_f64(), t["p90_ms"].as_f64()) {
                self.ms.insert(key.into(), Stat { median, p90, n });
            }
        }
        if let Some(k) = v["counts"]["ratio"].as_f64() {
            self.counts.insert("cv.kept".into(), k);
        }
        self.opencv = Some(v);
    }
}

/// The markdown table of `bench_matching`: a column per pair, a row per matcher and the
/// ratios and counts, then the method and the notes.
fn markdown(pairs: &[DescriptorPair], results: &[PairResult], notes: &[String]) -> String {
    let cv_threads = results
        .iter()
        .find_map(|r| r.opencv.as_ref()?["threads_all"].as_u64())
        .unwrap_or(0);
    let mut md = format!(
        "\n### Brute-force Hamming matching, median (p90) ms\n\n| |{}\n|---|{}\n",
        pairs
            .iter()
            .map(|p| format!(" {} |", p.name))
            .collect::<String>(),
        "---:|".repeat(pairs.len())
    );
    // One row: a cell per pair; left out when no pair has a value.
    let mut row = |label: &str, cell: &dyn Fn(&PairResult) -> Option<String>| {
        let cells: Vec<String> = results
            .iter()
            .map(|r| cell(r).unwrap_or_else(|| "—".into()))
            .collect();
        if cells.iter().any(|c| c != "—") {
            md.push_str(&format!("| {label} |"));
            for c in cells {
                md.push_str(&format!(" {c} |"));
            }
            md.push('\n');
        }
    };
    let time_rows = [
        (
            "gpu.ratio",
            "GPU, k=2 + ratio 0.8 (wall: copies + kernels)".to_string(),
        ),
        ("gpu.cross", "GPU, k=2 + ratio 0.8 + cross-check".into()),
        (
            "cpu.ratio",
            "CPU reference (1 thread), k=2 + ratio 0.8".into(),
        ),
        (
            "cpu.cross",
            "CPU reference (1 thread), k=2 + ratio 0.8 + cross-check".into(),
        ),
        (
            "cv1",
            "OpenCV BFMatcher(NORM_HAMMING).knnMatch k=2, 1 thread".into(),
        ),
        (
            "cvN",
            format!("OpenCV BFMatcher(NORM_HAMMING).knnMatch k=2, {cv_threads} threads"),
        ),
    ];
    for (key, label) in &time_rows {
        row(label, &|r| {
            let s = r.ms.get(*key)?;
            Some(format!("{} ({})", fmt_ms(s.median), fmt_ms(s.p90)))
        });
    }
    for (ours, label) in [
        ("gpu.ratio", "speed-up GPU vs OpenCV 1 thread"),
        ("cpu.ratio", "speed-up CPU vs OpenCV 1 thread"),
    ] {
        row(label, &|r| {
            let (a, b) = (r.ms.get(ours)?, r.ms.get("cv1")?);
            Some(format!("{:.1}x", b.median / a.median))
        });
    }
    row("queries kept by the ratio test: GPU / CPU / OpenCV", &|r| {
        let v: Vec<String> = ["gpu.kept", "cpu.kept", "cv.kept"]
            .iter()
            .map(|k| r.counts.get(*k).map_or("—".into(), |n| format!("{n:.0}")))
            .collect();
        Some(v.join(" / "))
    });
    md.push_str(
        "\nOurs: `matching::Matcher::match_into`, wall time of the call (upload, kernels, \
         download and the host filter on the GPU). OpenCV: the `knnMatch` call only (its ratio \
         test is counted untimed). The kept counts must agree: they depend only on the two \
         nearest distances, not on how ties are broken.\n",
    );
    for n in notes {
        md.push_str(&format!("- note: {n}\n"));
    }
    md
}

/// Times the matcher (k=2 + ratio 0.8, the `knnMatch` + Lowe test equivalent, and with
/// our cross-check added) on a random and a real descriptor pair, beside OpenCV.
pub(super) fn bench_matching(a: MatchBenchInput) -> Result<MatchBench> {
    const RATIO: f32 = 0.8;
    let knn_ratio = MatchParams {
        ratio: Some(RATIO),
        cross_check: false,
        max_distance: None,
    };
    let with_cross = MatchParams {
        cross_check: true,
        ..knn_ratio
    };
    let mut notes = Vec::new();
    let mut pairs = vec![synthetic_pair(a.n)];
    match a.frame.map(|f| orb_pair(f, a.n)) {
        Some(Ok(p)) => pairs.push(p),
        Some(Err(why)) => notes.push(format!("no ORB descriptor pair: {why}")),
        None => {}
    }
    let mut matchers = Vec::new();
    if a.gpu {
        matchers.push(("gpu", Matcher::new(BackendChoice::Cuda)?, a.gpu_runs));
    }
    if a.cpu {
        matchers.push(("cpu", Matcher::new(BackendChoice::Cpu)?, a.cpu_runs));
    }
    let mut results: Vec<PairResult> = Vec::new();
    for (tag, pair) in pairs.iter().enumerate() {
        let mut r = PairResult::default();
        for (backend, m, (warmup, runs)) in matchers.iter_mut() {
            let (s, kept) = time_matcher(m, pair, &knn_ratio, *warmup, *runs)?;
            eprintln!("  match {} {backend}: {:.3} ms", pair.name, s.median);
            r.ms.insert(format!("{backend}.ratio"), s);
            r.counts.insert(format!("{backend}.kept"), kept as f64);
            let (s, _) = time_matcher(m, pair, &with_cross, *warmup, *runs)?;
            r.ms.insert(format!("{backend}.cross"), s);
        }
        if let Some(py) = a.python {
            match run_opencv_match(py, a.dir, tag, pair, a.opencv_runs, RATIO) {
                Ok(v) => r.take_opencv(v),
                Err(why) => notes.push(format!("OpenCV rows omitted for {}: {why}", pair.name)),
            }
        }
        results.push(r);
    }

    let md = markdown(&pairs, &results, &notes);
    let json = json!({
        "descriptors": a.n,
        "ratio": RATIO,
        "notes": notes,
        "pairs": pairs.iter().zip(&results).map(|(p, r)| json!({
            "name": p.name,
            "query": p.query.len(),
            "train": p.train.len(),
            "ms": r.ms.iter().map(|(k, s)| (k.clone(), s.json())).collect::<serde_json::Map<_, _>>(),
            "counts": r.counts,
            "opencv": r.opencv,
        })).collect::<Vec<_>>(),
    });
    Ok(MatchBench { markdown: md, json })
}
