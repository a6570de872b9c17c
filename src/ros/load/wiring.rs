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
use r2r::sensor_msgs::msg::{CameraInfo, Image, PointCloud, PointCloud2};
use r2r::QosProfile;

use super::run::{topic, Shared, WARMUP_SEC};
use super::LoadArgs;

/// One input's publishers: its `image`, and with `--camera-info` its `camera_info`.
pub(super) struct InputPublishers {
    pub(super) image: r2r::Publisher<Image>,
    camera_info: Option<r2r::Publisher<CameraInfo>>,
}

impl InputPublishers {
    /// With `--camera-info`: the camera of `frame` (its size and stamp; plumb_bob without
    /// distortion, focal length width / 1.6, the centre in the middle), published before
    /// the frame is.
    pub(super) fn camera_for(&self, frame: &Image) {
        let Some(p) = &self.camera_info else { return };
        let (w, h) = (frame.width as f64, frame.height as f64);
        let f = w / 1.6;
        let (cx, cy) = ((w - 1.0) / 2.0, (h - 1.0) / 2.0);
        let info = CameraInfo {
            header: frame.header.clone(),
            width: frame.width,
            height: frame.height,
            distortion_model: "plumb_bob".into(),
            d: vec![0.0; 5],
            k: vec![f, 0.0, cx, 0.0, f, cy, 0.0, 0.0, 1.0],
            r: vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
            p: vec![f, 0.0, cx, 0.0, 0.0, f, cy, 0.0, 0.0, 0.0, 1.0, 0.0],
            ..Default::default()
        };
        let _ = p.publish(&info);
    }
}

/// Per input: its publishers (returned), and a task matching its answers (`relayed`,
/// `edges` images, `feature` or the other clouds) to the frames sent.
pub(super) fn publish_and_listen(
    node: &mut r2r::Node,
    args: &LoadArgs,
    names: &[String],
    shared: &Arc<Shared>,
) -> Result<Vec<InputPublishers>, String> {
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
        let camera_info = match args.camera_info {
            true => {
                let c = topic(&args.namespace, name, "camera_info");
                let q = QosProfile::default().keep_last(4);
                Some(
                    node.create_publisher::<CameraInfo>(&c, q)
                        .map_err(|e| format!("publisher {c}: {e}"))?,
                )
            }
            false => None,
        };
        publishers.push(InputPublishers {
            image: node
                .create_publisher::<Image>(&t, qos.clone())
                .map_err(|e| format!("publisher {t}: {e}"))?,
            camera_info,
        });
        let answer = topic(&args.namespace, name, args.answer(k));
        let shared = shared.clone();
        let answer_qos = QosProfile::default().keep_last(100);
        if matches!(args.answer(k), "relayed" | "edges") {
            let mut sub = node
                .subscribe::<Image>(&answer, answer_qos)
                .map_err(|e| format!("subscribe {answer}: {e}"))?;
            tokio::spawn(async move {
                while let Some(msg) = sub.next().await {
                    shared.answered(k, &msg.header.stamp, None);
                }
            });
        } else if args.answer(k) == "feature" {
            let mut sub = node
                .subscribe::<PointCloud>(&answer, answer_qos)
                .map_err(|e| format!("subscribe {answer}: {e}"))?;
            tokio::spawn(async move {
                while let Some(msg) = sub.next().await {
                    let points = u32::try_from(msg.points.len()).unwrap_or(u32::MAX);
                    shared.answered(k, &msg.header.stamp, Some(points));
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
/// buffers on the first frame of a resolution); returns the frames sent per input. Every
/// round publishes on every input with one stamp, as cameras triggered together (a stereo
/// pair's second camera answers only once its frame is paired with the first's).
pub(super) async fn warm_up(
    args: &LoadArgs,
    names: &[String],
    publishers: &[InputPublishers],
    template: &Image,
    shared: &Arc<Shared>,
) -> Result<Vec<u64>, String> {
    let mut sent = vec![0u64; names.len()];
    let mut msg = template.clone();
    msg.header.stamp.sec = WARMUP_SEC;
    let answered = |k: usize| shared.inputs[k].lock().unwrap().warmup_answered > 0;
    let t0 = Instant::now();
    let mut rounds = 0u64;
    while let Some(k) = (0..names.len()).find(|&k| !answered(k)) {
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "no answer on {} within 60 s of publishing on {}: is the node running there?",
                topic(&args.namespace, &names[k], args.answer(k)),
                topic(&args.namespace, &names[k], "image")
            ));
        }
        // Discovery takes a moment: repeat until the node answers.
        if rounds == 0 || t0.elapsed() > Duration::from_secs(rounds * 2) {
            msg.header.stamp.nanosec = rounds as u32;
            for (p, n) in publishers.iter().zip(sent.iter_mut()) {
                p.camera_for(&msg);
                p.image.publish(&msg).map_err(|e| format!("publish: {e}"))?;
                *n += 1;
            }
            rounds += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await; // late warm-up answers
    Ok(sent)
}
