//! `gpu_features bench --input-path`: the pieces of a frame's way from a pageable buffer to
//! the GPU, timed one by one (docs/performance.md, "Input path"), so that one device run
//! says which of them to attack: the copy into pinned staging on 1..N threads with plain or
//! streaming stores, the upload from pinned or pageable memory, copy-then-upload, and the
//! pipeline's own path (`decode::stage_and_upload`: pieces copied by the crew, or on
//! rayon's pool or this thread for comparison, each uploaded as soon as it is in), and for
//! the bgr8 frame its conversion to gray during the copy (`cuda.host_gray`, change 73), back
//! to back and after an idle gap like the GPU part of a frame (when the helpers sleep).

use super::*;

use crate::cuda::canny::unpack_edges;
use crate::cuda::decode::{
    copy_in_pieces, copy_streaming_into, gray_in_pieces, stage_and_upload_by,
    stage_gray_and_upload, Helpers, COPY_CHUNK,
};
use crate::cuda::driver::buffers::{download, upload, DevBuf, HostBuf};
use crate::cuda::Gpu;
use crate::image::{Encoding, FrameLayout};
use rayon::prelude::*;

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

/// `dst.copy_from_slice(src)` on the current rayon pool, in [`COPY_CHUNK`] chunks, with
/// plain or streaming stores.
fn copy_on_pool(dst: &mut [u8], src: &[u8], streaming: bool) {
    dst.par_chunks_mut(COPY_CHUNK)
        .zip(src.par_chunks(COPY_CHUNK))
        .for_each(|(d, s)| {
            if streaming {
                copy_streaming_into(d, s)
            } else {
                d.copy_from_slice(s)
            }
        });
}

/// The copy of a frame (`src`'s frames rotated) into pinned memory on 1.. threads with
/// plain and streaming stores, its upload from pinned and from pageable memory, and both.
fn copy_and_upload_rows(
    gpu: &Gpu,
    (host, dev): (&mut HostBuf, &DevBuf<u8>),
    src: &[Vec<u8>],
    runs: usize,
) -> Result<Vec<(String, Option<Stat>)>> {
    let bytes = dev.len();
    let mut rows = Vec::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1, 2, 4, 8, 16];
    counts.retain(|&n| n <= cores.max(1));
    for (stores, streaming) in [("plain", false), ("streaming", true)] {
        for &n in &counts {
            let p = pool(n)?;
            let s = time(runs, |i| {
                let dst = &mut host.as_mut_slice()[..bytes];
                p.install(|| copy_on_pool(dst, &src[i % SOURCES], streaming));
                Ok(())
            })?;
            rows.push((
                format!("copy into pinned memory, {n} thread(s), {stores} stores"),
                Some(s),
            ));
        }
    }
    let s = time(runs, |_| {
        upload(&gpu.stream, host, dev.ptr(), bytes)?;
        gpu.sync()
    })?;
    rows.push(("upload from pinned memory (async + sync)".into(), Some(s)));
    let s = time(runs, |i| dev.copy_from_sync(&src[i % SOURCES][..]))?;
    rows.push(("upload from pageable memory (cuMemcpyHtoD)".into(), Some(s)));
    // Copy, then upload: after plain stores the upload reads cache lines that are dirty in
    // the CPUs' caches (change 23).
    let eight = pool(8.min(cores.max(1)))?;
    for (stores, streaming) in [("plain", false), ("streaming", true)] {
        let s = time(runs, |i| {
            let dst = &mut host.as_mut_slice()[..bytes];
            eight.install(|| copy_on_pool(dst, &src[i % SOURCES], streaming));
            upload(&gpu.stream, host, dev.ptr(), bytes)?;
            gpu.sync()
        })?;
        rows.push((
            format!("copy on 8 threads ({stores} stores), then upload"),
            Some(s),
        ));
    }
    Ok(rows)
}

/// One size (`bytes` of a frame of `pixels` pixels): rows of (what, stat); the rows of the
/// conversion to gray (`cuda.host_gray`) only for a 3-byte colour frame (bgr8), `None`
/// otherwise.
fn measure(
    gpu: &Gpu,
    bytes: usize,
    pixels: (usize, usize),
    runs: usize,
) -> Result<Vec<(String, Option<Stat>)>> {
    let src: Vec<Vec<u8>> = (0..SOURCES)
        .map(|k| (0..bytes).map(|i| (i * 7 + k * 13) as u8).collect())
        .collect();
    let mut host = HostBuf::new(&gpu.ctx, bytes, true)?;
    let dev = DevBuf::new(&gpu.ctx, bytes)?;
    let mut rows = copy_and_upload_rows(gpu, (&mut host, &dev), &src, runs)?;
    // Canny's floor from a pageable frame: the pipeline's input path, then its output path
    // (the packed edge map, a bit per pixel, back to the host and unpacked to bytes by the
    // crew) with no kernel between them. No GPU Canny from a pageable frame into a byte
    // image can take less on this machine (docs/performance.md, "Floors").
    let (w, h) = pixels;
    let words_per_row = w.div_ceil(32);
    let packed = words_per_row * 4 * h;
    let bits_dev = DevBuf::<u8>::new(&gpu.ctx, packed)?;
    let mut bits = HostBuf::new(&gpu.ctx, packed, false)?;
    let mut edges = vec![0u8; w * h];
    // The pipeline's path (source frame i, copied in pieces by `helpers`, each uploaded
    // when copied): the "after idle" rows are what a pipeline sees (the helpers asleep
    // during the GPU part of a frame).
    let upload_frame = |host: &mut HostBuf, i: usize, helpers: Helpers| {
        stage_and_upload_by(&gpu.stream, host, dev.ptr(), &src[i % SOURCES], helpers)
    };
    for idle in [None, Some(IDLE)] {
        let after = if idle.is_some() {
            ", after 0.3 ms idle"
        } else {
            ""
        };
        let s = time_after(runs, idle, |i| {
            copy_in_pieces(
                &src[i % SOURCES],
                &mut host.as_mut_slice()[..bytes],
                Helpers::Crew,
                |_, _| Ok(()),
            )
        })?;
        rows.push((
            format!("pieces copied by the crew, no upload{after}"),
            Some(s),
        ));
        for (helpers, what) in [
            (Helpers::Crew, "by the crew"),
            (Helpers::Pool, "on rayon's pool"),
            (Helpers::ThisThread, "on this thread"),
        ] {
            let s = time_after(runs, idle, |i| {
                upload_frame(&mut host, i, helpers)?;
                gpu.sync()
            })?;
            rows.push((
                format!("pieces copied {what}, each uploaded when copied{after}"),
                Some(s),
            ));
        }
        let s = time_after(runs, idle, |i| {
            upload_frame(&mut host, i, Helpers::Crew)?;
            download(&gpu.stream, bits_dev.ptr(), &mut bits, 0, packed)?;
            gpu.sync()?;
            unpack_edges(&bits.as_slice()[..packed], w, h, words_per_row, &mut edges);
            Ok(())
        })?;
        rows.push((
            format!(
                "Canny's floor: the pipeline's upload, then a packed edge map downloaded and \
                 unpacked by the crew, no kernel{after}"
            ),
            Some(s),
        ));
        gray_rows(
            gpu,
            (&mut host, &dev),
            &src,
            (pixels, runs, idle),
            &mut rows,
        )?;
    }
    Ok(rows)
}

/// Runs the probe for 720p mono8, 1080p mono8 (2 MB) and bgr8 (6 MB) frames and 4K mono8;
/// prints and writes (--markdown) the table.
pub(super) fn run(args: &BenchArgs) -> Result<()> {
    let gpu = Gpu::new()?;
    gpu.bind()?;
    let cases = [
        ("1280x720 mono8", (1280, 720), 1),
        ("1920x1080 mono8", (1920, 1080), 1),
        ("1920x1080 bgr8", (1920, 1080), 3),
        ("3840x2160 mono8", (3840, 2160), 1),
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
    let mut table: Vec<(String, Vec<Option<Stat>>)> = Vec::new();
    for (k, &(_, (w, h), channels)) in cases.iter().enumerate() {
        for (j, (what, s)) in measure(&gpu, w * h * channels, (w, h), runs)?
            .into_iter()
            .enumerate()
        {
            if k == 0 {
                table.push((what, Vec::new()));
            }
            table[j].1.push(s);
        }
    }
    for (what, stats) in &table {
        let cells: Vec<String> = stats
            .iter()
            .map(|s| match s {
                Some(s) => format!("{} ({})", fmt_ms(s.median), fmt_ms(s.p90)),
                None => "-".into(),
            })
            .collect();
        md.push_str(&format!("| {what} | {} |\n", cells.join(" | ")));
    }
    print!("{md}");
    if let Some(p) = &args.markdown {
        std::fs::write(p, &md).map_err(|e| Error::io(p, e))?;
    }
    Ok(())
}

/// [`measure`]'s `cuda.host_gray` rows, after `idle` (None: back to back): the colour frame
/// converted to gray while it is copied, by this thread alone or with the crew, and the
/// pipeline's own path; rows of "-" when `src`'s frames are not bgr8 of `pixels`.
fn gray_rows(
    gpu: &Gpu,
    (host, dev): (&mut HostBuf, &DevBuf<u8>),
    src: &[Vec<u8>],
    (pixels, runs, idle): ((usize, usize), usize, Option<std::time::Duration>),
    rows: &mut Vec<(String, Option<Stat>)>,
) -> Result<()> {
    let (w, h) = pixels;
    let bytes = src[0].len();
    let after = if idle.is_some() {
        ", after 0.3 ms idle"
    } else {
        ""
    };
    // `cuda.host_gray`: the colour frame converted to gray while it is copied, by this
    // thread alone or with the crew, and the pipeline's own path (the crew's pieces of the
    // gray image uploaded as they come, `stage_gray_and_upload`). Rows of "-" for the
    // frames that are not bgr8.
    let names = [
        "on this thread, no upload",
        "by the crew, no upload",
        "by the crew, each piece uploaded when converted",
    ];
    let mut gray_stats = [None; 3];
    if bytes == 3 * w * h {
        let layout = FrameLayout {
            width: w,
            height: h,
            step: 3 * w,
            encoding: Encoding::Bgr8,
            big_endian: false,
        };
        for (k, helpers) in [Helpers::ThisThread, Helpers::Crew].into_iter().enumerate() {
            gray_stats[k] = Some(time_after(runs, idle, |i| {
                let dst = &mut host.as_mut_slice()[..w * h];
                gray_in_pieces(&src[i % SOURCES], layout, dst, helpers, |_, _| Ok(()))?;
                gpu.sync()
            })?);
        }
        gray_stats[2] = Some(time_after(runs, idle, |i| {
            stage_gray_and_upload(&gpu.stream, host, dev.ptr(), &src[i % SOURCES], layout)?;
            gpu.sync()
        })?);
    }
    for (what, s) in names.into_iter().zip(gray_stats) {
        rows.push((format!("bgr8 converted to gray {what}{after}"), s));
    }
    Ok(())
}
