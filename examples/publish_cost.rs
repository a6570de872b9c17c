//! What one publication of a `sensor_msgs/PointCloud2` costs the publishing thread, by
//! message size, QoS and Fast DDS setting, with no pipeline around it (docs/ros.md, "Large
//! frames between processes"): the node's `keypoints` part without the node.
//!
//! ```sh
//! eval "$(scripts/setup-ros.sh --env)"
//! export FASTDDS_DEFAULT_PROFILES_FILE=$PWD/config/fastdds_large_frames.xml
//! CARGO_TARGET_DIR=target/ros cargo run --release --features ros --example publish_cost -- \
//!     --bytes 68000 --reliability reliable --frames 600 --rate 60
//! ```
//!
//! The process starts a copy of itself as the subscriber (another process, as a SLAM
//! front-end is), waits until it has matched, publishes `--frames` clouds of `--bytes` bytes
//! of point data at `--rate` Hz with `publish_raw` (as the node does), and prints the
//! publish call's time p50 / p99 and the delivery time (publish call to the subscriber's
//! take, both on CLOCK_MONOTONIC) p50 / p99 in ms. Environment variables of Fast DDS
//! (`RMW_FASTRTPS_PUBLICATION_MODE`, the profile) apply to both processes.

use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use gpu_features::report::pct;

#[path = "common/mod.rs"]
mod common;
use common::named_arg;
use gpu_features::ros::trace::monotonic_ns;
use r2r::sensor_msgs::msg::PointCloud2;
use r2r::{QosProfile, WrappedTypesupport};

const TOPIC: &str = "/publish_cost/cloud";
const TYPE: &str = "sensor_msgs/msg/PointCloud2";

fn qos(reliability: &str) -> QosProfile {
    let q = QosProfile::default().keep_last(5);
    if reliability == "best_effort" {
        q.best_effort()
    } else {
        q
    }
}

/// p50 and p99 of `v` (sorted here), with the project's percentile.
fn p50_p99(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (pct(v, 50.0), pct(v, 99.0))
}

/// The subscriber: takes `--frames` clouds (or gives up after a deadline) and prints one
/// line, the delivery time's p50 and p99 in ms.
fn subscribe(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let frames: usize = named_arg(args, "--frames", "600").parse()?;
    let ctx = r2r::Context::create()?;
    let mut node = r2r::Node::create(ctx, "publish_cost_sub", "")?;
    let mut sub = node.subscribe_raw(
        TOPIC,
        TYPE,
        qos(&named_arg(args, "--sub-reliability", "reliable")),
    )?;
    let mut seen = 0;
    let mut delays = Vec::with_capacity(frames);
    let deadline = Instant::now() + Duration::from_secs(frames as u64 / 10 + 30);
    while seen < frames && Instant::now() < deadline {
        node.spin_once(Duration::from_millis(5));
        while let Some(Some(bytes)) = sub.next().now_or_never() {
            let now = monotonic_ns(Instant::now()) as i64;
            // CDR: 4 bytes of encapsulation, then header.stamp.sec (i32), nanosec (u32).
            if bytes.len() >= 12 {
                let sec = i32::from_le_bytes(bytes[4..8].try_into().unwrap()) as i64;
                let nsec = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as i64;
                if sec > 0 {
                    delays.push((now - (sec * 1_000_000_000 + nsec)) as f64 / 1e6);
                }
            }
            seen += 1;
        }
    }
    let n = delays.len();
    let (p50, p99) = p50_p99(&mut delays);
    println!("delivered {n} delivery_p50 {p50:.4} delivery_p99 {p99:.4}");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("sub") {
        return subscribe(&args);
    }
    let bytes: usize = named_arg(&args, "--bytes", "68000").parse()?;
    let frames: usize = named_arg(&args, "--frames", "600").parse()?;
    let rate: f64 = named_arg(&args, "--rate", "60").parse()?;
    let reliability = named_arg(&args, "--reliability", "reliable");
    let sub_reliability = named_arg(&args, "--sub-reliability", &reliability);

    let ctx = r2r::Context::create()?;
    let mut node = r2r::Node::create(ctx, "publish_cost_pub", "")?;
    let publisher = node.create_publisher_untyped(TOPIC, TYPE, qos(&reliability))?;
    let child = std::process::Command::new(std::env::current_exe()?)
        .args([
            "sub",
            "--frames",
            &frames.to_string(),
            "--sub-reliability",
            &sub_reliability,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let wait_until = Instant::now() + Duration::from_secs(20);
    while publisher
        .get_inter_process_subscription_count()
        .unwrap_or(0)
        == 0
    {
        if Instant::now() > wait_until {
            return Err("the subscriber did not match within 20 s".into());
        }
        node.spin_once(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));

    // The message, serialized once; each publication writes its stamp into the CDR.
    let msg = PointCloud2 {
        height: 1,
        width: (bytes / 60) as u32,
        point_step: 60,
        row_step: bytes as u32,
        data: (0..bytes).map(|i| (i * 7) as u8).collect(),
        is_dense: true,
        ..Default::default()
    };
    let mut cdr = msg.to_serialized_bytes()?;
    let period = Duration::from_secs_f64(1.0 / rate);
    let mut calls = Vec::with_capacity(frames);
    let start = Instant::now();
    for k in 0..frames {
        let due = start + period.mul_f64(k as f64);
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let t = monotonic_ns(Instant::now()) as i64;
        cdr[4..8].copy_from_slice(&((t / 1_000_000_000) as i32).to_le_bytes());
        cdr[8..12].copy_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
        let t0 = Instant::now();
        publisher.publish_raw(&cdr)?;
        calls.push(t0.elapsed().as_secs_f64() * 1e3);
        node.spin_once(Duration::ZERO);
    }
    let out = child.wait_with_output()?;
    let (p50, p99) = p50_p99(&mut calls);
    println!(
        "bytes {} reliability {reliability} sub {sub_reliability} mode {} publish_p50 {p50:.4} publish_p99 {p99:.4} {}",
        cdr.len(),
        std::env::var("RMW_FASTRTPS_PUBLICATION_MODE").unwrap_or_else(|_| "default".into()),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    Ok(())
}
