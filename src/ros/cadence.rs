//! When the next frame is due, from the spacing of the last ones (a camera's steady rate),
//! so that the thread that takes the frames can wake the pipeline's helper threads just
//! before it arrives (`prewake_ahead_us`, docs/ros.md): woken when the frame is taken, as
//! `cuda.prewake_us` alone does, they are still waking when a single input's copy starts.
//!
//! Frames of several inputs that arrive within [`BURST`] of each other count as one
//! arrival (cameras triggered together). A next arrival is predicted only while the last
//! two gaps agree within 10 %; otherwise (the first frames, a dropped frame, an irregular
//! source) nothing is predicted and the helpers are woken at the take, as before.

use std::time::{Duration, Instant};

/// Arrivals closer than this are one burst.
pub const BURST: Duration = Duration::from_millis(2);

/// The longest wait of the spinning thread when nothing is due.
pub const IDLE_WAIT: Duration = Duration::from_millis(10);

#[derive(Debug)]
pub struct Cadence {
    ahead: Duration,
    last: Option<Instant>,
    gap: Option<Duration>,
    period: Option<Duration>,
    /// The wake-up instant already served.
    woken_for: Option<Instant>,
}

impl Cadence {
    /// Wakes `ahead` before each predicted arrival; `ahead` zero predicts nothing.
    pub fn new(ahead: Duration) -> Cadence {
        Cadence {
            ahead,
            last: None,
            gap: None,
            period: None,
            woken_for: None,
        }
    }

    /// A frame taken at `t`.
    pub fn arrived(&mut self, t: Instant) {
        if let Some(last) = self.last {
            let gap = t.saturating_duration_since(last);
            if gap < BURST {
                return;
            }
            let regular = self.gap.is_some_and(|g| {
                let (a, b) = (g.as_secs_f64(), gap.as_secs_f64());
                (a - b).abs() <= 0.1 * a.max(b)
            });
            self.period = regular.then_some(gap);
            self.gap = Some(gap);
        }
        self.last = Some(t);
    }

    /// When to wake the helpers for the next predicted arrival, if one is predicted.
    pub fn next_wake(&self) -> Option<Instant> {
        if self.ahead.is_zero() {
            return None;
        }
        let due = self.last? + self.period?;
        Some(due.checked_sub(self.ahead).unwrap_or(due))
    }

    /// How long the spinning thread may wait for messages from `now`: until the next
    /// wake-up not yet served, at most [`IDLE_WAIT`].
    pub fn wait(&self, now: Instant) -> Duration {
        match self.next_wake() {
            Some(w) if self.woken_for != Some(w) => w.saturating_duration_since(now).min(IDLE_WAIT),
            _ => IDLE_WAIT,
        }
    }

    /// Whether the helpers are to be woken at `now`: the predicted wake-up has come, not
    /// yet served, and the frame is not long overdue (four times `ahead` past its time:
    /// then the source has paused, and the take will wake them).
    pub fn wake_now(&mut self, now: Instant) -> bool {
        let Some(w) = self.next_wake() else {
            return false;
        };
        if now < w || self.woken_for == Some(w) || now > w + 4 * self.ahead {
            return false;
        }
        self.woken_for = Some(w);
        true
    }

    /// How long the woken helpers spin: until `spin` after the predicted arrival.
    pub fn spin(&self, spin: Duration) -> Duration {
        self.ahead + spin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A steady 60 Hz source: after two equal gaps the wake-up is `ahead` before the next
    /// frame, served once; the spinning thread's wait ends there.
    #[test]
    fn a_steady_source_is_predicted_and_woken_once_per_frame() {
        let t0 = Instant::now();
        let period = Duration::from_micros(16_667);
        let ahead = Duration::from_micros(200);
        let mut c = Cadence::new(ahead);
        c.arrived(t0);
        c.arrived(t0 + period);
        assert_eq!(c.next_wake(), None, "one gap is no cadence yet");
        c.arrived(t0 + 2 * period);
        let w = c.next_wake().expect("two equal gaps");
        assert_eq!(w, t0 + 3 * period - ahead);
        let now = t0 + 2 * period + MS;
        assert_eq!(c.wait(now), IDLE_WAIT, "more than 10 ms away");
        let now = w - 3 * MS;
        assert_eq!(c.wait(now), 3 * MS);
        assert!(!c.wake_now(now), "not yet");
        assert!(c.wake_now(w + Duration::from_micros(30)));
        assert!(!c.wake_now(w + Duration::from_micros(60)), "served once");
        assert_eq!(c.wait(w), IDLE_WAIT, "nothing due until the next frame");
        // The next frame moves the prediction on.
        c.arrived(t0 + 3 * period + Duration::from_micros(100));
        assert!(c.next_wake().unwrap() > w + period - MS);
    }

    /// Four inputs' frames within a burst count once; an irregular gap (a dropped frame)
    /// stops the prediction until two gaps agree again; a long-overdue wake-up is skipped;
    /// `ahead` zero predicts nothing.
    #[test]
    fn bursts_irregular_gaps_and_off() {
        let t0 = Instant::now();
        let p = 20 * MS;
        let mut c = Cadence::new(Duration::from_micros(500));
        for k in 0..3u32 {
            for cam in 0..4u32 {
                c.arrived(t0 + k * p + cam * Duration::from_micros(300));
            }
        }
        let w = c.next_wake().expect("bursts 20 ms apart");
        assert_eq!(w, t0 + 3 * p - Duration::from_micros(500));
        c.arrived(t0 + 5 * p); // two frames missing
        assert_eq!(c.next_wake(), None);
        c.arrived(t0 + 6 * p); // gaps 40 then 20 ms: still no cadence
        assert_eq!(c.next_wake(), None);
        c.arrived(t0 + 7 * p);
        let w = c.next_wake().expect("two gaps of 20 ms");
        assert!(!c.wake_now(w + 3 * MS), "overdue: the take wakes them");

        let mut off = Cadence::new(Duration::ZERO);
        for k in 0..4u32 {
            off.arrived(t0 + k * p);
        }
        assert_eq!(off.next_wake(), None);
        assert!(!off.wake_now(t0 + 4 * p));
        assert_eq!(off.wait(t0), IDLE_WAIT);
    }
}
