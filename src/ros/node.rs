//! The node runtime: one subscription, one "newest frame" slot and one worker thread with
//! its own [`Pipeline`] per input; a diagnostics timer; clean shutdown on SIGINT/SIGTERM.
//!
//! ```text
//! rcl (spin thread) --> receiver task --slot (newest only)--> worker thread --> publishers
//!                         counts drops          ^ config generation checked per frame
//! ```
//!
//! The slot holds at most one pending frame: a frame that arrives while another one waits
//! replaces it and counts as dropped, so a slow pipeline never builds a queue.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use r2r::diagnostic_msgs::msg::{DiagnosticArray, DiagnosticStatus, KeyValue};
use r2r::sensor_msgs::msg::{Image, PointCloud2};
use r2r::QosProfile;

use super::convert;
use super::matches::PreviousFrame;
use super::params::NodeParams;
use crate::image::GrayImage;
use crate::pipeline::{BackendChoice, Features, Pipeline};

pub const NODE_NAME: &str = "gpu_features";

/// Node-side latencies kept for the shutdown summary (bounded).
const MAX_KEPT_LATENCIES: usize = 1 << 20;

struct Pending {
    msg: Image,
    received: Instant,
}

#[derive(Default)]
struct Slot {
    frame: Mutex<Option<Pending>>,
    ready: Condvar,
}

/// Counters of one input. Totals since start plus a window reset by each diagnostics report.
#[derive(Default)]
struct Stats {
    received: u64,
    processed: u64,
    dropped: u64,
    decode_errors: u64,
    process_errors: u64,
    backend: String,
    last_error: String,
    /// 1 once the GPU failed and the input moved to the CPU backend (`Pipeline::gpu_failure`).
    gpu_failures: u64,
    gpu_failure: String,
    // window
    w_processed: u64,
    w_decode_errors: u64,
    w_latency_ms: Vec<f64>,
    w_stage_ms: BTreeMap<&'static str, (f64, u64)>,
    w_start: Option<Instant>,
    // whole run
    all_latency_ms: Vec<f64>,
}

/// At most one log line per `period`, with the count of lines left out.
struct RateLimit {
    period: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimit {
    fn new(period: Duration) -> Self {
        RateLimit {
            period,
            last: None,
            suppressed: 0,
        }
    }
    /// Some(number suppressed since the last line) when a line may be written now.
    fn allow(&mut self) -> Option<u64> {
        let now = Instant::now();
        match self.last {
            Some(t) if now - t < self.period => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

struct Input {
    /// "" for the single un-named input.
    name: String,
    slot: Arc<Slot>,
    stats: Arc<Mutex<Stats>>,
}

fn topic(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the node until SIGINT/SIGTERM. Errors are start-up errors.
pub fn run() -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    rt.block_on(run_async())
}

async fn run_async() -> Result<(), String> {
    let ctx = r2r::Context::create().map_err(|e| format!("rcl init: {e}"))?;
    let mut node =
        r2r::Node::create(ctx, NODE_NAME, "").map_err(|e| format!("node create: {e}"))?;
    let logger = node.logger().to_string();

    let params = Arc::new(Mutex::new(NodeParams::new()));
    let (param_handler, mut param_events) = node
        .make_derived_parameter_handler(params.clone())
        .map_err(|e| format!("parameters: {e}"))?;
    tokio::spawn(param_handler);
    {
        let logger = logger.clone();
        tokio::spawn(async move {
            while let Some((name, value)) = param_events.next().await {
                r2r::log_info!(&logger, "parameter {name} set to {value:?}");
            }
        });
    }

    let (settings, backend_choice) = {
        let p = params.lock().unwrap();
        let choice: BackendChoice = p.settings.backend_choice()?;
        p.settings.select_cuda_device();
        (p.settings.clone(), choice)
    };
    let names: Vec<String> = if settings.inputs.is_empty() {
        vec![String::new()]
    } else {
        settings.inputs.clone()
    };
    let qos = {
        let q = QosProfile::default().keep_last(settings.depth as usize);
        if settings.reliability == "reliable" {
            q.reliable()
        } else {
            q.best_effort()
        }
    };

    let shutdown = Arc::new(AtomicBool::new(false));
    let mut inputs = Vec::new();
    let mut workers = Vec::new();
    for name in &names {
        let sub = node
            .subscribe::<Image>(&topic(name, "image"), qos.clone())
            .map_err(|e| format!("subscribe {}: {e}", topic(name, "image")))?;
        let out_qos = QosProfile::default().keep_last(5);
        let pub_kp = node
            .create_publisher::<PointCloud2>(&topic(name, "keypoints"), out_qos.clone())
            .map_err(|e| format!("publisher: {e}"))?;
        let pub_edges = node
            .create_publisher::<Image>(&topic(name, "edges"), out_qos.clone())
            .map_err(|e| format!("publisher: {e}"))?;
        let pub_debug = node
            .create_publisher::<Image>(&topic(name, "debug_image"), out_qos.clone())
            .map_err(|e| format!("publisher: {e}"))?;
        let pub_matches = node
            .create_publisher::<PointCloud2>(&topic(name, "matches"), out_qos.clone())
            .map_err(|e| format!("publisher: {e}"))?;
        let input = Input {
            name: name.clone(),
            slot: Arc::new(Slot::default()),
            stats: Arc::new(Mutex::new(Stats {
                w_start: Some(Instant::now()),
                ..Stats::default()
            })),
        };

        // receiver: newest frame wins
        {
            let slot = input.slot.clone();
            let stats = input.stats.clone();
            let mut sub = sub;
            tokio::spawn(async move {
                while let Some(msg) = sub.next().await {
                    let received = Instant::now();
                    let replaced = slot
                        .frame
                        .lock()
                        .unwrap()
                        .replace(Pending { msg, received })
                        .is_some();
                    slot.ready.notify_one();
                    let mut s = stats.lock().unwrap();
                    s.received += 1;
                    if replaced {
                        s.dropped += 1;
                    }
                }
            });
        }

        // worker: owns its pipeline (created on its own thread; a start error stops the node)
        let (init_tx, init_rx) = std::sync::mpsc::channel::<Result<String, String>>();
        let w = Worker {
            label: if name.is_empty() {
                "image".into()
            } else {
                name.clone()
            },
            slot: input.slot.clone(),
            stats: input.stats.clone(),
            params: params.clone(),
            shutdown: shutdown.clone(),
            logger: logger.clone(),
            pub_kp,
            pub_edges,
            pub_debug,
            pub_matches,
        };
        let handle = std::thread::Builder::new()
            .name(format!("gf-worker-{}", w.label))
            .spawn(move || w.run(backend_choice, init_tx))
            .map_err(|e| format!("thread: {e}"))?;
        match init_rx.recv() {
            Ok(Ok(backend)) => {
                r2r::log_info!(
                    &logger,
                    "input {:?}: subscribed to {} ({} depth {}), backend {backend}",
                    input.name,
                    topic(name, "image"),
                    settings.reliability,
                    settings.depth
                );
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("worker thread died during start-up".into()),
        }
        workers.push(handle);
        inputs.push(input);
    }

    // diagnostics
    let pub_diag = node
        .create_publisher::<DiagnosticArray>("/diagnostics", QosProfile::default())
        .map_err(|e| format!("publisher: {e}"))?;
    let node_fqn = node
        .fully_qualified_name()
        .unwrap_or_else(|_| NODE_NAME.into());
    let diag_inputs: Vec<(String, Arc<Mutex<Stats>>)> = inputs
        .iter()
        .map(|i| (i.name.clone(), i.stats.clone()))
        .collect();
    let period = Duration::from_secs_f64(settings.diagnostics_period);
    tokio::spawn(async move {
        let mut clock = r2r::Clock::create(r2r::ClockType::SystemTime).ok();
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let stamp = clock
                .as_mut()
                .and_then(|c| c.get_now().ok())
                .map(|d| r2r::Clock::to_builtin_time(&d))
                .unwrap_or_default();
            let status = diag_inputs
                .iter()
                .map(|(name, stats)| diagnostic_status(&node_fqn, name, &mut stats.lock().unwrap()))
                .collect();
            let msg = DiagnosticArray {
                header: r2r::std_msgs::msg::Header {
                    stamp,
                    frame_id: String::new(),
                },
                status,
            };
            let _ = pub_diag.publish(&msg);
        }
    });

    // rcl is synchronous: spin it on a blocking thread until shutdown.
    let spin_stop = shutdown.clone();
    let spinner = tokio::task::spawn_blocking(move || {
        while !spin_stop.load(Ordering::SeqCst) {
            node.spin_once(Duration::from_millis(10));
        }
        node // dropped on the runtime thread after the workers are joined
    });

    wait_for_signal().await;
    r2r::log_info!(&logger, "shutting down");
    shutdown.store(true, Ordering::SeqCst);
    for i in &inputs {
        i.slot.ready.notify_all();
    }
    for w in workers {
        let _ = w.join();
    }
    let node = spinner.await.ok();
    for i in &inputs {
        let s = i.stats.lock().unwrap();
        let mut l = s.all_latency_ms.clone();
        l.sort_by(|a, b| a.total_cmp(b));
        println!(
            "gpu_features_node summary input={:?} received={} processed={} dropped={} decode_errors={} process_errors={} latency_ms p50={:.2} p95={:.2} p99={:.2} max={:.2}",
            i.name,
            s.received,
            s.processed,
            s.dropped,
            s.decode_errors,
            s.process_errors,
            percentile(&l, 0.5),
            percentile(&l, 0.95),
            percentile(&l, 0.99),
            l.last().copied().unwrap_or(f64::NAN)
        );
    }
    drop(node);
    Ok(())
}

async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}

fn diagnostic_status(node: &str, input: &str, s: &mut Stats) -> DiagnosticStatus {
    let now = Instant::now();
    let window = s.w_start.map(|t| (now - t).as_secs_f64()).unwrap_or(0.0);
    let fps = if window > 0.0 {
        s.w_processed as f64 / window
    } else {
        0.0
    };
    let mut lat = std::mem::take(&mut s.w_latency_ms);
    lat.sort_by(|a, b| a.total_cmp(b));
    let mean = if lat.is_empty() {
        f64::NAN
    } else {
        lat.iter().sum::<f64>() / lat.len() as f64
    };
    let kv = |k: &str, v: String| KeyValue {
        key: k.to_string(),
        value: v,
    };
    let mut values = vec![
        kv("backend", s.backend.clone()),
        kv("fps", format!("{fps:.2}")),
        kv("frames_received", s.received.to_string()),
        kv("frames_processed", s.processed.to_string()),
        kv("frames_dropped", s.dropped.to_string()),
        kv("decode_errors", s.decode_errors.to_string()),
        kv("process_errors", s.process_errors.to_string()),
        kv("gpu_failures", s.gpu_failures.to_string()),
        kv("window_s", format!("{window:.3}")),
        kv("window_frames", lat.len().to_string()),
        kv("latency_ms_mean", format!("{mean:.3}")),
        kv("latency_ms_p50", format!("{:.3}", percentile(&lat, 0.5))),
        kv("latency_ms_p95", format!("{:.3}", percentile(&lat, 0.95))),
        kv("latency_ms_p99", format!("{:.3}", percentile(&lat, 0.99))),
        kv(
            "latency_ms_max",
            format!("{:.3}", lat.last().copied().unwrap_or(f64::NAN)),
        ),
    ];
    for (stage, (sum, n)) in std::mem::take(&mut s.w_stage_ms) {
        values.push(kv(
            &format!("stage_ms.{stage}"),
            format!("{:.3}", sum / n.max(1) as f64),
        ));
    }
    let (level, message) = if s.gpu_failures > 0 {
        // WARN for as long as the input runs on the CPU after a GPU failure.
        (
            1u8,
            format!(
                "GPU failed, running on the CPU backend (same output): {}",
                s.gpu_failure
            ),
        )
    } else if s.w_decode_errors > 0 {
        (
            1u8,
            format!(
                "{} malformed frame(s) in the last {window:.1} s: {}",
                s.w_decode_errors, s.last_error
            ),
        )
    } else if s.processed == 0 {
        (0u8, "waiting for images".to_string())
    } else {
        (0u8, format!("{fps:.1} fps"))
    };
    s.w_processed = 0;
    s.w_decode_errors = 0;
    s.w_start = Some(now);
    let label = if input.is_empty() { "image" } else { input };
    DiagnosticStatus {
        level,
        name: format!("{}: {label}", node.trim_start_matches('/')),
        message,
        hardware_id: s.backend.clone(),
        values,
    }
}

struct Worker {
    label: String,
    slot: Arc<Slot>,
    stats: Arc<Mutex<Stats>>,
    params: Arc<Mutex<NodeParams>>,
    shutdown: Arc<AtomicBool>,
    logger: String,
    pub_kp: r2r::Publisher<PointCloud2>,
    pub_edges: r2r::Publisher<Image>,
    pub_debug: r2r::Publisher<Image>,
    pub_matches: r2r::Publisher<PointCloud2>,
}

impl Worker {
    fn make_pipeline(&self, choice: BackendChoice) -> Result<(Pipeline, u64, bool), String> {
        let (config, generation, debug) = {
            let p = self.params.lock().unwrap();
            (p.live.config.clone(), p.live.generation, p.live.debug_image)
        };
        let pipeline = Pipeline::new(config, choice).map_err(|e| e.to_string())?;
        Ok((pipeline, generation, debug))
    }

    fn run(self, choice: BackendChoice, init: std::sync::mpsc::Sender<Result<String, String>>) {
        let (mut pipeline, mut generation, mut debug) = match self.make_pipeline(choice) {
            Ok(x) => x,
            Err(e) => {
                let _ = init.send(Err(format!("input {}: pipeline: {e}", self.label)));
                return;
            }
        };
        if let Some(why) = pipeline.fallback_reason() {
            r2r::log_warn!(
                &self.logger,
                "input {}: using the CPU backend: {why}",
                self.label
            );
        }
        self.stats.lock().unwrap().backend = pipeline.backend().name().to_string();
        let _ = init.send(Ok(pipeline.backend().name().to_string()));

        let mut bad_input_log = RateLimit::new(Duration::from_secs(2));
        let mut error_log = RateLimit::new(Duration::from_secs(2));
        let mut cloud_buf = Vec::new();
        let mut gray = GrayImage::default();
        let mut features = Features::default();
        let mut gpu_failure_logged = false;
        let mut previous = PreviousFrame::new(choice);
        let mut match_previous = self.params.lock().unwrap().live.match_previous;
        loop {
            let pending = {
                let mut g = self.slot.frame.lock().unwrap();
                loop {
                    if self.shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Some(p) = g.take() {
                        break p;
                    }
                    g = self
                        .slot
                        .ready
                        .wait_timeout(g, Duration::from_millis(200))
                        .unwrap()
                        .0;
                }
            };

            // Between frames: pick up parameter changes (buffers resize on the next frame).
            {
                let p = self.params.lock().unwrap();
                if p.live.generation != generation {
                    generation = p.live.generation;
                    debug = p.live.debug_image;
                    match_previous = p.live.match_previous;
                    if let Err(e) = pipeline.set_config(p.live.config.clone()) {
                        // cannot happen: the parameter layer validated it
                        r2r::log_error!(&self.logger, "config rejected by pipeline: {e}");
                    }
                }
            }

            let msg = &pending.msg;
            let view = match convert::image_view(msg) {
                Ok(v) => v,
                Err(e) => {
                    let text = format!(
                        "{}x{} {:?} step {} data {} B: {e}",
                        msg.width,
                        msg.height,
                        msg.encoding,
                        msg.step,
                        msg.data.len()
                    );
                    if let Some(skipped) = bad_input_log.allow() {
                        r2r::log_warn!(
                            &self.logger,
                            "input {}: dropping malformed image ({text}){}",
                            self.label,
                            if skipped > 0 {
                                format!(" [{skipped} similar messages suppressed]")
                            } else {
                                String::new()
                            }
                        );
                    }
                    let mut s = self.stats.lock().unwrap();
                    s.decode_errors += 1;
                    s.w_decode_errors += 1;
                    s.last_error = text;
                    continue;
                }
            };

            // A panic in a stage must not take the node down: count it, rebuild the backend.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pipeline.process_into(&view, &mut features)
            }));
            match result {
                Ok(Ok(())) => {
                    if let (Some(why), false) = (pipeline.gpu_failure(), gpu_failure_logged) {
                        // Logged once; the pipeline redid the frame on the CPU and stays there.
                        r2r::log_warn!(
                            &self.logger,
                            "input {}: GPU failure, switched to the CPU backend: {why}",
                            self.label
                        );
                        gpu_failure_logged = true;
                        let mut s = self.stats.lock().unwrap();
                        s.gpu_failures += 1;
                        s.gpu_failure = why.to_string();
                    }
                }
                Ok(Err(e)) => {
                    if error_log.allow().is_some() {
                        r2r::log_error!(
                            &self.logger,
                            "input {}: processing failed: {e}",
                            self.label
                        );
                    }
                    self.stats.lock().unwrap().process_errors += 1;
                    continue;
                }
                Err(_) => {
                    if error_log.allow().is_some() {
                        r2r::log_error!(
                            &self.logger,
                            "input {}: pipeline panicked; rebuilding it",
                            self.label
                        );
                    }
                    self.stats.lock().unwrap().process_errors += 1;
                    match self.make_pipeline(choice) {
                        Ok((p, g, d)) => {
                            pipeline = p;
                            generation = g;
                            debug = d;
                        }
                        Err(e) => {
                            r2r::log_error!(
                                &self.logger,
                                "input {}: cannot rebuild pipeline: {e}",
                                self.label
                            )
                        }
                    }
                    continue;
                }
            };

            let header = &msg.header;
            let cloud = convert::keypoints_cloud(
                header,
                &features.keypoints,
                features.descriptors_for(pipeline.config()),
                std::mem::take(&mut cloud_buf),
            );
            let _ = self.pub_kp.publish(&cloud);
            cloud_buf = cloud.data;
            if let Some(edges) = &features.edges {
                let _ = self.pub_edges.publish(&convert::mono8_image(header, edges));
            }
            match (match_previous, features.descriptors_for(pipeline.config())) {
                (true, Some(descriptors)) => {
                    let (cloud, problem) = previous.step(header, descriptors);
                    let _ = self.pub_matches.publish(&cloud);
                    previous.recycle(cloud);
                    if let (Some(p), Some(_)) = (problem, error_log.allow()) {
                        r2r::log_warn!(&self.logger, "input {}: matcher: {p}", self.label);
                    }
                }
                _ => previous.reset(),
            }
            if debug
                && self
                    .pub_debug
                    .get_inter_process_subscription_count()
                    .unwrap_or(0)
                    > 0
            {
                crate::cpu::decode::decode(&view, &mut gray);
                let img = convert::debug_overlay(header, &gray, &features);
                let _ = self.pub_debug.publish(&img);
            }
            let latency = pending.received.elapsed().as_secs_f64() * 1e3;

            let mut s = self.stats.lock().unwrap();
            s.processed += 1;
            s.w_processed += 1;
            s.w_latency_ms.push(latency);
            if s.all_latency_ms.len() < MAX_KEPT_LATENCIES {
                s.all_latency_ms.push(latency);
            }
            for t in &features.timings {
                let e = s.w_stage_ms.entry(t.stage).or_insert((0.0, 0));
                e.0 += t.ms;
                e.1 += 1;
            }
            s.backend = pipeline.backend().name().to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_failure_is_a_warning_in_diagnostics() {
        let mut s = Stats {
            processed: 10,
            backend: "cpu".into(),
            ..Default::default()
        };
        let ok = diagnostic_status("/gpu_features", "", &mut s);
        assert_eq!(ok.level, 0);
        s.gpu_failures = 1;
        s.gpu_failure = "launching orb_describe: injected fault".into();
        let d = diagnostic_status("/gpu_features", "left", &mut s);
        assert_eq!(d.level, 1, "WARN");
        assert!(d.message.contains("CPU backend") && d.message.contains("injected"));
        assert!(d
            .values
            .iter()
            .any(|kv| kv.key == "gpu_failures" && kv.value == "1"));
        assert_eq!(d.name, "gpu_features: left");
    }
}
