//! `gpu_features bench --tracks [SIZES]`: the feature tracker (`track`, VINS-Fusion's
//! front-end) per frame, ours on the GPU and on the CPU reference, beside OpenCV's VINS
//! pipeline (scripts/bench_vins_opencv.py, cv2) on 1 thread and on all, on the same frames.
//!
//! Frames: camera pans over real photos (crops of one photo moving PAN_STEP pixels per
//! frame, SEQ_LEN frames per sequence, one sequence per photo large enough, up to
//! SEQUENCES); the first frame of each sequence is not timed. Per size, for 150 features
//! 30 px apart (VINS's default) and 1000 features 10 px apart: the wall time of each
//! `Tracker::track` call (gray frame in host memory -> tracks back on the host).

use super::*;

use serde::Serialize;

use super::tracks_stereo::{self as stereo, StereoRow, DISPARITY};
use crate::report::Dist;
use crate::track::{FrameStats, TrackParams, Tracker};

/// Frames per pan sequence.
const SEQ_LEN: usize = 30;
/// Sequences (photos) per size at most.
const SEQUENCES: usize = 4;
/// The pan, pixels per frame (x, y).
const PAN_STEP: (usize, usize) = (3, 2);
/// (max_features, min_distance): VINS's default, and a dense setting.
const SETTINGS: [(usize, f64); 2] = [(150, 30.0), (1000, 10.0)];

/// One row: one tracker at one size and setting.
#[derive(Debug, Serialize)]
pub(super) struct TrackRow {
    size: String,
    max_features: usize,
    min_distance: f64,
    /// `cuda`, `cpu` (the reference, one thread), `opencv-1`, `opencv-N` (all threads).
    tracker: String,
    /// Tracks per timed frame, mean.
    tracks_mean: f64,
    /// Wall time per frame, ms.
    ms: Dist,
    /// Ours, ms per frame: pyramid, LK forward and back, new corners, LK's GPU time (events).
    stages: Option<[Dist; 4]>,
}

/// Pan sequences of `size` over the photos large enough (names kept for the report), and
/// for the stereo rows each one's right camera where the photo has room: the crops
/// [`DISPARITY`] px further right (a point at x on the left is at x - DISPARITY on the right).
pub(super) struct Pans {
    pub(super) left: Vec<Vec<GrayImage>>,
    pub(super) right: Vec<Option<Vec<GrayImage>>>,
    pub(super) names: Vec<String>,
}

fn pan_sequences(photos: &[Photo], size: Size) -> Pans {
    let (w, h) = (size.width, size.height);
    let (need_w, need_h) = (w + PAN_STEP.0 * SEQ_LEN, h + PAN_STEP.1 * SEQ_LEN);
    let mut pans = Pans {
        left: Vec::new(),
        right: Vec::new(),
        names: Vec::new(),
    };
    for p in photos
        .iter()
        .filter(|p| p.img.width >= need_w && p.img.height >= need_h)
        .take(SEQUENCES)
    {
        let (x0, y0) = ((p.img.width - need_w) / 2, (p.img.height - need_h) / 2);
        let seq = |dx: usize| -> Vec<GrayImage> {
            (0..SEQ_LEN)
                .map(|k| crop(&p.img, x0 + dx + k * PAN_STEP.0, y0 + k * PAN_STEP.1, w, h))
                .collect()
        };
        pans.left.push(seq(0));
        // The last crop ends at x0 + need_w - PAN_STEP.0.
        let room = x0 + need_w - PAN_STEP.0 + DISPARITY <= p.img.width;
        pans.right.push(room.then(|| seq(DISPARITY)));
        pans.names.push(p.name.clone());
    }
    pans
}

/// What [`time_tracker`] measured per timed frame: wall ms, tracks, the tracker's stats.
type Timed = (Vec<f64>, Vec<usize>, Vec<FrameStats>);

/// Tracks each sequence afresh until `frames` are timed after `warmup`, started by `pace`.
fn time_tracker(
    t: &mut Tracker,
    seqs: &[Vec<GrayImage>],
    (warmup, frames): (usize, usize),
    pace: &mut Pacer,
) -> Timed {
    let (mut ms, mut tracks, mut stats) = (Vec::new(), Vec::new(), Vec::new());
    let mut seen = 0;
    'outer: loop {
        for seq in seqs {
            t.clear();
            for (k, img) in seq.iter().enumerate() {
                pace.wait();
                let t0 = Instant::now();
                let n = t.track(img, k as f64 / 30.0, None).len();
                let dt = t0.elapsed().as_secs_f64() * 1e3;
                if k == 0 {
                    continue;
                }
                seen += 1;
                if seen > warmup {
                    ms.push(dt);
                    tracks.push(n);
                    stats.push(*t.stats());
                }
                if ms.len() >= frames {
                    break 'outer;
                }
            }
        }
    }
    (ms, tracks, stats)
}

/// OpenCV's pipeline on the sequences (PNGs in `dir`; with `right`, stereo): its JSON.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_opencv_tracks(
    python: &str,
    script: &Path,
    dir: &Path,
    size: Size,
    seqs: &[&Vec<GrayImage>],
    right: Option<&[&Vec<GrayImage>]>,
    (max_features, min_distance): (usize, f64),
    threads: usize,
) -> std::result::Result<Value, String> {
    let mut files = Vec::new();
    let mut save = |f: &GrayImage, path: PathBuf| -> std::result::Result<(), String> {
        if !path.exists() {
            save_gray_png(f, &path).map_err(|e| e.to_string())?;
        }
        files.push(path);
        Ok(())
    };
    for (s, seq) in seqs.iter().enumerate() {
        for (k, f) in seq.iter().enumerate() {
            match right {
                None => save(f, dir.join(format!("track_{size}_{s}_{k:02}.png")))?,
                Some(r) => {
                    save(f, dir.join(format!("stereo_{size}_{s}_{k:02}_l.png")))?;
                    save(
                        &r[s][k],
                        dir.join(format!("stereo_{size}_{s}_{k:02}_r.png")),
                    )?;
                }
            }
        }
    }
    let mut cmd = Command::new(python);
    if right.is_some() {
        cmd.arg(script).arg("--stereo");
    } else {
        cmd.arg(script);
    }
    cmd.args(["--json", "--rounds", "1"])
        .args(["--threads", &threads.to_string()])
        .args(["--max-cnt", &max_features.to_string()])
        .args(["--min-dist", &(min_distance.round() as i64).to_string()])
        .args(["--seq-len", &SEQ_LEN.to_string()])
        .args(&files);
    script_json(python, cmd)
}

fn opencv_row(v: &Value, size: Size, setting: (usize, f64), label: String) -> Option<TrackRow> {
    let (m, p90, n) = (
        v["median_ms"].as_f64()?,
        v["p90_ms"].as_f64()?,
        v["n"].as_u64()?,
    );
    Some(TrackRow {
        size: size.to_string(),
        max_features: setting.0,
        min_distance: setting.1,
        tracker: label,
        tracks_mean: v["tracks_mean"].as_f64().unwrap_or(0.0),
        ms: Dist {
            n: n as usize,
            p50: m,
            p90,
            ..Dist::default()
        },
        stages: None,
    })
}

/// Our trackers' stages, p50 / p90 ms of each.
pub(super) fn stage_table(rows: &[TrackRow]) -> String {
    let mut s = String::from(
        "| size | features | tracker | pyramid | LK forward + back | of which the LK kernel (GPU events) | new corners | whole frame |\n\
         |---|---:|---|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        if let Some([p, f, d, k]) = &r.stages {
            let c = |d: &Dist| {
                if d.n == 0 {
                    "—".to_string()
                } else {
                    format!("{} / {}", fmt_ms(d.p50), fmt_ms(d.p90))
                }
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.size,
                r.max_features,
                r.tracker,
                c(p),
                c(f),
                c(k),
                c(d),
                c(&r.ms)
            ));
        }
    }
    s
}

/// The markdown table: one line per size and setting, the trackers side by side.
pub(super) fn table(rows: &[TrackRow]) -> String {
    let mut s = String::from(
        "| size | features (min distance) | tracks / frame | ours, GPU: p50 / p90 ms | ours, CPU (`cpu.threads` threads) | OpenCV 1 thread | OpenCV all threads | OpenCV all threads / ours GPU |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (size, feats) in size_settings(rows.iter().map(|r| (r.size.as_str(), r.max_features))) {
        let find = |t: &str| {
            rows.iter()
                .find(|r| r.size == size && r.max_features == feats && r.tracker.starts_with(t))
        };
        let cell = |t: &str| {
            find(t).map_or("—".to_string(), |r| {
                format!("{} / {}", fmt_ms(r.ms.p50), fmt_ms(r.ms.p90))
            })
        };
        let p50 = |t: &str| find(t).map_or("—".to_string(), |r| fmt_ms(r.ms.p50));
        let (gpu, all) = (find("cuda"), find("opencv-N"));
        let tracks = gpu.or(find("cpu")).map_or(0.0, |r| r.tracks_mean);
        let dist = gpu.or(find("cpu")).map_or(0.0, |r| r.min_distance);
        let ratio = match (gpu, all) {
            (Some(g), Some(o)) if g.ms.p50 > 0.0 => format!("{:.1}x", o.ms.p50 / g.ms.p50),
            _ => "—".into(),
        };
        s.push_str(&format!(
            "| {size} | {feats} ({dist:.0} px) | {tracks:.0} | {} | {} | {} | {} | {ratio} |\n",
            cell("cuda"),
            p50("cpu"),
            p50("opencv-1"),
            p50("opencv-N"),
        ));
    }
    s
}

/// The report of `bench --tracks`: the setup, the trackers side by side, stages, stereo.
fn markdown(
    args: &BenchArgs,
    cpu_frames: usize,
    (inputs, notes): (&[String], &[String]),
    (rows, stereo_rows): (&[TrackRow], &[StereoRow]),
    gpu_desc: Option<&str>,
) -> String {
    let gpu_used = rows.iter().any(|r| r.tracker == "cuda");
    let mut md = format!("## gpu_features bench --tracks, {}\n\n", utc_date());
    md.push_str(&format!("- command: `{}`\n", command_line()));
    md.push_str(&gpu_line(gpu_used, gpu_desc));
    md.push_str(&format!("- CPU: {}\n", cpu_model()));
    md.push_str(&format!(
        "- inputs: camera pans over real photos, {} px per frame, the first frame of each \
         pan untimed\n",
        format_args!("({}, {})", PAN_STEP.0, PAN_STEP.1)
    ));
    for l in inputs {
        md.push_str(l);
    }
    md.push_str(&format!(
        "- method: VINS-Fusion's front-end (window 21, 3 levels, flow back, no F test); ours: \
         the wall time of each `Tracker::track` call (gray frame in host memory to tracks on \
         the host), {} untimed frames then {} timed on the GPU, {} on the CPU reference; \
         OpenCV: scripts/bench_vins_opencv.py (cv2; its per-point loops run in Python) on the \
         same frames, each once\n",
        args.warmup, args.frames, cpu_frames
    ));
    for n in notes {
        md.push_str(&format!("- note: {n}\n"));
    }
    md.push('\n');
    md.push_str(&table(rows));
    md.push_str(
        "\nOur trackers' stages (wall, p50 / p90 ms; on the GPU a stage ends with its wait, \
         so the GPU work queued in one stage can be counted in the next):\n\n",
    );
    md.push_str(&stage_table(rows));
    if !stereo_rows.is_empty() {
        md.push_str(&format!(
            "\nStereo (VINS-Fusion's mode): the same pans with a right camera {DISPARITY} px to the \
             right; ours per pair: `Tracker::track` on the left frame, then \
             `Tracker::track_right` (the right step); OpenCV: scripts/bench_vins_opencv.py \
             --stereo:\n\n"
        ));
        md.push_str(&stereo::table(stereo_rows));
    }
    md
}

/// Python and scripts/bench_vins_opencv.py for the OpenCV rows, or why not (into `notes`).
fn opencv_script<'a>(
    args: &'a BenchArgs,
    notes: &mut Vec<String>,
) -> (Option<&'a str>, Option<PathBuf>) {
    let python = (args.opencv != "none").then_some(args.opencv.as_str());
    let script = find_dir("scripts").map(|d| d.join("bench_vins_opencv.py"));
    let script = match (python, script) {
        (None, _) => {
            notes.push("OpenCV rows omitted: --opencv none".into());
            None
        }
        (Some(_), Some(s)) if s.is_file() => Some(s),
        _ => {
            notes.push(
                "OpenCV rows omitted: scripts/bench_vins_opencv.py not found (run from the \
                 repository)"
                    .into(),
            );
            None
        }
    };
    (python, script)
}

/// OpenCV's rows (1 thread, all) for a size and setting, mono then stereo; stops at an error.
#[allow(clippy::type_complexity)]
fn opencv_rows(
    (py, sc, tmp): (&str, &Path, &Path),
    size: Size,
    (seqs, pairs): (&[Vec<GrayImage>], &[Pair]),
    setting: (usize, f64),
    (rows, stereo_rows): (&mut Vec<TrackRow>, &mut Vec<StereoRow>),
) -> std::result::Result<(), String> {
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mono: Vec<&Vec<GrayImage>> = seqs.iter().collect();
    let lefts: Vec<&Vec<GrayImage>> = pairs.iter().map(|p| p.0).collect();
    let rights: Vec<&Vec<GrayImage>> = pairs.iter().map(|p| p.1).collect();
    for (threads, label) in [
        (1, "opencv-1".to_string()),
        (0, format!("opencv-N ({all})")),
    ] {
        let r = run_opencv_tracks(py, sc, tmp, size, &mono, None, setting, threads)
            .map(|v| rows.extend(opencv_row(&v, size, setting, label.clone())))
            .and_then(|()| match pairs.is_empty() {
                true => Ok(()),
                false => {
                    run_opencv_tracks(py, sc, tmp, size, &lefts, Some(&rights), setting, threads)
                        .map(|v| {
                            let r = stereo::opencv_row(&v, size.to_string(), setting.0, label);
                            stereo_rows.extend(r)
                        })
                }
            });
        if let Err(why) = r {
            eprintln!("  opencv: {why}");
            return Err(why);
        }
    }
    Ok(())
}

/// A stereo pan: the left camera's frames and the right one's.
type Pair<'a> = (&'a Vec<GrayImage>, &'a Vec<GrayImage>);

/// Our trackers' rows for one size and setting: mono on the pans `seqs`, stereo on the
/// `pairs`, on the GPU (unless `--backend cpu`) and the CPU (unless `--no-cpu`), into
/// `out` (rows, stereo rows, notes).
/// The CPU tracker's threads: the bench config's `cpu.threads` (`--set cpu.threads=1`),
/// auto = every core.
pub(super) fn cpu_threads(args: &BenchArgs) -> usize {
    super::load_config(args).map_or(1, |(c, _)| c.cpu.threads_for(false))
}

fn our_rows(
    args: &BenchArgs,
    size: Size,
    setting: (usize, f64),
    (seqs, pairs): (&[Vec<GrayImage>], &[Pair]),
    cpu_frames: usize,
    (rows, stereo_rows, notes): (&mut Vec<TrackRow>, &mut Vec<StereoRow>, &mut Vec<String>),
) {
    let want_gpu = args.backend != BackendChoice::Cpu;
    let params = TrackParams {
        max_features: setting.0,
        min_distance: setting.1,
        ransac_threshold: 0.0,
        ..Default::default()
    };
    // `kernel`: the frames of a second pass with LK's GPU time measured (its two events
    // cost host time, so the first pass, the one timed, goes without).
    let push =
        |rows: &mut Vec<TrackRow>, tracker: &str, (ms, n, st): Timed, kernel: &[FrameStats]| {
            let d = |f: fn(&FrameStats) -> f64| Dist::of(st.iter().map(f));
            eprintln!(
                "bench tracks {size} {} features, {tracker}: median {:.3} ms",
                setting.0,
                Dist::of(ms.iter().copied()).p50
            );
            rows.push(TrackRow {
                size: size.to_string(),
                max_features: setting.0,
                min_distance: setting.1,
                tracker: tracker.into(),
                tracks_mean: mean_count(&n),
                ms: Dist::of(ms),
                stages: Some([
                    d(|s| s.pyramid_ms),
                    d(|s| s.flow_ms),
                    d(|s| s.detect_ms),
                    Dist::of(kernel.iter().map(|s| s.lk_kernel_ms)),
                ]),
            });
        };
    if want_gpu {
        let (mut t, why) = Tracker::with_cuda(params);
        match why {
            None => {
                let r = time_tracker(
                    &mut t,
                    seqs,
                    (args.warmup, args.frames),
                    &mut Pacer::new(args.pace),
                );
                t.time_lk_kernel(true);
                let frames = (0, args.frames.min(100));
                let (_, _, kernel) = time_tracker(&mut t, seqs, frames, &mut Pacer::new(args.pace));
                if let Some(f) = t.gpu_failure() {
                    notes.push(format!("the GPU tracker fell back to the CPU: {f}"));
                }
                push(rows, "cuda", r, &kernel);
            }
            Some(why) => {
                if !notes.iter().any(|n| n.starts_with("GPU rows omitted")) {
                    notes.push(format!("GPU rows omitted: {why}"));
                }
            }
        }
    }
    let threads = cpu_threads(args);
    if !args.no_cpu || !want_gpu {
        let mut t = Tracker::new(params);
        t.set_threads(threads);
        let r = time_tracker(&mut t, seqs, (0, cpu_frames), &mut Pacer::new(args.pace));
        push(rows, "cpu", r, &[]);
    }
    // Stereo (VINS-Fusion's mode), on the pans with room for the right camera.
    let mut stereo_push = |tracker: &str, r: std::result::Result<_, String>| match r {
        Ok(m) => stereo_rows.push(stereo::our_row(size.to_string(), setting.0, tracker, m)),
        Err(why) => notes.push(format!("{size} stereo, {tracker}: {why}")),
    };
    if want_gpu && !pairs.is_empty() {
        if let (mut t, None) = Tracker::with_cuda(params) {
            stereo_push(
                "cuda",
                stereo::time_stereo(
                    &mut t,
                    pairs,
                    (args.warmup, args.frames),
                    &mut Pacer::new(args.pace),
                ),
            );
        }
    }
    if (!args.no_cpu || !want_gpu) && !pairs.is_empty() {
        let mut t = Tracker::new(params);
        t.set_threads(threads);
        stereo_push(
            "cpu",
            stereo::time_stereo(&mut t, pairs, (0, cpu_frames), &mut Pacer::new(args.pace)),
        );
    }
}

pub(super) fn run(
    args: &BenchArgs,
    sizes: &[Size],
    photos: &[Photo],
    mut notes: Vec<String>,
) -> Result<()> {
    let (python, script) = opencv_script(args, &mut notes);
    notes.push(format!(
        "ours, CPU: {} threads (`cpu.threads`; `--set cpu.threads=1` for one)",
        cpu_threads(args)
    ));
    let tmp = std::env::temp_dir().join(format!("gpu_features_tracks_{}", std::process::id()));
    if script.is_some() {
        std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    let cpu_frames = args.cpu_frames.unwrap_or(args.frames.min(20)).max(1);
    let mut rows = Vec::new();
    let mut stereo_rows: Vec<StereoRow> = Vec::new();
    let mut inputs = Vec::new();
    let mut opencv_failed: Option<String> = None;
    for &size in sizes {
        let pans = pan_sequences(photos, size);
        let (seqs, names) = (&pans.left, &pans.names);
        let pairs: Vec<(&Vec<GrayImage>, &Vec<GrayImage>)> = (pans.left.iter().zip(&pans.right))
            .filter_map(|(l, r)| r.as_ref().map(|r| (l, r)))
            .collect();
        if seqs.is_empty() {
            notes.push(format!(
                "{size}: no photo of at least {}x{} for a pan: size left out",
                size.width + PAN_STEP.0 * SEQ_LEN,
                size.height + PAN_STEP.1 * SEQ_LEN
            ));
            continue;
        }
        inputs.push(format!(
            "- {size}: {} pans of {SEQ_LEN} frames over {}\n",
            seqs.len(),
            names.join(", ")
        ));
        for setting in SETTINGS {
            let ours = (seqs.as_slice(), pairs.as_slice());
            let out = (&mut rows, &mut stereo_rows, &mut notes);
            our_rows(args, size, setting, ours, cpu_frames, out);
            if let (Some(py), Some(sc), None) = (python, &script, &opencv_failed) {
                let io = (py, sc.as_path(), tmp.as_path());
                let r = opencv_rows(
                    io,
                    size,
                    (seqs, &pairs),
                    setting,
                    (&mut rows, &mut stereo_rows),
                );
                if let Err(why) = r {
                    opencv_failed = Some(why);
                }
            }
        }
    }
    if let Some(why) = opencv_failed {
        notes.push(format!("OpenCV rows omitted: {why}"));
    }
    let _ = std::fs::remove_dir_all(&tmp);

    let gpu_desc = gpu_info();
    let md = markdown(
        args,
        cpu_frames,
        (&inputs, &notes),
        (&rows, &stereo_rows),
        gpu_desc.as_deref(),
    );
    emit(args, &md, || {
        json!({
            "date": utc_date(),
            "command": command_line(),
            "gpu": gpu_desc,
            "cpu": cpu_model(),
            "frames": args.frames,
            "warmup": args.warmup,
            "notes": notes,
            "tracks": rows,
            "stereo": stereo_rows,
        })
    })
}

#[cfg(test)]
mod tests;
