//! The load run: publishers paced on their own threads, round trips matched by header stamp
//! (sec 1: warm-up, frame number `nanosec`; from sec 2 on: measured frame n at 2 s + n
//! periods, [`measured_stamp`]), /diagnostics windows summed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use r2r::sensor_msgs::msg::Image;

use super::frames::{self, Malformed};
use super::process;
use super::report::{parse_node_summary, InputResult, LoadReport};
use super::schedule::on_schedule;
use super::{wiring, LoadArgs};
use crate::report::Dist;
use crate::ros::convert;

pub(super) const WARMUP_SEC: i32 = 1;
const MEASURED_SEC: i32 = 2;

/// What the subscription tasks collect for one input.
#[derive(Default)]
pub(super) struct Received {
    /// Send instant per measured frame number (set by the publisher thread).
    pub(super) sent_at: Vec<Option<Instant>>,
    /// (frame number, round trip ms, arrival) of answered measured frames.
    pub(super) answers: Vec<(u32, f64, Instant)>,
    pub(super) warmup_answered: u64,
    /// Points of the measured answers that are clouds: (sum, clouds).
    pub(super) answer_points: (u64, u64),
    /// Last /diagnostics values of this input, and the stage sums (ms * frames, frames).
    pub(super) node: BTreeMap<String, String>,
    pub(super) stage_sum: BTreeMap<String, (f64, f64)>,
}

pub(super) struct Shared {
    pub(super) inputs: Vec<Mutex<Received>>,
    /// The measured frames' spacing in stamp time ([`measured_stamp`]).
    pub(super) period_ns: u64,
    /// Diagnostics windows are summed only while this is set.
    pub(super) measuring: AtomicBool,
    pub(super) diag_seen: AtomicU64,
}

impl Shared {
    /// The state of `inputs` inputs, room for `capacity` frames each at `rate` Hz.
    fn new(inputs: usize, capacity: usize, rate: f64) -> Self {
        Shared {
            inputs: (0..inputs)
                .map(|_| {
                    Mutex::new(Received {
                        sent_at: vec![None; capacity],
                        ..Default::default()
                    })
                })
                .collect(),
            period_ns: period_ns(rate),
            measuring: AtomicBool::new(false),
            diag_seen: AtomicU64::new(0),
        }
    }

    /// Waits (10 s at most) for one more diagnostics report per input than were seen so
    /// far: the one that counts the last frames (a relay publishes none: no wait).
    async fn wait_for_last_diagnostics(&self, inputs: usize) {
        let seen = self.diag_seen.load(Ordering::SeqCst);
        let t_wait = Instant::now();
        while seen > 0
            && self.diag_seen.load(Ordering::SeqCst) < seen + inputs as u64
            && t_wait.elapsed() < Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// An answer of input `k` with this header stamp (and `points`, if a cloud) arrived now.
    pub(super) fn answered(
        &self,
        k: usize,
        stamp: &r2r::builtin_interfaces::msg::Time,
        points: Option<u32>,
    ) {
        let now = Instant::now();
        let mut r = self.inputs[k].lock().unwrap();
        if stamp.sec == WARMUP_SEC {
            r.warmup_answered += 1;
        } else if let Some(n) = measured_frame(stamp, self.period_ns) {
            if let Some(Some(t)) = r.sent_at.get(n as usize).copied() {
                r.answers.push((n, (now - t).as_secs_f64() * 1e3, now));
                if let Some(p) = points {
                    r.answer_points.0 += p as u64;
                    r.answer_points.1 += 1;
                }
            }
        }
    }
}

/// The stamps' spacing of frames published at `rate` Hz, in ns (at least 1 ms: rate <= 1000).
fn period_ns(rate: f64) -> u64 {
    (1e9 / rate).round() as u64
}

/// The header stamp of measured frame `n`: 2 s + n periods, so that the frames of every
/// input carry a camera's spacing (a node that pairs stereo frames by stamp, as VINS-Fusion
/// within 3 ms, pairs frame n of each input, and only those; before 2026-11-27 the stamps
/// were 1 ns apart and any two frames paired) and the node's velocities are per real time.
fn measured_stamp(n: u32, period_ns: u64) -> r2r::builtin_interfaces::msg::Time {
    let t = MEASURED_SEC as u64 * 1_000_000_000 + n as u64 * period_ns;
    r2r::builtin_interfaces::msg::Time {
        sec: (t / 1_000_000_000) as i32,
        nanosec: (t % 1_000_000_000) as u32,
    }
}

/// The measured frame whose stamp is `stamp` ([`measured_stamp`]); None for any other stamp.
fn measured_frame(stamp: &r2r::builtin_interfaces::msg::Time, period_ns: u64) -> Option<u32> {
    if stamp.sec < MEASURED_SEC || stamp.nanosec >= 1_000_000_000 {
        return None;
    }
    let t = (stamp.sec - MEASURED_SEC) as u64 * 1_000_000_000 + stamp.nanosec as u64;
    (t % period_ns == 0)
        .then(|| u32::try_from(t / period_ns).ok())
        .flatten()
}

pub(super) fn topic(ns: &str, input: &str, name: &str) -> String {
    let parts: Vec<&str> = [ns, input, name]
        .into_iter()
        .map(|p| p.trim_matches('/'))
        .filter(|p| !p.is_empty())
        .collect();
    format!("/{}", parts.join("/"))
}

pub fn run(args: &LoadArgs) -> Result<LoadReport, String> {
    let duration = args.duration()?;
    let sample_every = crate::config::parse_duration(&args.sample_every)?;
    let sizes = args.sizes()?;
    let pan = args.pan()?;
    for e in &args.encodings {
        if !frames::ENCODINGS.contains(&e.as_str()) {
            return Err(format!("encoding {e:?}: one of {:?}", frames::ENCODINGS));
        }
    }
    if !(args.rate > 0.0 && args.rate <= 1000.0) {
        return Err(format!("rate {}: 0 < rate <= 1000", args.rate));
    }
    args.check_answers()?;
    let floor = match &args.floor {
        Some(p) => Some(super::report::read_floor(p)?),
        None => None,
    };
    let photos = frames::load_photos(&frames::photo_files(&args.images)?)?;
    // Templates in publishing order: encodings vary fastest, then sizes, then crops.
    let mut templates = Vec::new();
    for d in 0..args.distinct.max(1) {
        for &(w, h) in &sizes {
            let rgb = match pan {
                Some(step) => frames::pan_frame(&photos[0], (w, h), step, (d, args.distinct)),
                None => frames::crop(&photos[d % photos.len()], w, h, d),
            };
            for e in &args.encodings {
                templates.push(frames::encode(&rgb, e));
            }
        }
    }
    let names: Vec<String> = if args.inputs.is_empty() {
        vec![String::new()]
    } else {
        args.inputs.clone()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    let mut rep = rt.block_on(run_async(args, duration, sample_every, &names, templates))?;
    if let Some(f) = floor {
        for i in &mut rep.inputs {
            i.floor = f.get(&i.input).cloned();
        }
    }
    rep.write_files(args)?;
    Ok(rep)
}

async fn run_async(
    args: &LoadArgs,
    duration: Duration,
    sample_every: Duration,
    names: &[String],
    templates: Vec<Image>,
) -> Result<LoadReport, String> {
    let ctx = r2r::Context::create().map_err(|e| format!("rcl init: {e}"))?;
    let mut node =
        r2r::Node::create(ctx, "gpu_features_load", "").map_err(|e| format!("node create: {e}"))?;
    let capacity = (duration.as_secs_f64() * args.rate) as usize + 16;
    let shared = Arc::new(Shared::new(names.len(), capacity, args.rate));
    let publishers = wiring::publish_and_listen(&mut node, args, names, &shared)?;
    wiring::watch_diagnostics(&mut node, names, &shared)?;
    let spin_stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = spin_stop.clone();
        tokio::task::spawn_blocking(move || {
            while !stop.load(Ordering::SeqCst) {
                node.spin_once(Duration::from_millis(5));
            }
        })
    };
    let warmup_sent = match wiring::warm_up(args, names, &publishers, &templates[0], &shared).await
    {
        Ok(w) => w,
        Err(e) => {
            spin_stop.store(true, Ordering::SeqCst);
            return Err(e);
        }
    };

    // Measured run: one paced publisher thread per input; the RSS sampler beside them.
    let t_start = Instant::now();
    let cpu = process::CpuClock::start(args.node_pid);
    shared.measuring.store(true, Ordering::SeqCst);
    let threads = spawn_publishers(args, publishers, &templates, (duration, capacity), &shared);
    let sampler = args
        .node_pid
        .map(|pid| process::sample_rss(pid, t_start, duration, sample_every, spin_stop.clone()));
    let mut sent = Vec::new();
    for t in threads {
        sent.push(t.join().map_err(|_| "publisher thread panicked")?);
    }
    let seconds = t_start.elapsed().as_secs_f64();
    // Late answers, then one more diagnostics report that counts the last frames.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (node_cpu_s, load_cpu_s) = cpu.stop();
    shared.wait_for_last_diagnostics(names.len()).await;
    shared.measuring.store(false, Ordering::SeqCst);
    spin_stop.store(true, Ordering::SeqCst);
    let _ = spinner.await;
    let node_rss = sampler
        .map(|s| s.join().unwrap_or_default())
        .unwrap_or_default();

    let node_log = stop_node(args);

    let mut rep = LoadReport {
        label: args.label.clone(),
        seconds,
        rate_hz: args.rate,
        sizes: args.sizes.clone(),
        encodings: args.encodings.clone(),
        node_rss,
        node_cpu_s,
        load_cpu_s,
        ..Default::default()
    };
    for (k, name) in names.iter().enumerate() {
        let r = shared.inputs[k].lock().unwrap();
        let counts = (sent[k], warmup_sent[k]);
        rep.inputs.push(input_result(
            name,
            &r,
            counts,
            (t_start, seconds),
            &node_log,
        ));
    }
    if let Some(dir) = crate::ros::trace::dir() {
        write_trace(&dir, names, &shared)?;
    }
    if let Some(growth) = args.soak_rss_growth_mib {
        rep.judge_soak(growth);
    }
    Ok(rep)
}

/// One paced publisher thread per input ([`publish_paced`]), `duration` long, room for
/// `capacity` frames each. Every input's frame n is due at the same instant (cameras
/// triggered together, as a stereo pair): the threads share the start.
fn spawn_publishers(
    args: &LoadArgs,
    publishers: Vec<wiring::InputPublishers>,
    templates: &[Image],
    (duration, capacity): (Duration, usize),
    shared: &Arc<Shared>,
) -> Vec<std::thread::JoinHandle<(u64, u64, u64)>> {
    let start = Instant::now() + Duration::from_millis(5);
    let mut threads = Vec::new();
    for (k, p) in publishers.into_iter().enumerate() {
        let shared = shared.clone();
        let templates = templates.to_vec();
        let (rate, malformed) = (args.rate, args.malformed_percent / 100.0);
        threads.push(std::thread::spawn(move || {
            publish_paced(
                k,
                &p,
                templates,
                (rate, start),
                malformed,
                duration,
                capacity,
                &shared,
            )
        }));
    }
    threads
}

/// Stops the node under test (`--node-pid`), when given, and returns its log (`--node-log`).
fn stop_node(args: &LoadArgs) -> String {
    match (args.node_pid, &args.node_log) {
        (Some(pid), Some(log)) => {
            stop_process(pid);
            std::fs::read_to_string(log).unwrap_or_default()
        }
        (Some(pid), None) => {
            stop_process(pid);
            String::new()
        }
        _ => String::new(),
    }
}

/// One input's result: `counts` ((sent, malformed, late), warm-up frames sent), `run` (its
/// start, seconds), the node's own summary from its log.
fn input_result(
    name: &str,
    r: &Received,
    counts: ((u64, u64, u64), u64),
    (t_start, seconds): (Instant, f64),
    node_log: &str,
) -> InputResult {
    let ((n_sent, n_bad, late), warmup_sent) = counts;
    let mut per_minute = vec![0u64; (seconds / 60.0).ceil().max(1.0) as usize + 1];
    for (_, _, at) in &r.answers {
        let m = (at.saturating_duration_since(t_start).as_secs_f64() / 60.0) as usize;
        let last = per_minute.len() - 1;
        per_minute[m.min(last)] += 1;
    }
    while per_minute.len() > 1 && per_minute.last() == Some(&0) {
        per_minute.pop();
    }
    InputResult {
        input: name.to_string(),
        sent: n_sent,
        sent_malformed: n_bad,
        late,
        warmup_sent,
        warmup_answered: r.warmup_answered,
        answered: r.answers.len() as u64,
        round_trip_ms: Dist::of(r.answers.iter().map(|a| a.1)),
        node: r.node.clone(),
        stage_ms: r
            .stage_sum
            .iter()
            .filter(|(_, (_, n))| *n > 0.0)
            .map(|(k, (sum, n))| (k.clone(), sum / n))
            .collect(),
        node_latency_ms: parse_node_summary(node_log, name).unwrap_or_default(),
        answered_per_minute: per_minute,
        answer_points: (r.answer_points.1 > 0)
            .then(|| r.answer_points.0 as f64 / r.answer_points.1 as f64),
        floor: None,
    }
}

/// `DIR/load-<input>.tsv` ([`crate::ros::trace`]): each answered measured frame's stamp,
/// send instant (right before its publish) and the answer's arrival.
fn write_trace(dir: &std::path::Path, names: &[String], shared: &Shared) -> Result<(), String> {
    for (k, name) in names.iter().enumerate() {
        let r = shared.inputs[k].lock().unwrap();
        let mut t = crate::ros::trace::Trace::new(true);
        for &(n, _, at) in &r.answers {
            if let Some(Some(sent)) = r.sent_at.get(n as usize) {
                let stamp = measured_stamp(n, shared.period_ns);
                t.push(convert::stamp_ns(stamp.sec, stamp.nanosec), *sent, at);
            }
        }
        t.write(dir, "load", name, ["sent_ns", "answered_ns"])
            .map_err(|e| format!("trace into {}: {e}", dir.display()))?;
    }
    Ok(())
}

impl LoadReport {
    /// The --json and --markdown outputs.
    fn write_files(&self, args: &LoadArgs) -> Result<(), String> {
        let rep = self;
        if let Some(p) = &args.json {
            let j = serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?;
            std::fs::write(p, j).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        if let Some(p) = &args.markdown {
            use std::io::Write;
            let rows: String = rep.inputs.iter().map(|i| rep.row(i) + "\n").collect();
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .and_then(|mut f| f.write_all(rows.as_bytes()))
                .map_err(|e| format!("{}: {e}", p.display()))?;
        }
        Ok(())
    }
}

/// Publishes `templates` in turn at `rate` from `start` for `duration`: frame n is due at
/// start + n / rate and stamped n ([`measured_stamp`]) on every input alike, as cameras
/// triggered together. A publisher more than a period behind skips the frames whose time
/// has passed (counted in `late`, as a triggered camera whose frame was not read out)
/// instead of moving its schedule: before 2026-11-27 it moved it, and with four 1080p bgr8
/// inputs the inputs' frame n drifted 55-89 ms apart within 12 s, so bursts never came.
/// Returns (sent, malformed, late).
#[allow(clippy::too_many_arguments)]
fn publish_paced(
    k: usize,
    p: &wiring::InputPublishers,
    mut templates: Vec<Image>,
    (rate, start): (f64, Instant),
    malformed: f64,
    duration: Duration,
    capacity: usize,
    shared: &Shared,
) -> (u64, u64, u64) {
    let period = Duration::from_secs_f64(1.0 / rate);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (k as u64 + 1);
    let (mut sent, mut bad, mut late) = (0u64, 0u64, 0u64);
    let mut n = 0u32;
    while start.elapsed() < duration {
        let (frame, skipped, wait) = on_schedule(start, period, n, Instant::now());
        late += skipped as u64;
        n = frame;
        if (n as usize) >= capacity {
            break;
        }
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let nt = templates.len();
        let t = &mut templates[n as usize % nt];
        let broken = ((rng >> 11) as f64 / (1u64 << 53) as f64) < malformed;
        let mut one;
        let msg = if broken {
            one = Malformed::ALL[(rng % 3) as usize].apply(t);
            bad += 1;
            &mut one
        } else {
            t
        };
        msg.header.stamp = measured_stamp(n, shared.period_ns);
        if !broken {
            p.camera_for(msg);
            shared.inputs[k].lock().unwrap().sent_at[n as usize] = Some(Instant::now());
        }
        if p.image.publish(msg).is_ok() {
            sent += 1;
        }
        n += 1;
    }
    (sent, bad, late)
}

/// SIGINT to `pid`, then up to 15 s for it to exit (its summary goes to its log).
fn stop_process(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let t = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && t.elapsed().as_secs() < 15 {
        // A zombie (exited, not yet reaped by its parent shell) counts as exited.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Measured frames carry the camera's spacing from 2 s on and are found again from their
    /// stamps; warm-up stamps and stamps between two frames are nobody's.
    #[test]
    fn measured_stamps_are_a_period_apart_and_map_back_to_their_frame() {
        for rate in [10.0, 30.0, 60.0, 1000.0] {
            let p = period_ns(rate);
            let ns = |t: &r2r::builtin_interfaces::msg::Time| {
                t.sec as i64 * 1_000_000_000 + t.nanosec as i64
            };
            let mut last = None;
            for n in [0u32, 1, 2, 59, 60, 61, 1_799, 108_000] {
                let t = measured_stamp(n, p);
                assert!(t.sec >= MEASURED_SEC && t.nanosec < 1_000_000_000);
                assert_eq!(measured_frame(&t, p), Some(n), "rate {rate} frame {n}");
                assert_eq!(ns(&t), 2_000_000_000 + n as i64 * p as i64);
                if let Some((m, u)) = last {
                    assert_eq!(ns(&t) - ns(&u), (n - m) as i64 * p as i64);
                }
                last = Some((n, t));
                let mut between = measured_stamp(n, p);
                between.nanosec = (between.nanosec + 1) % 1_000_000_000;
                assert_eq!(measured_frame(&between, p), None);
            }
            let warm = r2r::builtin_interfaces::msg::Time {
                sec: WARMUP_SEC,
                nanosec: 3,
            };
            assert_eq!(measured_frame(&warm, p), None);
        }
        // 30 Hz frames are 33.3 ms apart: farther than the node's 3 ms stereo tolerance.
        assert!(period_ns(30.0) > 3_000_000);
    }
}
