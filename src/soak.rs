//! `gpu_features soak`: a long run of the pipeline at a camera's rate, to catch what short
//! tests do not: memory that grows frame after frame, throughput that decays, a malformed
//! frame that slips through validation or a valid one that fails.
//!
//! The stream mixes resolutions (640x480, 1280x720, 1920x1080) and encodings (mono8, bgr8
//! with row padding, rgb8, mono16, yuv422), replaces about 1% of the frames by malformed
//! ones (short buffer, step smaller than a row, unknown encoding), and changes the config
//! every `config_every` (through the same dotted-key updates as `--set`, each followed by an
//! invalid update that must be refused). RSS (`VmRSS` of `/proc/self/status`) is sampled
//! every `sample_every`.
//!
//! Pass/fail (what [`SoakReport::failures`] lists):
//! * every malformed frame is rejected and every valid frame is processed;
//! * RSS after the warm-up (the first 10% of the run, at least one sample) never exceeds the
//!   warm-up's largest sample by more than `rss_growth_limit_mib`;
//! * no full minute's throughput falls below `min_throughput_ratio` times the first full
//!   minute's. Throughput here is frames per second of this thread's CPU time in
//!   `Pipeline::process_into` (`/proc/thread-self/schedstat`), so that other processes
//!   competing for the cores do not make the run fail; the wall-clock rate is reported too.
//!   Where that file is missing the wall-clock busy time is used.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::Result;
use crate::image::{Encoding, ImageView};
use crate::pipeline::{BackendChoice, Features, Pipeline};

/// Knobs of a soak run; [`Default`] is the documented 30 Hz, 1% malformed mix.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    pub duration: Duration,
    /// Target frame rate (frames are paced, not pushed as fast as possible).
    pub rate_hz: f64,
    /// Share of malformed frames, in percent.
    pub malformed_percent: f64,
    pub sample_every: Duration,
    pub config_every: Duration,
    pub rss_growth_limit_mib: f64,
    pub min_throughput_ratio: f64,
    pub seed: u64,
    pub backend: BackendChoice,
    /// Frame sizes (width, height) in the mix.
    pub sizes: Vec<(usize, usize)>,
    /// Print a progress line per RSS sample on stderr.
    pub progress: bool,
}

impl Default for SoakOptions {
    fn default() -> Self {
        SoakOptions {
            duration: Duration::from_secs(30 * 60),
            rate_hz: 30.0,
            malformed_percent: 1.0,
            sample_every: Duration::from_secs(10),
            config_every: Duration::from_secs(20),
            rss_growth_limit_mib: 64.0,
            min_throughput_ratio: 0.5,
            seed: 0x5eed,
            backend: BackendChoice::Cpu,
            sizes: vec![(640, 480), (1280, 720), (1920, 1080)],
            progress: true,
        }
    }
}

/// One RSS sample.
#[derive(Clone, Copy, Debug)]
pub struct RssSample {
    pub seconds: f64,
    pub frames: u64,
    pub rss_kib: u64,
    /// Device memory in use (CUDA backend only), KiB.
    pub gpu_used_kib: Option<u64>,
}

/// One minute (or the last, partial, period) of the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct MinuteStat {
    /// Frames offered (valid and malformed).
    pub frames: u64,
    /// Valid frames processed.
    pub processed: u64,
    /// Total time spent in `Pipeline::process_into` for them, seconds.
    pub busy_s: f64,
    /// This thread's CPU time in `Pipeline::process_into`, seconds.
    pub cpu_s: f64,
    /// Length of the period, seconds (60 except for the last).
    pub seconds: f64,
}

impl MinuteStat {
    /// Processed frames per second of CPU time spent on them.
    pub fn capacity(&self) -> f64 {
        self.processed as f64 / self.cpu_s.max(1e-9)
    }
}

/// Counts per kind of malformed frame: (injected, rejected).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MalformedCounts {
    pub short_buffer: (u64, u64),
    pub wrong_step: (u64, u64),
    pub unknown_encoding: (u64, u64),
}

impl MalformedCounts {
    pub fn injected(&self) -> u64 {
        self.short_buffer.0 + self.wrong_step.0 + self.unknown_encoding.0
    }
    pub fn rejected(&self) -> u64 {
        self.short_buffer.1 + self.wrong_step.1 + self.unknown_encoding.1
    }
}

#[derive(Clone, Debug, Default)]
pub struct SoakReport {
    pub elapsed_s: f64,
    pub frames: u64,
    /// Valid frames processed without error.
    pub processed: u64,
    /// Valid frames that returned an error (must be 0).
    pub failed: u64,
    pub malformed: MalformedCounts,
    pub config_changes: u64,
    /// Invalid config updates refused (one per change; all must be refused).
    pub bad_configs_refused: u64,
    pub keypoints: u64,
    /// Frames per (encoding name, width, height), valid ones only.
    pub mix: Vec<(String, usize, usize, u64)>,
    pub minutes: Vec<MinuteStat>,
    pub rss: Vec<RssSample>,
    /// Largest RSS during the warm-up, KiB.
    pub rss_baseline_kib: u64,
    /// Largest device memory use during the warm-up (CUDA backend), KiB.
    pub gpu_baseline_kib: Option<u64>,
    pub rss_limit_mib: f64,
    /// Why the run failed; empty when it passed.
    pub failures: Vec<String>,
}

/// `VmRSS` of this process in KiB (Linux), `None` elsewhere.
pub fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time of the calling thread in nanoseconds (Linux schedstat), `None` elsewhere.
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// xorshift64*: deterministic, dependency-free frame and fault choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A synthetic scene: overlapping rectangles and discs of random gray levels on a gradient,
/// with mild noise, so that every stage (corners, edges, descriptors) has work to do.
fn scene(width: usize, height: usize, rng: &mut Rng) -> Vec<u8> {
    let mut img: Vec<u8> = (0..width * height)
        .map(|i| (((i % width) * 96 / width) + ((i / width) * 64 / height)) as u8)
        .collect();
    for _ in 0..(width * height / 4000) {
        let (cx, cy) = (rng.below(width), rng.below(height));
        let r = 4 + rng.below(40);
        let v = rng.below(256) as u8;
        let disc = rng.below(2) == 0;
        for y in cy.saturating_sub(r)..(cy + r).min(height) {
            for x in cx.saturating_sub(r)..(cx + r).min(width) {
                let (dx, dy) = (x.abs_diff(cx), y.abs_diff(cy));
                if !disc || dx * dx + dy * dy <= r * r {
                    img[y * width + x] = v;
                }
            }
        }
    }
    for p in img.iter_mut() {
        *p = p.saturating_add((rng.next() % 5) as u8);
    }
    img
}

/// One prepared input frame.
struct Frame {
    data: Vec<u8>,
    width: usize,
    height: usize,
    step: usize,
    encoding: Encoding,
}

impl Frame {
    fn view(&self) -> std::result::Result<ImageView<'_>, crate::DecodeError> {
        ImageView::new(
            &self.data,
            self.width,
            self.height,
            self.step,
            self.encoding.name(),
            false,
        )
    }
}

/// The encodings of the mix; bgr8 rows are padded by 64 bytes.
const MIX: [(Encoding, usize); 5] = [
    (Encoding::Mono8, 0),
    (Encoding::Bgr8, 64),
    (Encoding::Rgb8, 0),
    (Encoding::Mono16, 0),
    (Encoding::Uyvy, 0),
];

fn encode(gray: &[u8], width: usize, height: usize, enc: Encoding, pad: usize) -> Frame {
    let bpp = enc.bytes_per_pixel();
    let step = width * bpp + pad;
    let mut data = vec![0u8; step * height];
    for y in 0..height {
        let src = &gray[y * width..(y + 1) * width];
        let dst = &mut data[y * step..y * step + width * bpp];
        for (x, &g) in src.iter().enumerate() {
            let px = &mut dst[x * bpp..(x + 1) * bpp];
            match enc {
                Encoding::Mono8 => px[0] = g,
                // Channels differ a little so the colour conversion matters.
                Encoding::Rgb8 | Encoding::Bgr8 => {
                    px.copy_from_slice(&[g, g.saturating_sub(20), g.saturating_add(20)])
                }
                Encoding::Mono16 => px.copy_from_slice(&(g as u16 * 257).to_le_bytes()),
                // U Y0 V Y1: chroma on even bytes, luma on odd ones.
                Encoding::Uyvy => px.copy_from_slice(&[128, g]),
                _ => unreachable!("not in the soak mix"),
            }
        }
    }
    Frame {
        data,
        width,
        height,
        step,
        encoding: enc,
    }
}

/// The configs the stream cycles through, as `--set` updates of the default.
const CONFIGS: &[&[(&str, &str)]] = &[
    &[],
    &[
        ("select.spread", "quadtree"),
        ("detector.low_threshold_retry", "true"),
        ("select.max_keypoints", "1000"),
    ],
    &[
        ("detector.fast_threshold", "10"),
        ("canny.enabled", "false"),
    ],
    &[
        ("pyramid.levels", "4"),
        ("describe.enabled", "false"),
        ("canny.blur_ksize", "5"),
        ("canny.l2_gradient", "false"),
    ],
    &[
        ("pyramid.interpolation", "linear_exact"),
        ("select.spread", "grid"),
    ],
];

fn config_at(i: usize) -> Config {
    let mut cfg = Config::default();
    for (k, v) in CONFIGS[i % CONFIGS.len()] {
        cfg = cfg.with_value(k, v).expect("soak configs are valid");
    }
    cfg
}

#[derive(Clone, Copy)]
enum Fault {
    ShortBuffer,
    WrongStep,
    UnknownEncoding,
}

/// Runs the soak; the report says whether it passed ([`SoakReport::failures`]).
pub fn run(opts: &SoakOptions) -> Result<SoakReport> {
    let mut rng = Rng(opts.seed | 1);
    let mut frames = Vec::new();
    for &(w, h) in &opts.sizes {
        let gray = scene(w, h, &mut rng);
        for &(enc, pad) in &MIX {
            frames.push(encode(&gray, w, h, enc, pad));
        }
    }
    let mut mix_counts = vec![0u64; frames.len()];
    let mut pipeline = Pipeline::new(config_at(0), opts.backend)?;
    let mut out = Features::default();
    let mut rep = SoakReport {
        rss_limit_mib: opts.rss_growth_limit_mib,
        ..Default::default()
    };
    let period = Duration::from_secs_f64(1.0 / opts.rate_hz.max(0.001));
    let start = Instant::now();
    let mut next_frame = start;
    let mut next_sample = start;
    let mut next_config = start + opts.config_every;
    let mut config_index = 0;
    let mut minute = MinuteStat::default();
    let mut minute_start = start;
    loop {
        let now = Instant::now();
        if now.duration_since(minute_start) >= Duration::from_secs(60) {
            minute.seconds = now.duration_since(minute_start).as_secs_f64();
            rep.minutes.push(minute);
            minute = MinuteStat::default();
            minute_start = now;
        }
        if now >= next_sample {
            let sample = RssSample {
                seconds: now.duration_since(start).as_secs_f64(),
                frames: rep.frames,
                rss_kib: rss_kib().unwrap_or(0),
                gpu_used_kib: pipeline.gpu_memory_used().map(|b| b / 1024),
            };
            if opts.progress {
                eprintln!(
                    "soak: {:7.1} s  frames {:8}  processed {:8}  failed {}  malformed {}/{} \
                     rejected  RSS {:.1} MiB{}",
                    sample.seconds,
                    rep.frames,
                    rep.processed,
                    rep.failed,
                    rep.malformed.rejected(),
                    rep.malformed.injected(),
                    sample.rss_kib as f64 / 1024.0,
                    sample
                        .gpu_used_kib
                        .map(|k| format!("  GPU {:.1} MiB", k as f64 / 1024.0))
                        .unwrap_or_default()
                );
            }
            rep.rss.push(sample);
            next_sample += opts.sample_every;
        }
        if now.duration_since(start) >= opts.duration {
            break;
        }
        if now >= next_config {
            config_index += 1;
            let cfg = config_at(config_index);
            pipeline.set_config(cfg)?;
            rep.config_changes += 1;
            // An invalid update must be refused and leave the running config alone.
            let before = pipeline.config().clone();
            if before.with_value("pyramid.levels", "0").is_err()
                && pipeline
                    .set_config(Config {
                        pyramid: crate::config::PyramidConfig {
                            scale_factor: 0.5,
                            ..before.pyramid.clone()
                        },
                        ..before.clone()
                    })
                    .is_err()
                && *pipeline.config() == before
            {
                rep.bad_configs_refused += 1;
            }
            next_config += opts.config_every;
        }
        if now < next_frame {
            std::thread::sleep(next_frame - now);
            continue;
        }
        // Paced at the target rate; after a stall, resume the rate instead of bursting to
        // catch up more than a second.
        next_frame = (next_frame + period).max(now - Duration::from_secs(1));
        rep.frames += 1;
        minute.frames += 1;
        let i = rng.below(frames.len());
        let f = &frames[i];
        if rng.unit() * 100.0 < opts.malformed_percent {
            let fault =
                [Fault::ShortBuffer, Fault::WrongStep, Fault::UnknownEncoding][rng.below(3)];
            let min_step = f.width * f.encoding.bytes_per_pixel();
            let view = match fault {
                Fault::ShortBuffer => {
                    let cut = 1 + rng.below(f.step);
                    ImageView::new(
                        &f.data[..f.data.len() - cut],
                        f.width,
                        f.height,
                        f.step,
                        f.encoding.name(),
                        false,
                    )
                }
                Fault::WrongStep => ImageView::new(
                    &f.data,
                    f.width,
                    f.height,
                    min_step - 1 - rng.below(min_step.min(8)),
                    f.encoding.name(),
                    false,
                ),
                Fault::UnknownEncoding => ImageView::new(
                    &f.data,
                    f.width,
                    f.height,
                    f.step,
                    ["bayer_rggb8", "rgb16", "32FC1", ""][rng.below(4)],
                    false,
                ),
            };
            let slot = match fault {
                Fault::ShortBuffer => &mut rep.malformed.short_buffer,
                Fault::WrongStep => &mut rep.malformed.wrong_step,
                Fault::UnknownEncoding => &mut rep.malformed.unknown_encoding,
            };
            slot.0 += 1;
            // Rejected either at validation or, were validation to let it through, by the
            // pipeline; a malformed frame that is processed is a failure.
            let rejected = match view {
                Err(_) => true,
                Ok(v) => pipeline.process_into(&v, &mut out).is_err(),
            };
            if rejected {
                slot.1 += 1;
            }
            continue;
        }
        let t0 = Instant::now();
        let c0 = thread_cpu_ns();
        let ok = match f.view() {
            Ok(v) => pipeline.process_into(&v, &mut out).is_ok(),
            Err(_) => false,
        };
        let wall = t0.elapsed().as_secs_f64();
        minute.busy_s += wall;
        minute.cpu_s += match (c0, thread_cpu_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 * 1e-9,
            _ => wall,
        };
        if ok {
            rep.processed += 1;
            minute.processed += 1;
            mix_counts[i] += 1;
            rep.keypoints += out.keypoints.len() as u64;
        } else {
            rep.failed += 1;
        }
    }
    let end = Instant::now();
    if minute.frames > 0 {
        minute.seconds = end.duration_since(minute_start).as_secs_f64();
        rep.minutes.push(minute);
    }
    rep.elapsed_s = end.duration_since(start).as_secs_f64();
    rep.mix = frames
        .iter()
        .zip(&mix_counts)
        .map(|(f, &n)| (f.encoding.name().to_string(), f.width, f.height, n))
        .collect();
    judge(&mut rep, opts);
    Ok(rep)
}

/// Fills `rep.failures` (and the RSS baseline) from the counts and the curves.
fn judge(rep: &mut SoakReport, opts: &SoakOptions) {
    if rep.failed > 0 {
        rep.failures
            .push(format!("{} valid frames failed to process", rep.failed));
    }
    let m = rep.malformed;
    if m.rejected() != m.injected() {
        rep.failures.push(format!(
            "{} of {} malformed frames were accepted",
            m.injected() - m.rejected(),
            m.injected()
        ));
    }
    if rep.bad_configs_refused != rep.config_changes {
        rep.failures.push(format!(
            "{} invalid config updates were applied",
            rep.config_changes - rep.bad_configs_refused
        ));
    }
    let warmup_s = rep.elapsed_s * 0.1;
    let n_warm = rep
        .rss
        .iter()
        .take_while(|s| s.seconds <= warmup_s)
        .count()
        .max(1)
        .min(rep.rss.len());
    rep.rss_baseline_kib = rep.rss[..n_warm]
        .iter()
        .map(|s| s.rss_kib)
        .max()
        .unwrap_or(0);
    let bound = rep.rss_baseline_kib + (opts.rss_growth_limit_mib * 1024.0) as u64;
    if let Some(s) = rep.rss[n_warm..].iter().find(|s| s.rss_kib > bound) {
        rep.failures.push(format!(
            "RSS {:.1} MiB at {:.0} s exceeds the warm-up maximum {:.1} MiB + {} MiB",
            s.rss_kib as f64 / 1024.0,
            s.seconds,
            rep.rss_baseline_kib as f64 / 1024.0,
            opts.rss_growth_limit_mib
        ));
    }
    // The same bound for the GPU's memory (the CUDA backend's buffers are per resolution
    // and config: the mix cycles through all of them during the warm-up).
    rep.gpu_baseline_kib = rep.rss[..n_warm]
        .iter()
        .filter_map(|s| s.gpu_used_kib)
        .max();
    if let Some(base) = rep.gpu_baseline_kib {
        let bound = base + (opts.rss_growth_limit_mib * 1024.0) as u64;
        let over = rep.rss[n_warm..]
            .iter()
            .find(|s| s.gpu_used_kib.is_some_and(|k| k > bound));
        if let Some(s) = over {
            rep.failures.push(format!(
                "GPU memory {:.1} MiB at {:.0} s exceeds the warm-up maximum {:.1} MiB + {} MiB",
                s.gpu_used_kib.unwrap_or(0) as f64 / 1024.0,
                s.seconds,
                base as f64 / 1024.0,
                opts.rss_growth_limit_mib
            ));
        }
    }
    let full: Vec<&MinuteStat> = rep
        .minutes
        .iter()
        .filter(|m| m.seconds >= 59.0 && m.processed > 0)
        .collect();
    if let Some(first) = full.first() {
        let floor = first.capacity() * opts.min_throughput_ratio;
        for (i, m) in full.iter().enumerate().skip(1) {
            if m.capacity() < floor {
                rep.failures.push(format!(
                    "minute {}: {:.1} frames per CPU second, below {:.0}% of the first \
                     minute's {:.1}",
                    i + 1,
                    m.capacity(),
                    opts.min_throughput_ratio * 100.0,
                    first.capacity()
                ));
            }
        }
    }
}

impl SoakReport {
    /// The report as Markdown: totals, the per-minute throughput and the RSS curve.
    pub fn to_markdown(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let mib = |k: u64| k as f64 / 1024.0;
        let rss_max = self.rss.iter().map(|r| r.rss_kib).max().unwrap_or(0);
        let _ = writeln!(s, "| quantity | value |\n|---|---:|");
        let _ = writeln!(s, "| duration | {:.1} s |", self.elapsed_s);
        let _ = writeln!(s, "| frames offered | {} |", self.frames);
        let _ = writeln!(s, "| valid frames processed | {} |", self.processed);
        let _ = writeln!(s, "| valid frames failed | {} |", self.failed);
        let m = &self.malformed;
        let _ = writeln!(
            s,
            "| malformed injected / rejected | {} / {} (short buffer {}/{}, wrong step {}/{}, \
             unknown encoding {}/{}) |",
            m.injected(),
            m.rejected(),
            m.short_buffer.0,
            m.short_buffer.1,
            m.wrong_step.0,
            m.wrong_step.1,
            m.unknown_encoding.0,
            m.unknown_encoding.1
        );
        let _ = writeln!(
            s,
            "| config changes (invalid updates refused) | {} ({}) |",
            self.config_changes, self.bad_configs_refused
        );
        let _ = writeln!(
            s,
            "| keypoints per processed frame | {:.0} |",
            self.keypoints as f64 / self.processed.max(1) as f64
        );
        let _ = writeln!(
            s,
            "| RSS first / warm-up max / last / max | {:.1} / {:.1} / {:.1} / {:.1} MiB (bound: \
             warm-up max + {} MiB) |",
            mib(self.rss.first().map_or(0, |r| r.rss_kib)),
            mib(self.rss_baseline_kib),
            mib(self.rss.last().map_or(0, |r| r.rss_kib)),
            mib(rss_max),
            self.rss_limit_mib
        );
        if let Some(base) = self.gpu_baseline_kib {
            let gpu: Vec<u64> = self.rss.iter().filter_map(|r| r.gpu_used_kib).collect();
            let _ = writeln!(
                s,
                "| GPU memory in use first / warm-up max / last / max | {:.1} / {:.1} / {:.1} / \
                 {:.1} MiB (same bound) |",
                mib(gpu.first().copied().unwrap_or(0)),
                mib(base),
                mib(gpu.last().copied().unwrap_or(0)),
                mib(gpu.iter().copied().max().unwrap_or(0)),
            );
        }
        let _ = writeln!(
            s,
            "| result | {} |",
            if self.failures.is_empty() {
                "PASS".to_string()
            } else {
                format!("FAIL: {}", self.failures.join("; "))
            }
        );
        let _ = writeln!(s, "\nFrames per encoding and size (valid frames):\n");
        let _ = writeln!(s, "| encoding | size | frames |\n|---|---|---:|");
        for (e, w, h, n) in &self.mix {
            let _ = writeln!(s, "| {e} | {w}x{h} | {n} |");
        }
        let _ = writeln!(s, "\nThroughput per minute:\n");
        let _ = writeln!(
            s,
            "| minute | frames offered | processed | frames/s (wall) | ms per frame, wall / CPU | \
             frames per CPU s |\n|---:|---:|---:|---:|---:|---:|"
        );
        for (i, m) in self.minutes.iter().enumerate() {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {:.2} / {:.2} | {:.1} |",
                i + 1,
                m.frames,
                m.processed,
                m.frames as f64 / m.seconds.max(1e-9),
                1000.0 * m.busy_s / m.processed.max(1) as f64,
                1000.0 * m.cpu_s / m.processed.max(1) as f64,
                m.capacity()
            );
        }
        let _ = writeln!(s, "\nRSS samples:\n");
        let _ = writeln!(
            s,
            "| t (s) | frames | RSS (MiB) | GPU memory in use (MiB) |\n|---:|---:|---:|---:|"
        );
        for r in &self.rss {
            let gpu = r
                .gpu_used_kib
                .map_or("-".into(), |k| format!("{:.1}", mib(k)));
            let _ = writeln!(
                s,
                "| {:.0} | {} | {:.1} | {gpu} |",
                r.seconds,
                r.frames,
                mib(r.rss_kib)
            );
        }
        s
    }
}

/// Parses `90`, `90s`, `15m`, `1h` into a duration.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number of seconds, or NUMs / NUMm / NUMh"))?;
    let mult = match unit {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (s, m or h)")),
    };
    if !(n.is_finite() && n >= 0.0) {
        return Err(format!("{s:?}: not a duration"));
    }
    Ok(Duration::from_secs_f64(n * mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_soak_counts_every_frame() {
        let opts = SoakOptions {
            duration: Duration::from_millis(1500),
            rate_hz: 200.0,
            // Many malformed frames so every kind shows up in a short run.
            malformed_percent: 30.0,
            sample_every: Duration::from_millis(500),
            config_every: Duration::from_millis(400),
            sizes: vec![(64, 48), (96, 64)],
            progress: false,
            ..Default::default()
        };
        let rep = run(&opts).unwrap();
        assert!(rep.failures.is_empty(), "{:?}", rep.failures);
        let m = rep.malformed;
        assert!(m.short_buffer.0 > 0 && m.wrong_step.0 > 0 && m.unknown_encoding.0 > 0);
        assert_eq!(m.injected(), m.rejected());
        assert_eq!(rep.frames, rep.processed + rep.failed + m.injected());
        assert!(rep.processed > 50, "{}", rep.processed);
        assert!(rep.config_changes >= 2 && rep.bad_configs_refused == rep.config_changes);
        assert!(rep.rss.len() >= 3 && rep.rss.iter().all(|r| r.rss_kib > 0));
        assert_eq!(rep.mix.iter().map(|m| m.3).sum::<u64>(), rep.processed);
    }

    #[test]
    fn judge_flags_rss_growth_and_throughput_drop() {
        let mut rep = SoakReport {
            elapsed_s: 300.0,
            rss: (0..30)
                .map(|i| RssSample {
                    seconds: i as f64 * 10.0,
                    frames: i * 300,
                    rss_kib: if i < 20 { 100_000 } else { 100_000 + 70 * 1024 },
                    gpu_used_kib: None,
                })
                .collect(),
            minutes: vec![
                MinuteStat {
                    frames: 1800,
                    processed: 1800,
                    cpu_s: 18.0,
                    seconds: 60.0,
                    ..Default::default()
                },
                MinuteStat {
                    frames: 1800,
                    processed: 1800,
                    cpu_s: 40.0,
                    seconds: 60.0,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        judge(&mut rep, &SoakOptions::default());
        assert_eq!(rep.failures.len(), 2, "{:?}", rep.failures);
        assert!(rep.failures[0].contains("RSS"));
        assert!(rep.failures[1].contains("minute 2"));
    }

    #[test]
    fn judge_flags_gpu_memory_growth_only_past_the_bound() {
        let samples = |grow_mib: u64| -> Vec<RssSample> {
            (0..30)
                .map(|i| RssSample {
                    seconds: i as f64 * 10.0,
                    frames: i * 300,
                    rss_kib: 100_000,
                    gpu_used_kib: Some(500_000 + if i < 20 { 0 } else { grow_mib * 1024 }),
                })
                .collect()
        };
        for (grow, fails) in [(10, false), (70, true)] {
            let mut rep = SoakReport {
                elapsed_s: 300.0,
                rss: samples(grow),
                ..Default::default()
            };
            judge(&mut rep, &SoakOptions::default());
            assert_eq!(rep.gpu_baseline_kib, Some(500_000));
            assert_eq!(
                !rep.failures.is_empty(),
                fails,
                "{grow}: {:?}",
                rep.failures
            );
            assert!(rep.failures.iter().all(|f| f.contains("GPU memory")));
            assert!(rep.to_markdown().contains("GPU memory in use first"));
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5d").is_err() && parse_duration("x").is_err());
    }
}
