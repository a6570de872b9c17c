//! The node runtime: one subscription, one "newest frame" slot and one worker thread with
//! its own [`Pipeline`] per input; a diagnostics timer; clean shutdown on SIGINT/SIGTERM.
//!
//! ```text
//! rcl (spin thread: takes the C message) --slot (newest only)--> worker thread --> publishers
//!             counts drops                  ^ config generation checked per frame
//! ```
//!
//! The slot holds at most one pending frame: a frame that arrives while another one waits
//! replaces it and counts as dropped, so a slow pipeline never builds a queue.
//!
//! With one input there is no worker thread: the spinning thread runs the input's frames
//! itself, right after taking them (the newest of those taken; the others count as
//! dropped), which saves the hand-over to a worker (performance.md, change 69). With two
//! inputs or more each has its worker, so that one camera's frame never waits for another's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use r2r::diagnostic_msgs::msg::DiagnosticArray;
use r2r::sensor_msgs::msg::PointCloud2;
use r2r::std_msgs::msg::Bool;
use r2r::QosProfile;

use super::cameras::{CameraSlot, Cameras};
use super::clock::FrameClock;
use super::compressed::{Frame, FrameTaker};
use super::diagnostics::{diagnostic_status, p50_p99_fields, percentile, Stats, PARTS};
use super::params::NodeParams;
use super::trace::{self, Trace};
use super::tracks::{StereoLink, StereoRole, TrackOutputs, TRACK_PARTS};
use super::warm_ahead::WarmAhead;
use super::worker::{Pending, Running, Slot, Worker};
use crate::output::tracks::VinsFormat;
use crate::pipeline::BackendChoice;
use crate::track::Tracker;

pub const NODE_NAME: &str = "gpu_features";

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

/// The tracker's publishers and the `camera_info` subscription of one input (the topics
/// exist whether or not `track.enabled`, so tracking can be switched on at run time).
fn track_outputs(
    node: &mut r2r::Node,
    name: &str,
    out_qos: &QosProfile,
    (settings, vins_problem): (&super::settings::NodeSettings, Option<String>),
    (camera, stereo): (CameraSlot, StereoRole),
) -> Result<TrackOutputs, String> {
    let err = |e: r2r::Error| format!("publisher: {e}");
    Cameras::subscribe(node, &topic(name, "camera_info"), &camera)?;
    Ok(TrackOutputs {
        tracker: Tracker::default(),
        camera,
        pub_tracks: node
            .create_publisher_untyped(
                &topic(name, "tracks"),
                crate::cdr::POINT_CLOUD2,
                out_qos.clone(),
            )
            .map_err(err)?,
        pub_feature: node
            .create_publisher_untyped(
                &topic(name, "feature"),
                "sensor_msgs/msg/PointCloud",
                out_qos.clone(),
            )
            .map_err(err)?,
        pub_restart: node
            .create_publisher::<Bool>(&topic(name, "restart"), out_qos.clone())
            .map_err(err)?,
        format: VinsFormat::parse(&settings.feature_format).unwrap_or(VinsFormat::Fusion),
        tracks_cdr: Default::default(),
        feature_cdr: Default::default(),
        gate: Default::default(),
        started: false,
        stereo,
        stereo_missed: 0,
        stereo_pairs: 0,
        vins_problem,
        times: [f64::NAN; TRACK_PARTS.len()],
        camera_use: Default::default(),
        picture: Default::default(),
    })
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
    // Per-frame instants for scripts/trace_split.py, written at exit (ros::trace).
    let trace_dir = trace::dir();

    let params = Arc::new(Mutex::new(NodeParams::new()));
    let (param_handler, mut param_events, sim_time) =
        super::params::services::serve(&mut node, params.clone())?;
    let clock = FrameClock::start(&mut node, sim_time)?;
    tokio::spawn(param_handler);
    {
        let logger = logger.clone();
        tokio::spawn(async move {
            while let Some((name, value)) = param_events.next().await {
                r2r::log_info!(&logger, "parameter {name} set to {value:?}");
            }
        });
    }

    let start = Start::read(&params, &logger)?;
    let shutdown = Arc::new(AtomicBool::new(false));
    let (inputs, workers, takers, inline) = open_inputs(
        &mut node,
        &start,
        &params,
        &shutdown,
        &logger,
        trace_dir.is_some(),
    )?;
    spawn_diagnostics(&mut node, &inputs, &start.settings)?;
    let gpu = start.backend != BackendChoice::Cpu;
    let spinner = spawn_spinner(
        node,
        (takers, inline),
        &shutdown,
        &params,
        &logger,
        (gpu, clock),
    );

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
        print_summary(i, trace_dir.as_deref(), &logger);
    }
    drop(node);
    Ok(())
}

/// What the node starts with: its settings, the backend and the VINS config (read once,
/// at start; logged here).
struct Start {
    settings: super::settings::NodeSettings,
    backend: BackendChoice,
    vins: Option<crate::camera::vins::VinsConfig>,
    vins_problem: Option<String>,
}

impl Start {
    fn read(params: &Arc<Mutex<NodeParams>>, logger: &str) -> Result<Start, String> {
        let start = {
            let p = params.lock().unwrap();
            let backend: BackendChoice = p.settings.backend_choice()?;
            p.settings.select_cuda_device();
            Start {
                settings: p.settings.clone(),
                backend,
                vins: p.vins.clone(),
                vins_problem: p.vins_problem.clone(),
            }
        };
        match (&start.vins, &start.vins_problem) {
            (Some(v), _) => r2r::log_info!(
                logger,
                "vins_config {}: {} camera(s) (input k gets cam{{k}}_calib; camera_info not read), tracker as {}'s (max_cnt {}, min_dist {}, flow_back {})",
                v.path.display(),
                v.cameras.len(),
                if v.mono { "VINS-Mono" } else { "VINS-Fusion" },
                v.max_cnt,
                v.min_dist,
                v.flow_back
            ),
            (None, Some(e)) => r2r::log_error!(
                logger,
                "vins_config not used: {e}; the cameras come from camera_info (see /diagnostics)"
            ),
            (None, None) => {}
        }
        if start.settings.apply_memory_policy() {
            r2r::log_info!(logger, "keep_freed_memory: malloc keeps freed frame buffers (mmap threshold 32 MiB, no trimming)");
        }
        Ok(start)
    }

    /// The inputs' names (one unnamed input when `inputs` is unset).
    fn names(&self) -> Vec<String> {
        if self.settings.inputs.is_empty() {
            vec![String::new()]
        } else {
            self.settings.inputs.clone()
        }
    }

    fn image_qos(&self) -> QosProfile {
        let q = QosProfile::default().keep_last(self.settings.depth as usize);
        if self.settings.reliability == "reliable" {
            q.reliable()
        } else {
            q.best_effort()
        }
    }
}

/// Each input's subscription, slot and stats: what the spinning thread hands its frames to.
type Taker = (FrameTaker, Arc<Slot>, Arc<Mutex<Stats>>);

type Opened = (
    Vec<Input>,
    Vec<std::thread::JoinHandle<()>>,
    Vec<Taker>,
    Option<Running>,
);

/// Every input subscribed, with its publishers, its tracker outputs and its worker: a
/// thread of its own with two inputs or more (started and waited for here: a start error
/// stops the node), or with one input the state the spinning thread runs its frames with.
fn open_inputs(
    node: &mut r2r::Node,
    start: &Start,
    params: &Arc<Mutex<NodeParams>>,
    shutdown: &Arc<AtomicBool>,
    logger: &str,
    tracing: bool,
) -> Result<Opened, String> {
    let names = start.names();
    let settings = &start.settings;
    let qos = start.image_qos();
    let (mut inputs, mut workers, mut takers, mut inline) =
        (Vec::new(), Vec::new(), Vec::new(), None);
    // Every input's camera_info slot; with two inputs or more, the first two can track as a
    // stereo pair (`track.stereo`, switchable at run time).
    // Input k takes the VINS config's camera k, when there is one.
    let cameras: Vec<CameraSlot> = (0..names.len())
        .map(|k| {
            let vins = start.vins.as_ref().and_then(|v| v.cameras.get(k)).cloned();
            Arc::new(Mutex::new(Cameras::new(vins)))
        })
        .collect();
    let link = Arc::new(StereoLink::default());
    for (index, name) in names.iter().enumerate() {
        let transport = settings.transport_of(index);
        let image_topic = transport.topic(&topic(name, "image"));
        let taker = FrameTaker::subscribe(node, &topic(name, "image"), transport, qos.clone())
            .map_err(|e| format!("subscribe {image_topic}: {e}"))?;
        let out_qos = QosProfile::default().keep_last(5);
        let stereo = match index {
            0 if names.len() >= 2 => StereoRole::Left {
                link: link.clone(),
                right_camera: cameras[1].clone(),
                pub_right_tracks: node
                    .create_publisher_untyped(
                        &topic(&names[1], "tracks"),
                        crate::cdr::POINT_CLOUD2,
                        out_qos.clone(),
                    )
                    .map_err(|e| format!("publisher: {e}"))?,
            },
            1 => StereoRole::Right { link: link.clone() },
            _ => StereoRole::Mono,
        };
        let tracks = track_outputs(
            node,
            name,
            &out_qos,
            (settings, start.vins_problem.clone()),
            (cameras[index].clone(), stereo),
        )?;
        let input = Input {
            name: name.clone(),
            slot: Arc::new(Slot::default()),
            stats: Arc::new(Mutex::new(Stats::new(Trace::new(tracing)))),
        };
        // receiver: the spinning thread hands each frame to the slot (newest wins)
        takers.push((taker, input.slot.clone(), input.stats.clone()));
        let w = worker(node, &input, &out_qos, (params, shutdown, logger), tracks)?;
        let subscribed = format!(
            "input {:?}: subscribed to {} ({} depth {})",
            input.name, image_topic, settings.reliability, settings.depth
        );
        if names.len() == 1 {
            // One input: the spinning thread runs its frames (module docs).
            let (running, backend) = w.start(start.backend)?;
            r2r::log_info!(
                logger,
                "{subscribed}, backend {backend}, run on the spinning thread"
            );
            inline = Some(running);
        } else {
            let (init_tx, init_rx) = std::sync::mpsc::channel::<Result<String, String>>();
            let backend = start.backend;
            let handle = std::thread::Builder::new()
                .name(format!("gf-worker-{}", w.label))
                .spawn(move || w.run(backend, init_tx))
                .map_err(|e| format!("thread: {e}"))?;
            match init_rx.recv() {
                Ok(Ok(backend)) => r2r::log_info!(logger, "{subscribed}, backend {backend}"),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err("worker thread died during start-up".into()),
            }
            workers.push(handle);
        }
        inputs.push(input);
    }
    Ok((inputs, workers, takers, inline))
}

/// The input's worker with its publishers (`keypoints`, `edges`, `debug_image`, `matches`)
/// and tracker outputs; it owns its pipeline, made when it starts.
fn worker(
    node: &mut r2r::Node,
    input: &Input,
    out_qos: &QosProfile,
    (params, shutdown, logger): (&Arc<Mutex<NodeParams>>, &Arc<AtomicBool>, &str),
    tracks: TrackOutputs,
) -> Result<Worker, String> {
    let name = &input.name;
    let untyped = |node: &mut r2r::Node, what: &str, ty: &str| {
        node.create_publisher_untyped(&topic(name, what), ty, out_qos.clone())
            .map_err(|e| format!("publisher: {e}"))
    };
    // The images are published as bytes serialized by us (convert::ImageCdr).
    let pub_kp = untyped(node, "keypoints", crate::cdr::POINT_CLOUD2)?;
    let pub_edges = untyped(node, "edges", crate::cdr::IMAGE)?;
    let pub_debug = untyped(node, "debug_image", crate::cdr::IMAGE)?;
    let pub_ann = if params.lock().unwrap().settings.foxglove_annotations {
        let t = topic(name, "keypoints/annotations");
        let p = super::publish::annotations_publisher(node, &t, out_qos);
        if let Err(why) = &p {
            r2r::log_error!(logger, "{why}");
        }
        input.stats.lock().unwrap().annotations = Some(p.as_ref().map(|_| t).map_err(Clone::clone));
        p.ok()
    } else {
        None
    };
    let pub_matches = node
        .create_publisher::<PointCloud2>(&topic(name, "matches"), out_qos.clone())
        .map_err(|e| format!("publisher: {e}"))?;
    Ok(Worker {
        label: if name.is_empty() {
            "image".into()
        } else {
            name.clone()
        },
        slot: input.slot.clone(),
        stats: input.stats.clone(),
        params: params.clone(),
        shutdown: shutdown.clone(),
        logger: logger.to_string(),
        pub_kp,
        pub_edges,
        pub_debug,
        pub_ann,
        pub_matches,
        tracks,
    })
}

/// `/diagnostics` every `diagnostics_period` seconds: a status per input, by the rules of
/// `diagnostics.*`.
fn spawn_diagnostics(
    node: &mut r2r::Node,
    inputs: &[Input],
    settings: &super::settings::NodeSettings,
) -> Result<(), String> {
    let rules = settings.diagnostics.clone();
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
                .map(|(name, stats)| {
                    diagnostic_status(&node_fqn, name, &mut stats.lock().unwrap(), &rules)
                })
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
    Ok(())
}

/// rcl is synchronous: it spins on a blocking thread until shutdown, and the images are
/// taken there, right after `spin_once` (ros::take); with one input that thread runs its
/// frames too. Returns the node when it stops (dropped after the workers are joined).
fn spawn_spinner(
    mut node: r2r::Node,
    (mut takers, mut inline): (Vec<Taker>, Option<Running>),
    shutdown: &Arc<AtomicBool>,
    params: &Arc<Mutex<NodeParams>>,
    logger: &str,
    (gpu, clock): (bool, Arc<FrameClock>),
) -> tokio::task::JoinHandle<r2r::Node> {
    let (spin_stop, spin_params, spin_logger) =
        (shutdown.clone(), params.clone(), logger.to_string());
    tokio::task::spawn_blocking(move || {
        let mut warm = WarmAhead::default();
        while !spin_stop.load(Ordering::SeqCst) {
            // One input: the wait ends early for the GPU's warm-up before its next frame.
            node.spin_once(warm.wait(Instant::now(), Duration::from_millis(10)));
            let mut taken = false;
            if let Some(running) = inline.as_mut() {
                // Through the input's slot as for a worker (newest wins, the others count
                // as dropped), then taken back at once.
                let (taker, slot, stats) = &mut takers[0];
                while let Some(msg) = taker.try_take() {
                    deliver(slot, stats, msg, &clock);
                }
                let pending = slot.frame.lock().unwrap().take();
                if let Some(pending) = pending {
                    if gpu {
                        prewake(&spin_params);
                    }
                    warm.frame_taken(pending.received, running.warm_ahead());
                    run_inline(running, pending, &spin_logger);
                } else if warm.take_due(Instant::now()) {
                    running.warm_gpu();
                }
                continue;
            }
            for (taker, slot, stats) in &mut takers {
                while let Some(msg) = taker.try_take() {
                    deliver(slot, stats, msg, &clock);
                    taken = true;
                }
            }
            if taken && gpu {
                prewake(&spin_params);
            }
        }
        drop(takers);
        node
    })
}

/// The input's summary lines at exit (and its trace, when tracing).
fn print_summary(i: &Input, trace_dir: Option<&std::path::Path>, logger: &str) {
    let s = i.stats.lock().unwrap();
    let mut l = s.run.latency_ms.clone();
    l.sort_by(|a, b| a.total_cmp(b));
    let parts = p50_p99_fields(&PARTS, &s.run.parts_ms);
    println!(
        "gpu_features_node summary input={:?} received={} processed={} dropped={} decode_errors={} process_errors={} latency_ms p50={:.2} p95={:.2} p99={:.2} max={:.2} parts_ms{parts}",
        i.name,
        s.count.received,
        s.count.processed,
        s.count.dropped,
        s.count.decode_errors,
        s.count.process_errors,
        percentile(&l, 0.5),
        percentile(&l, 0.95),
        percentile(&l, 0.99),
        l.last().copied().unwrap_or(f64::NAN)
    );
    if let Some(dir) = trace_dir {
        if let Err(e) = s
            .run
            .trace
            .write(dir, "node", &i.name, ["received_ns", "keypoints_ns"])
        {
            r2r::log_error!(
                logger,
                "trace of input {:?} into {}: {e}",
                i.name,
                dir.display()
            );
        }
    }
    if s.track.enabled {
        let parts = p50_p99_fields(&TRACK_PARTS, &s.track.ms);
        println!(
            "gpu_features_node tracking input={:?} tracks={} right_tracks={} stereo_pairs={} problem={:?} ms{parts}",
            i.name,
            s.track.tracks,
            s.track.right_tracks,
            s.track.stereo_pairs,
            s.track.camera_problem.as_deref().unwrap_or("none")
        );
    }
}

/// Wakes the helper threads that will copy the frames just handed over into pinned memory
/// (`cuda.prewake_us`; `cuda::driver::crew::prewake`): they spin for the copy instead of waking when
/// it starts (performance.md, change 68).
fn prewake(params: &Mutex<NodeParams>) {
    #[cfg(feature = "cuda")]
    crate::cuda::driver::crew::prewake_us(params.lock().unwrap().live.config.cuda.prewake_us);
    #[cfg(not(feature = "cuda"))]
    let _ = params;
}

/// One frame of the single input on the spinning thread. A panic outside the pipeline
/// (which catches its own) is caught here too, so that the node keeps spinning.
fn run_inline(running: &mut Running, pending: Pending, logger: &str) {
    let taken = pending.received;
    let step = std::panic::AssertUnwindSafe(|| running.step(pending, taken));
    if std::panic::catch_unwind(step).is_err() {
        r2r::log_error!(logger, "the frame's outputs panicked; the node goes on");
        running.w.stats.lock().unwrap().count.process_errors += 1;
    }
}

/// A frame into its input's slot, replacing (and counting as dropped) one not yet taken; its
/// arrival and its stamp's lag behind `clock` into the input's stats.
fn deliver(slot: &Slot, stats: &Mutex<Stats>, msg: Frame, clock: &FrameClock) {
    let received = Instant::now();
    let lag = clock
        .now_ns()
        .map(|now| (now - msg.stamp_ns()) as f64 * 1e-9);
    let replaced = slot
        .frame
        .lock()
        .unwrap()
        .replace(Pending { msg, received })
        .is_some();
    slot.ready.notify_one();
    let mut s = stats.lock().unwrap();
    s.count.received += 1;
    s.last_frame = Some(received);
    if let Some(lag) = lag {
        s.window.stamp_lag(lag);
    }
    if replaced {
        s.count.dropped += 1;
    }
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
