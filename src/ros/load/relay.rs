//! `gpu_features_relay`: the transport floor of a node benchmark. A no-op r2r node, built
//! from the same r2r and run with the same Fast DDS profile as `gpu_features_node`, that
//! subscribes to each input's `image` with the node's default image QoS and answers each
//! frame with the node's output QoS, in one of two ways (`--mode`):
//!
//! - `image`: the Image republished unchanged on `relayed` (`gpu_features_load --answer
//!   relayed`): the frame crosses the transport twice;
//! - `header`: a `PointCloud2` with the frame's header on `keypoints`, where the node answers
//!   (`gpu_features_load`'s default), serialized and published as the node's (its layout
//!   with descriptors, [`crate::ros::convert::KeypointsCdr`], `publish_raw`) with `--points`
//!   made-up keypoints (0: an empty cloud): the frame crosses once and a cloud of the node's
//!   size comes back, which is what the node's own round trip consists of and so the floor
//!   its rows are compared with. The relay's latency (taken -> published) is then the
//!   publication floor of the node's `keypoints` part.
//!
//! The frame is taken as in the node ([`crate::ros::take`]: the C message read in place, on
//! the spinning thread right after `spin_once`), and answered there at once (no slot, no
//! worker; `image` republishes the C message itself). On SIGINT it prints
//! `gpu_features_relay summary input=".." received=N latency_ms p50=.. p95=.. p99=.. max=..`
//! (receive -> republished), the line the load generator reads as "node latency". With
//! `GF_TRACE_DIR` it writes `relay-<input>.tsv` ([`crate::ros::trace`]: receive and answer
//! instants per frame) as the node does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use r2r::sensor_msgs::msg::Image;
use r2r::std_msgs::msg::Header;
use r2r::QosProfile;

use super::run::topic;
use crate::features::{Descriptor, Keypoint};
use crate::ros::convert::KeypointsCdr;
use crate::ros::take::ImageTaker;
use crate::ros::trace::Trace;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "gpu_features_relay",
    about = "Answer each input's Image at once (republished on INPUT/relayed, or an empty \
             PointCloud2 with its header on INPUT/keypoints): the transport floor for \
             gpu_features_load"
)]
pub struct RelayArgs {
    /// Inputs, comma-separated, as the node's `inputs` parameter (empty: `image`)
    #[arg(long, value_delimiter = ',')]
    pub inputs: Vec<String>,
    /// Namespace of the topics (NAMESPACE/INPUT/image -> NAMESPACE/INPUT/relayed)
    #[arg(long, default_value = "")]
    pub namespace: String,
    /// Image subscription reliability (the node's `image_qos.reliability` default)
    #[arg(long, default_value = "best_effort")]
    pub reliability: String,
    /// Image subscription depth (the node's `image_qos.depth` default)
    #[arg(long, default_value_t = 1)]
    pub depth: usize,
    /// `image`: republish the Image on INPUT/relayed; `header`: answer with an empty
    /// PointCloud2 carrying the frame's header on INPUT/keypoints
    #[arg(long, default_value = "image")]
    pub mode: String,
    /// `header`: keypoints (with descriptors) in the answered cloud, as many as the node
    /// publishes for the benchmark's frames (0: an empty cloud)
    #[arg(long, default_value_t = 0)]
    pub points: usize,
}

/// Entry point of `gpu_features_relay`; returns the exit code.
pub fn main() -> i32 {
    let args = RelayArgs::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gpu_features_relay: tokio: {e}");
            return 2;
        }
    };
    match rt.block_on(relay(&args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gpu_features_relay: {e}");
            2
        }
    }
}

enum Answer {
    Image(r2r::Publisher<Image>),
    /// The publisher, the frame's header, the cloud's keypoints and descriptors, and the
    /// node's encoder.
    Header(Box<HeaderAnswer>),
}

struct HeaderAnswer {
    publisher: r2r::PublisherUntyped,
    header: Header,
    keypoints: Vec<Keypoint>,
    descriptors: Vec<Descriptor>,
    cdr: KeypointsCdr,
}

/// `n` made-up keypoints spread over a 1920x1080 frame, with made-up descriptors: the
/// bytes of a cloud of the node's size (their values do not matter to the transport).
fn made_up_keypoints(n: usize) -> (Vec<Keypoint>, Vec<Descriptor>) {
    let keypoints = (0..n)
        .map(|i| Keypoint {
            x: (i * 37 % 1920) as f32 + 0.5,
            y: (i * 53 % 1080) as f32 + 0.25,
            response: 1e-4 * (i % 97) as f32,
            size: 31.0,
            angle: (i * 7 % 360) as f32,
            octave: (i % 8) as i32,
        })
        .collect();
    let descriptors = (0..n)
        .map(|i| std::array::from_fn(|j| (i * 31 + j * 7) as u8))
        .collect();
    (keypoints, descriptors)
}

struct Counts {
    received: u64,
    latency_ms: Vec<f64>,
    trace: Trace,
}

/// The publisher that answers input `name`'s images: the image republished (`image` mode),
/// or a keypoints cloud with `args.points` made-up keypoints (`header`).
fn answer_for(node: &mut r2r::Node, args: &RelayArgs, name: &str) -> Result<Answer, String> {
    let out_qos = QosProfile::default().keep_last(5);
    Ok(if args.mode == "image" {
        let t = topic(&args.namespace, name, "relayed");
        Answer::Image(
            node.create_publisher::<Image>(&t, out_qos)
                .map_err(|e| format!("publisher {t}: {e}"))?,
        )
    } else {
        let t = topic(&args.namespace, name, "keypoints");
        let (keypoints, descriptors) = made_up_keypoints(args.points);
        Answer::Header(Box::new(HeaderAnswer {
            publisher: node
                .create_publisher_untyped(&t, crate::cdr::POINT_CLOUD2, out_qos)
                .map_err(|e| format!("publisher {t}: {e}"))?,
            header: Header::default(),
            keypoints,
            descriptors,
            cdr: KeypointsCdr::default(),
        }))
    })
}

/// Prints input `name`'s summary line and writes its trace (with `GF_TRACE_DIR`).
fn summarize(name: &str, c: &Counts, trace_dir: Option<&std::path::Path>) {
    let mut l = c.latency_ms.clone();
    l.sort_by(f64::total_cmp);
    let pct = |q: f64| crate::report::pct(&l, q);
    println!(
        "gpu_features_relay summary input={name:?} received={} latency_ms p50={:.3} p95={:.3} p99={:.3} max={:.3}",
        c.received,
        pct(50.0),
        pct(95.0),
        pct(99.0),
        l.last().copied().unwrap_or(f64::NAN)
    );
    if let Some(dir) = trace_dir {
        if let Err(e) = c
            .trace
            .write(dir, "relay", name, ["received_ns", "answered_ns"])
        {
            eprintln!(
                "gpu_features_relay: trace of input {name:?} into {}: {e}",
                dir.display()
            );
        }
    }
}

async fn relay(args: &RelayArgs) -> Result<(), String> {
    let qos = {
        let q = QosProfile::default().keep_last(args.depth.clamp(1, 1000));
        match args.reliability.as_str() {
            "reliable" => q.reliable(),
            "best_effort" => q.best_effort(),
            r => return Err(format!("reliability {r:?}: reliable or best_effort")),
        }
    };
    if !["image", "header"].contains(&args.mode.as_str()) {
        return Err(format!("mode {:?}: image or header", args.mode));
    }
    let ctx = r2r::Context::create().map_err(|e| format!("rcl init: {e}"))?;
    let mut node = r2r::Node::create(ctx, "gpu_features_relay", "")
        .map_err(|e| format!("node create: {e}"))?;
    let names: Vec<String> = if args.inputs.is_empty() {
        vec![String::new()]
    } else {
        args.inputs.clone()
    };
    let trace_dir = crate::ros::trace::dir();
    let mut counts = Vec::new();
    let mut inputs = Vec::new();
    for name in &names {
        let t_in = topic(&args.namespace, name, "image");
        let taker = ImageTaker::subscribe(&mut node, &t_in, qos.clone())
            .map_err(|e| format!("subscribe {t_in}: {e}"))?;
        let answer = answer_for(&mut node, args, name)?;
        let c = Arc::new(Mutex::new(Counts {
            received: 0,
            latency_ms: Vec::with_capacity(1 << 16),
            trace: Trace::new(trace_dir.is_some()),
        }));
        counts.push(c.clone());
        inputs.push((taker, answer, c));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = stop.clone();
        tokio::task::spawn_blocking(move || {
            while !stop.load(Ordering::SeqCst) {
                node.spin_once(Duration::from_millis(10));
                for (taker, answer, c) in &mut inputs {
                    while let Some(mut msg) = taker.try_take() {
                        let t0 = Instant::now();
                        let stamp = msg.stamp_ns();
                        let ok = match answer {
                            Answer::Image(p) => p.publish_native(msg.native_mut()).is_ok(),
                            Answer::Header(a) => {
                                msg.header_into(&mut a.header);
                                let bytes =
                                    a.cdr
                                        .encode(&a.header, &a.keypoints, Some(&a.descriptors[..]));
                                a.publisher.publish_raw(bytes).is_ok()
                            }
                        };
                        let mut c = c.lock().unwrap();
                        c.received += 1;
                        if ok {
                            let t1 = Instant::now();
                            c.latency_ms.push((t1 - t0).as_secs_f64() * 1e3);
                            c.trace.push(stamp, t0, t1);
                        }
                    }
                }
            }
            drop(inputs);
            node
        })
    };
    let _ = tokio::signal::ctrl_c().await;
    stop.store(true, Ordering::SeqCst);
    let node = spinner.await.ok();
    for (name, c) in names.iter().zip(&counts) {
        summarize(name, &c.lock().unwrap(), trace_dir.as_deref());
    }
    drop(node);
    Ok(())
}
