//! What a soak measured, its verdict ([`judge`]) and its Markdown report.

use super::SoakOptions;

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

/// Fills `rep.failures` (and the RSS baseline) from the counts and the curves.
pub(super) fn judge(rep: &mut SoakReport, opts: &SoakOptions) {
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
        self.tables_markdown(&mut s);
        s
    }

    /// The frames per encoding and size, the throughput per minute and the RSS samples.
    fn tables_markdown(&self, s: &mut String) {
        use std::fmt::Write;
        let mib = |k: u64| k as f64 / 1024.0;
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
