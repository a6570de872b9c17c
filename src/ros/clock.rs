//! The time the frames' stamps are checked against ([`FrameClock`]): the system clock, or
//! with `use_sim_time` the last `/clock`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;
use r2r::QosProfile;

/// ROS time as the frames' stamps are checked against it: the system clock, or with
/// `use_sim_time` the last `/clock` message (none before the first). The node keeps it itself
/// (r2r's own sim-time clock is compiled in or not depending on its build cache).
pub(super) struct FrameClock {
    sim: bool,
    /// The last `/clock`, ns (0: none yet).
    sim_ns: std::sync::atomic::AtomicI64,
}

impl FrameClock {
    /// The clock, subscribed to `/clock` (best effort, which hears every publisher) with
    /// `use_sim_time`.
    pub(super) fn start(node: &mut r2r::Node, sim: bool) -> Result<Arc<FrameClock>, String> {
        let clock = Arc::new(FrameClock {
            sim,
            sim_ns: std::sync::atomic::AtomicI64::new(0),
        });
        if sim {
            let qos = QosProfile::default().keep_last(1).best_effort();
            let mut sub = node
                .subscribe::<r2r::rosgraph_msgs::msg::Clock>("/clock", qos)
                .map_err(|e| format!("subscribe /clock (use_sim_time): {e}"))?;
            let c = clock.clone();
            tokio::spawn(async move {
                while let Some(m) = sub.next().await {
                    let t = super::convert::stamp_ns(m.clock.sec, m.clock.nanosec);
                    c.sim_ns.store(t, Ordering::Relaxed);
                }
            });
        }
        Ok(clock)
    }

    /// Now, ns since the epoch (or the simulation's start); None while a simulated clock has
    /// not ticked.
    pub(super) fn now_ns(&self) -> Option<i64> {
        if self.sim {
            let t = self.sim_ns.load(Ordering::Relaxed);
            return (t > 0).then_some(t);
        }
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_nanos() as i64)
    }
}
