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
//!
//! May import: `config`, `error`, `features`, `image`, `pipeline`, `process`.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::Result;
use crate::features::Features;
use crate::image::ImageView;
use crate::pipeline::{BackendChoice, Pipeline};
use crate::process::{rss_kib, thread_cpu_ns};

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

mod report;
mod stream;

use self::report::judge;
pub use self::report::{MalformedCounts, MinuteStat, RssSample, SoakReport};
use self::stream::*;

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
            let seconds = now.duration_since(start).as_secs_f64();
            rep.rss
                .push(sample(&rep, &pipeline, seconds, opts.progress));
            next_sample += opts.sample_every;
        }
        if now.duration_since(start) >= opts.duration {
            break;
        }
        if now >= next_config {
            config_index += 1;
            change_config(&mut pipeline, &mut rep, config_index)?;
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
            malformed(f, &mut rng, &mut pipeline, &mut out, &mut rep.malformed);
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

/// The RSS (and GPU memory) sample at `seconds`, printed with the counts when `progress`.
fn sample(rep: &SoakReport, pipeline: &Pipeline, seconds: f64, progress: bool) -> RssSample {
    let sample = RssSample {
        seconds,
        frames: rep.frames,
        rss_kib: rss_kib().unwrap_or(0),
        gpu_used_kib: pipeline.gpu_memory_used().map(|b| b / 1024),
    };
    if progress {
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
    sample
}

/// Moves the pipeline to the `index`-th config of the cycle, then tries an invalid update,
/// which must be refused and leave the running config alone.
fn change_config(pipeline: &mut Pipeline, rep: &mut SoakReport, index: usize) -> Result<()> {
    pipeline.set_config(config_at(index))?;
    rep.config_changes += 1;
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
    Ok(())
}

/// One malformed version of `f` (a fault drawn from `rng`), counted in `counts` as injected
/// and, when refused, as rejected: at validation or, were validation to let it through, by
/// the pipeline; a malformed frame that is processed is a failure.
fn malformed(
    f: &Frame,
    rng: &mut Rng,
    pipeline: &mut Pipeline,
    out: &mut Features,
    counts: &mut MalformedCounts,
) {
    let fault = [Fault::ShortBuffer, Fault::WrongStep, Fault::UnknownEncoding][rng.below(3)];
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
        Fault::ShortBuffer => &mut counts.short_buffer,
        Fault::WrongStep => &mut counts.wrong_step,
        Fault::UnknownEncoding => &mut counts.unknown_encoding,
    };
    slot.0 += 1;
    let rejected = match view {
        Err(_) => true,
        Ok(v) => pipeline.process_into(&v, out).is_err(),
    };
    if rejected {
        slot.1 += 1;
    }
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
}
