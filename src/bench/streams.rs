//! `gpu_features bench --streams N,...`: throughput of N pipelines running at once, one OS
//! thread each (on the GPU each pipeline has its own CUDA stream), on distinct frames.
//!
//! Per size and count N: the first N of max(N) pipelines (created once: buffers and kernels
//! are per pipeline) each get a thread; thread t processes frames t, t+1, ... of the size's
//! distinct frames, so concurrent threads never work on the same frame. `--warmup` frames
//! untimed, then a barrier so that every thread starts timing together, then `--frames`
//! timed `process_into` calls into one reused `Features`. Aggregate frames/s is
//! N * frames / (first thread's start .. last thread's end); latency is the wall time of
//! each call, nearest-rank p50/p99 over all N * frames calls.

use super::*;

use std::sync::Barrier;

use serde::Serialize;

use crate::report::Dist;

/// One table row: N pipelines at one size.
#[derive(Debug, Serialize)]
pub(super) struct StreamsRow {
    pub(super) streams: usize,
    pub(super) size: String,
    pub(super) backend: &'static str,
    /// Timed frames over all threads: streams * --frames.
    pub(super) frames: usize,
    /// From the first thread's timed start to the last thread's last frame.
    pub(super) wall_s: f64,
    pub(super) frames_per_s: f64,
    /// frames_per_s over the 1-stream row's of the same size; null without one.
    pub(super) vs_1_stream: Option<f64>,
    /// Wall time of each `process_into`, ms, over every frame of every thread.
    pub(super) latency_ms: Dist,
}

/// What one thread measured: per-frame latencies (ms) and its timed span.
struct Lane {
    lat: Vec<f64>,
    start: Instant,
    end: Instant,
}

fn lane(
    p: &mut Pipeline,
    views: &[ImageView],
    offset: usize,
    (warmup, n): (usize, usize),
    barrier: &Barrier,
) -> Result<Lane> {
    let mut out = Features::default();
    let mut lat = Vec::with_capacity(n);
    let at = |i: usize| &views[(offset + i) % views.len()];
    let warm = (0..warmup).try_for_each(|i| p.process_into(at(i), &mut out));
    // Every thread reaches the barrier, even after a failed warm-up, so that none waits
    // forever for it.
    barrier.wait();
    warm?;
    let start = Instant::now();
    for i in warmup..warmup + n {
        let t = Instant::now();
        p.process_into(at(i), &mut out)?;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Lane {
        lat,
        start,
        end: Instant::now(),
    })
}

/// Runs every pipeline of `pipes` on its own thread; returns (wall s, latencies ms).
fn measure_streams(
    pipes: &mut [Pipeline],
    views: &[ImageView],
    warmup: usize,
    n: usize,
) -> Result<(f64, Vec<f64>)> {
    let barrier = Barrier::new(pipes.len());
    let lanes: Vec<Result<Lane>> = std::thread::scope(|s| {
        let handles: Vec<_> = pipes
            .iter_mut()
            .enumerate()
            .map(|(t, p)| {
                let b = &barrier;
                s.spawn(move || lane(p, views, t, (warmup, n), b))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Config("bench: a stream thread panicked".into()))
                })
            })
            .collect()
    });
    let lanes = lanes.into_iter().collect::<Result<Vec<Lane>>>()?;
    let span = lanes
        .iter()
        .map(|l| l.start)
        .min()
        .zip(lanes.iter().map(|l| l.end).max());
    let wall = span.map_or(0.0, |(a, b)| (b - a).as_secs_f64());
    Ok((wall, lanes.into_iter().flat_map(|l| l.lat).collect()))
}

/// Sets each row's rate relative to the 1-stream row of its size (same run).
pub(super) fn fill_ratios(rows: &mut [StreamsRow]) {
    let one: Vec<(String, f64)> = rows
        .iter()
        .filter(|r| r.streams == 1)
        .map(|r| (r.size.clone(), r.frames_per_s))
        .collect();
    for r in rows.iter_mut() {
        r.vs_1_stream = one
            .iter()
            .find(|(z, _)| *z == r.size)
            .filter(|(_, f)| *f > 0.0)
            .map(|(_, f)| r.frames_per_s / f);
    }
}

pub(super) fn table(rows: &[StreamsRow]) -> String {
    let mut s = String::from(
        "| streams | aggregate frames/s | x 1 stream | latency p50 / p99 (ms) | backend | size |\n\
         |---:|---:|---:|---:|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.1} | {} | {} / {} | {} | {} |\n",
            r.streams,
            r.frames_per_s,
            r.vs_1_stream.map_or("—".into(), |x| format!("{x:.2}x")),
            fmt_ms(r.latency_ms.p50),
            fmt_ms(r.latency_ms.p99),
            r.backend,
            r.size
        ));
    }
    s
}

/// The report of `bench --streams`: what ran on what, the method, the table.
fn markdown(
    args: &BenchArgs,
    (cfg_name, photos, from_bench_data): (&str, usize, bool),
    (gpu, gpu_desc): (bool, Option<&str>),
    (inputs, notes): (&[String], &[String]),
    rows: &[StreamsRow],
) -> String {
    let mut md = format!("## gpu_features bench --streams, {}\n\n", utc_date());
    md.push_str(&format!("- command: `{}`\n", command_line()));
    md.push_str(&gpu_line(gpu, gpu_desc));
    md.push_str(&format!("- CPU: {}\n", cpu_model()));
    md.push_str(&format!("- config: {cfg_name}\n"));
    md.push_str(&format!(
        "- inputs: mono8 frames per size, {} ({} photos)\n",
        if from_bench_data {
            "crops (not scaled) of real photos"
        } else {
            "mosaics of tests/data photos"
        },
        photos
    ));
    for l in inputs {
        md.push_str(l);
    }
    md.push_str(&format!(
        "- method: N pipelines on N threads{}; thread t processes frames t, t+1, ...; {} \
         untimed warm-up frames each, then all start together and each times {} \
         `process_into` calls\n",
        if gpu { ", one CUDA stream each" } else { "" },
        args.warmup,
        args.frames
    ));
    for n in notes {
        md.push_str(&format!("- note: {n}\n"));
    }
    md.push_str(
        "\nAggregate frames/s: N x frames over the wall time from the common start to the \
         last thread's end; x 1 stream: that over the 1-stream rate of the same size; \
         latency: wall time of each call over every frame of every thread (nearest rank).\n\n",
    );
    md.push_str(&table(rows));
    md
}

/// `gpu_features bench --streams ...`: this measurement only, reported on stdout,
/// `--markdown` and `--json`.
pub(super) fn run(
    args: &BenchArgs,
    cfg: &Config,
    cfg_name: &str,
    photos: &[Photo],
    from_bench_data: bool,
    mut notes: Vec<String>,
) -> Result<()> {
    let max_n = args.streams.iter().copied().max().unwrap_or(1);
    let first = Pipeline::new(cfg.clone(), args.backend)?;
    let kind = first.backend();
    if let Some(why) = first.fallback_reason() {
        notes.push(format!("no usable CUDA device, CPU pipelines ({why})"));
    }
    // The others on the backend the first one got, so that every row measures one backend.
    let choice = match kind {
        BackendKind::Cuda => BackendChoice::Cuda,
        BackendKind::Cpu => BackendChoice::Cpu,
    };
    let mut pipes = vec![first];
    for _ in 1..max_n {
        pipes.push(Pipeline::new(cfg.clone(), choice)?);
    }
    // At least one frame per thread, so that concurrent threads never share one.
    let distinct = args.distinct.max(max_n);
    let mut rows = Vec::new();
    let mut inputs = Vec::new();
    for &size in &args.sizes {
        let set = make_frames(photos, size, distinct);
        inputs.push(format!(
            "- {size}: {} distinct {}\n",
            set.frames.len(),
            if set.tiled { "mosaics" } else { "crops" }
        ));
        let views = views_of(&set.frames)?;
        for &n in &args.streams {
            let (wall, lat) = measure_streams(&mut pipes[..n], &views, args.warmup, args.frames)?;
            let frames = lat.len();
            let row = StreamsRow {
                streams: n,
                size: size.to_string(),
                backend: kind.name(),
                frames,
                wall_s: wall,
                frames_per_s: if wall > 0.0 {
                    frames as f64 / wall
                } else {
                    0.0
                },
                vs_1_stream: None,
                latency_ms: Dist::of(lat),
            };
            eprintln!(
                "bench {size}, streams {n}: {:.1} frames/s, latency p50 {:.3} ms",
                row.frames_per_s, row.latency_ms.p50
            );
            rows.push(row);
        }
    }
    fill_ratios(&mut rows);
    if let Some(p) = pipes.iter().find_map(|p| p.gpu_failure()) {
        notes.push(format!("a GPU pipeline fell back to the CPU mid-run: {p}"));
    }

    let gpu = kind == BackendKind::Cuda;
    let gpu_desc = gpu_info();
    let md = markdown(
        args,
        (cfg_name, photos.len(), from_bench_data),
        (gpu, gpu_desc.as_deref()),
        (&inputs, &notes),
        &rows,
    );
    emit(args, &md, || {
        json!({
            "date": utc_date(),
            "command": command_line(),
            "backend": kind.name(),
            "gpu": gpu_desc,
            "cpu": cpu_model(),
            "config": cfg_name,
            "frames": args.frames,
            "warmup": args.warmup,
            "notes": notes,
            "streams": rows,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(streams: usize, size: &str, fps: f64) -> StreamsRow {
        StreamsRow {
            streams,
            size: size.into(),
            backend: "cpu",
            frames: streams,
            wall_s: 1.0,
            frames_per_s: fps,
            vs_1_stream: None,
            latency_ms: Dist::of([1.0, 2.0]),
        }
    }

    #[test]
    fn ratios_are_to_the_one_stream_row_of_the_same_size() {
        let mut rows = vec![
            row(1, "96x64", 100.0),
            row(4, "96x64", 350.0),
            row(1, "128x96", 50.0),
            row(2, "128x96", 90.0),
            row(2, "200x100", 10.0),
        ];
        fill_ratios(&mut rows);
        let got: Vec<Option<f64>> = rows.iter().map(|r| r.vs_1_stream).collect();
        assert_eq!(got, [Some(1.0), Some(3.5), Some(1.0), Some(1.8), None]);
        let t = table(&rows);
        assert!(
            t.contains("| 4 | 350.0 | 3.50x | 1.00 / 2.00 | cpu | 96x64 |"),
            "{t}"
        );
        assert!(t.contains("| 2 | 10.0 | — |"), "{t}");
    }
}
