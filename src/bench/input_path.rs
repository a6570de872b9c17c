//! `gpu_features bench --input-path`: the pieces of a frame's way from a pageable buffer to
//! the GPU, timed one by one (docs/performance.md, "Input path"), so that one device run
//! says which of them to attack: the copy into pinned staging on 1..N threads, into
//! write-combined or plain pinned memory, the upload from pinned or pageable memory, and
//! the pipeline's own path (`decode::stage_and_upload`: pieces copied on the pool, each
//! uploaded as soon as it is in) against copy-then-upload, back to back and after an idle
//! gap like the GPU part of a frame (when the pool's threads have gone to sleep).

use super::*;

use crate::cuda::buffers::{upload, DevBuf, HostBuf};
use crate::cuda::decode::{copy_to_staging, stage_and_upload_by, CopyCrew};
use crate::cuda::Gpu;

/// Distinct source frames, rotated, so that the source is not always in cache.
const SOURCES: usize = 8;

/// Idle time before each call of the "after idle" rows: about the GPU part of a 1080p frame.
const IDLE: std::time::Duration = std::time::Duration::from_micros(300);

/// Median and p90 (ms) of `runs` calls of `f(i)` after 10 untimed ones.
fn time(runs: usize, f: impl FnMut(usize) -> Result<()>) -> Result<Stat> {
    time_after(runs, None, f)
}

/// [`time`], sleeping `idle` (untimed) before each call when given.
fn time_after(
    runs: usize,
    idle: Option<std::time::Duration>,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<Stat> {
    for i in 0..10 {
        f(i)?;
    }
    let mut ms = Vec::with_capacity(runs);
    for i in 0..runs {
        if let Some(d) = idle {
            std::thread::sleep(d);
        }
        let t = Instant::now();
        f(i)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Stat::of(&ms).ok_or_else(|| Error::Config("--frames must be at least 1".into()))
}

fn pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Config(format!("thread pool: {e}")))
}

/// One size: rows of (what, stat).
fn measure(gpu: &Gpu, bytes: usize, runs: usize) -> Result<Vec<(String, Stat)>> {
    let src: Vec<Vec<u8>> = (0..SOURCES)
        .map(|k| (0..bytes).map(|i| (i * 7 + k * 13) as u8).collect())
        .collect();
    let mut wc = HostBuf::new(&gpu.ctx, bytes, true)?;
    let mut plain = HostBuf::new(&gpu.ctx, bytes, false)?;
    let dev = DevBuf::new(&gpu.ctx, bytes)?;
    let mut rows = Vec::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1, 2, 4, 8, 16];
    counts.retain(|&n| n <= cores.max(1));
    for (name, buf) in [("write-combined", &mut wc), ("plain", &mut plain)] {
        for &n in &counts {
            let p = pool(n)?;
            let s = time(runs, |i| {
                let dst = &mut buf.as_mut_slice()[..bytes];
                p.install(|| copy_to_staging(dst, &src[i % SOURCES]));
                Ok(())
            })?;
            rows.push((format!("copy into {name} pinned memory, {n} thread(s)"), s));
        }
    }
    let s = time(runs, |_| {
        upload(&gpu.stream, &wc, dev.ptr(), bytes)?;
        gpu.sync()
    })?;
    rows.push(("upload from pinned memory (async + sync)".into(), s));
    let s = time(runs, |i| {
        unsafe { cudarc::driver::result::memcpy_htod_sync(dev.ptr(), &src[i % SOURCES][..]) }
            .map_err(|e| crate::cuda::context::cuda_err("pageable upload", e))
    })?;
    rows.push(("upload from pageable memory (cuMemcpyHtoD)".into(), s));
    // The last rows run on rayon's global pool, as the pipeline does; the "after idle" ones
    // are what a pipeline sees (the pool's threads asleep during the GPU part of a frame).
    for idle in [None, Some(IDLE)] {
        let after = if idle.is_some() {
            ", after 0.3 ms idle"
        } else {
            ""
        };
        let s = time_after(runs, idle, |i| {
            copy_to_staging(&mut wc.as_mut_slice()[..bytes], &src[i % SOURCES]);
            upload(&gpu.stream, &wc, dev.ptr(), bytes)?;
            gpu.sync()
        })?;
        rows.push((format!("copy (all threads) then upload{after}"), s));
        for (crew, wc_buf, what) in [
            (CopyCrew::Pool, true, "on the pool"),
            (CopyCrew::ThisThread, true, "on this thread"),
            (CopyCrew::ThisThread, false, "on this thread, plain pinned"),
        ] {
            let buf = if wc_buf { &mut wc } else { &mut plain };
            let s = time_after(runs, idle, |i| {
                stage_and_upload_by(&gpu.stream, buf, dev.ptr(), &src[i % SOURCES], crew)?;
                gpu.sync()
            })?;
            rows.push((
                format!("pieces copied {what}, each uploaded when copied{after}"),
                s,
            ));
        }
    }
    Ok(rows)
}

/// Runs the probe for 1080p mono8 (2 MB) and bgr8 (6 MB) frames and 4K mono8; prints and
/// writes (--markdown) the table.
pub(super) fn run(args: &BenchArgs) -> Result<()> {
    let gpu = Gpu::new()?;
    gpu.bind()?;
    let cases = [
        ("1920x1080 mono8", 1920 * 1080),
        ("1920x1080 bgr8", 1920 * 1080 * 3),
        ("3840x2160 mono8", 3840 * 2160),
    ];
    let runs = args.frames.max(1);
    let mut md = format!("## gpu_features bench --input-path, {}\n\n", utc_date());
    md.push_str(&format!("- command: `{}`\n", command_line()));
    md.push_str(&format!("- GPU: {}\n- CPU: {}\n", gpu.name, cpu_model()));
    md.push_str(&format!(
        "- {runs} timed calls after 10 untimed per row, {SOURCES} distinct pageable source \
         frames rotated; median ms (p90)\n\n| | {} |\n|---|{}\n",
        cases.map(|c| c.0).join(" | "),
        "---:|".repeat(cases.len())
    ));
    let mut table: Vec<(String, Vec<Stat>)> = Vec::new();
    for (k, &(_, bytes)) in cases.iter().enumerate() {
        for (j, (what, s)) in measure(&gpu, bytes, runs)?.into_iter().enumerate() {
            if k == 0 {
                table.push((what, Vec::new()));
            }
            table[j].1.push(s);
        }
    }
    for (what, stats) in &table {
        let cells: Vec<String> = stats
            .iter()
            .map(|s| format!("{} ({})", fmt_ms(s.median), fmt_ms(s.p90)))
            .collect();
        md.push_str(&format!("| {what} | {} |\n", cells.join(" | ")));
    }
    print!("{md}");
    if let Some(p) = &args.markdown {
        std::fs::write(p, &md).map_err(|e| Error::io(p, e))?;
    }
    Ok(())
}
