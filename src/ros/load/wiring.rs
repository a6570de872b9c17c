//! The load generator's ROS wiring: its image publishers and the answer subscriptions per
//! input, the /diagnostics listener, and the warm-up before the measured run.
//!
//! May import: as `ros`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use r2r::diagnostic_msgs::msg::DiagnosticArray;
use r2r::sensor_msgs::msg::{Image, PointCloud2};
use r2r::QosProfile;

use super::run::{topic, Shared, WARMUP_SEC};
use super::LoadArgs;

/// Per input: its `image` publisher (returned), and a task matching its answers (`relayed`,
/// `edges` images or clouds) to the frames sent.
pub(super) fn publish_and_listen(
    node: &mut r2r::Node,
    args: &LoadArgs,
    names: &[String],
    shared: &Arc<Shared>,
) -> Result<Vec<r2r::Publisher<Image>>, String> {
    let qos = {
        let q = QosProfile::default().keep_last(4);
        match args.reliability.as_str() {
            "reliable" => q.reliable(),
            "best_effort" => q.best_effort(),
            r => return Err(format!("reliability {r:?}: reliable or best_effort")),
        }
    };
    let mut publishers = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let t = topic(&args.namespace, name, "image");
        publishers.push(
            node.create_publisher::<Image>(&t, qos.clone())
                .map_err(|e| format!("publisher {t}: {e}"))?,
        );
        let answer = topic(&args.namespace, name, &args.answer);
        let shared = shared.clone();
        let answer_qos = QosProfile::default().keep_last(100);
        if matches!(args.answer.as_str(), "relayed" | "edges") {
            let mut sub = node
                .subscribe::<Image>(&answer, answer_qos)
                .map_err(|e| format!("subscribe {answer}: {e}"))?;
            tokio::spawn(async move {
                while let Some(msg) = sub.next().await {
                    shared.answered(k, &msg.header.stamp, None);
                }
            });
        } else {
            let mut sub = node
                .subscribe::<PointCloud2>(&answer, answer_qos)
                .map_err(|e| format!("subscribe {answer}: {e}"))?;
            tokio::spawn(async move {
                while let Some(msg) = sub.next().await {
                    let points = msg.width.saturating_mul(msg.height);
                    shared.answered(k, &msg.header.stamp, Some(points));
                }
            });
        }
    }
    Ok(publishers)
}

/// A task reading /diagnostics: each input's last values, and while measuring the stage
/// times summed over the windows' frames.
pub(super) fn watch_diagnostics(
    node: &mut r2r::Node,
    names: &[String],
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let mut sub = node
        .subscribe::<DiagnosticArray>("/diagnostics", QosProfile::default().keep_last(50))
        .map_err(|e| format!("subscribe /diagnostics: {e}"))?;
    let shared = shared.clone();
    let labels: Vec<String> = names
        .iter()
        .map(|n| {
            if n.is_empty() {
                "image".into()
            } else {
                n.clone()
            }
        })
        .collect();
    tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            for st in &msg.status {
                let Some(k) = labels
                    .iter()
                    .position(|l| st.name.ends_with(&format!(": {l}")))
                else {
                    continue;
                };
                let vals: BTreeMap<String, String> = st
                    .values
                    .iter()
                    .map(|kv| (kv.key.clone(), kv.value.clone()))
                    .collect();
                let mut r = shared.inputs[k].lock().unwrap();
                if shared.measuring.load(Ordering::SeqCst) {
                    let frames: f64 = vals
                        .get("window_frames")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0.0);
                    for (key, v) in &vals {
                        if let (Some(stage), Ok(ms)) =
                            (key.strip_prefix("stage_ms."), v.parse::<f64>())
                        {
                            let e = r.stage_sum.entry(stage.to_string()).or_default();
                            e.0 += ms * frames;
                            e.1 += frames;
                        }
                    }
                }
                r.node = vals;
            }
            shared.diag_seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    Ok(())
}

/// Warm-up: one frame per input, answered, before anything is timed (the node sizes its
/// buffers on the first frame of a resolution); returns the frames sent per input.
pub(super) async fn warm_up(
    args: &LoadArgs,
    names: &[String],
    publishers: &[r2r::Publisher<Image>],
    template: &Image,
    shared: &Arc<Shared>,
) -> Result<Vec<u64>, String> {
    // Warm-up: one frame per input, answered, before anything is timed (the node sizes its
    // buffers on the first frame of a resolution).
    let mut warmup_sent = vec![0u64; names.len()];
    for (k, p) in publishers.iter().enumerate() {
        let mut msg = template.clone();
        msg.header.stamp.sec = WARMUP_SEC;
        let t0 = Instant::now();
        while shared.inputs[k].lock().unwrap().warmup_answered == 0 {
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "no answer on {} within 60 s of publishing on {}: is the node running there?",
                    topic(&args.namespace, &names[k], &args.answer),
                    topic(&args.namespace, &names[k], "image")
                ));
            }
            // Discovery takes a moment: repeat until the node answers.
            if warmup_sent[k] == 0 || t0.elapsed() > Duration::from_secs(warmup_sent[k] * 2) {
                msg.header.stamp.nanosec = warmup_sent[k] as u32;
                p.publish(&msg).map_err(|e| format!("publish: {e}"))?;
                warmup_sent[k] += 1;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await; // late warm-up answers
    Ok(warmup_sent)
}
