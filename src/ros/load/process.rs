//! What the load generator reads of the node's process during a run: its memory (RSS
//! samples, the soak's verdict) and its CPU time (all its threads, from `/proc/PID/stat`),
//! with the load generator's own, so that the bench reports CPU per frame beside latency
//! (docs/jetson.md: the cores a Jetson's estimator needs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::report::RssSample;

/// Samples the RSS of `pid` every `every` from `t_start` until `duration` has passed or
/// `done` is set, on a thread of its own.
pub fn sample_rss(
    pid: u32,
    t_start: Instant,
    duration: Duration,
    every: Duration,
    done: Arc<AtomicBool>,
) -> JoinHandle<Vec<RssSample>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let mut next = t_start;
        while !done.load(Ordering::SeqCst) && t_start.elapsed() < duration {
            if Instant::now() >= next {
                if let Some(kib) = crate::process::rss_kib_of(&pid.to_string()) {
                    v.push(RssSample {
                        seconds: t_start.elapsed().as_secs_f64(),
                        rss_kib: kib,
                    });
                }
                next += every;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        v
    })
}

/// CPU seconds of the node and of this process from [`CpuClock::start`] to [`CpuClock::stop`].
pub struct CpuClock {
    node: Option<(String, f64)>,
    load: Option<f64>,
}

impl CpuClock {
    pub fn start(node_pid: Option<u32>) -> Self {
        use crate::process::cpu_seconds_of;
        let node = node_pid.and_then(|p| Some((p.to_string(), cpu_seconds_of(&p.to_string())?)));
        CpuClock {
            node,
            load: cpu_seconds_of("self"),
        }
    }

    /// (node, load generator) CPU seconds since the start.
    pub fn stop(&self) -> (Option<f64>, Option<f64>) {
        use crate::process::cpu_seconds_of;
        let node = self
            .node
            .as_ref()
            .and_then(|(p, t0)| Some(cpu_seconds_of(p)? - t0));
        let load = self.load.and_then(|t0| Some(cpu_seconds_of("self")? - t0));
        (node, load)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_cpu_time_grows_with_work() {
        let clock = CpuClock::start(Some(std::process::id()));
        // 150 ms of this thread's CPU time (not of wall time: on a loaded machine the
        // thread may run for less than the wall clock says), 10 s of wall time at most.
        let (t, c0) = (std::time::Instant::now(), crate::process::thread_cpu_ns());
        let spent = || match (c0, crate::process::thread_cpu_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a) >= 150_000_000,
            _ => t.elapsed().as_millis() >= 150,
        };
        let mut x = 0u64;
        while !spent() && t.elapsed().as_secs() < 10 {
            for _ in 0..10_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(std::hint::black_box(1));
            }
        }
        std::hint::black_box(x);
        let (node, load) = clock.stop();
        // 150 ms of CPU on one thread; ticks are 10 ms.
        for v in [node.unwrap(), load.unwrap()] {
            assert!((0.1..5.0).contains(&v), "{v} s");
        }
        assert_eq!(crate::process::cpu_seconds_of("0123456789"), None);
    }
}
