//! How many frames are inside a CUDA pipeline's `run` at once, over every pipeline of the
//! process: a frame alone for a while gets its pyramid first (change 29 in
//! docs/performance.md), frames side by side do not.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Frames inside `CudaPipeline::run` at this moment, over every pipeline of the
/// process (`bench --streams`, the node's inputs): they share the crew.
pub(super) static FRAMES_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// How long after two frames were last in flight at once a frame still counts as shared
/// (several pipelines take turns: between two frames of one, another one's frame is often
/// alone for a moment).
const SHARED_WINDOW: Duration = Duration::from_millis(100);

/// When a frame last entered while another one was in flight, in microseconds since
/// [`epoch`]; `u64::MAX`: never.
static LAST_SHARED_US: AtomicU64 = AtomicU64::new(u64::MAX);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Counts one frame in [`FRAMES_IN_FLIGHT`] while alive.
pub(super) struct InFlight {
    /// Whether this frame's pyramid goes before every other launch
    /// (`Gpu::pyramid_priority`): only when no two frames of the process have been in
    /// flight at once in the last [`SHARED_WINDOW`]. One pipeline's frame then ends ~0.01-0.02
    /// ms sooner at 1080p, but four pipelines lost 13 % of their frames/s with every pyramid
    /// first, and still did with the pyramid first whenever its frame was alone at that
    /// instant (docs/performance.md, change 29).
    pub(super) pyramid_first: bool,
}

impl InFlight {
    pub(super) fn enter() -> Self {
        let others = FRAMES_IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        let now = epoch().elapsed().as_micros() as u64;
        if others > 0 {
            LAST_SHARED_US.store(now, Ordering::Relaxed);
            return InFlight {
                pyramid_first: false,
            };
        }
        InFlight {
            pyramid_first: alone_for_a_while(now, LAST_SHARED_US.load(Ordering::Relaxed)),
        }
    }
}

/// Whether a frame that enters alone at `now_us` counts as alone, the last shared entry
/// having been at `last_shared_us` (`u64::MAX`: never).
fn alone_for_a_while(now_us: u64, last_shared_us: u64) -> bool {
    last_shared_us == u64::MAX
        || now_us.saturating_sub(last_shared_us) > SHARED_WINDOW.as_micros() as u64
}

impl Drop for InFlight {
    fn drop(&mut self) {
        FRAMES_IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_alone_only_long_after_two_were_in_flight() {
        let window = SHARED_WINDOW.as_micros() as u64;
        assert!(alone_for_a_while(5, u64::MAX));
        assert!(!alone_for_a_while(1_000, 1_000));
        assert!(!alone_for_a_while(1_000 + window, 1_000));
        assert!(alone_for_a_while(1_001 + window, 1_000));
        // Entering beside another frame is never alone, and marks the frames after it.
        let a = InFlight::enter();
        let b = InFlight::enter();
        assert!(!b.pyramid_first);
        drop((a, b));
        assert!(!InFlight::enter().pyramid_first);
    }
}
