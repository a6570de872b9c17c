//! When to wake the GPU before a camera's next frame (`cuda.warm_ahead_us`): from the
//! instants the node took the last frames, the next one's, while they come at a steady rate.
//! After an idle spell the driver and the GPU answer a frame's first calls slowly; one small
//! round trip just before the frame (`Pipeline::warm_gpu`) takes most of that off the frame
//! (examples/paced_floor.rs; docs/performance.md, change 79).
//!
//! Owns only the prediction; the spinning thread (`node`) waits for it and makes the call.
//!
//! May import: nothing of the crate.

use std::time::{Duration, Instant};

/// How many gaps between frames the prediction looks at.
const GAPS: usize = 8;
/// The gaps are steady when the longest and the shortest of them differ by at most this
/// fraction of their median (a camera's period; a dropped frame doubles one gap).
const SPREAD: f64 = 0.25;
/// Gaps a steady rate may have: 1 ms to 1 s (1000 to 1 Hz).
const SHORTEST: Duration = Duration::from_millis(1);
const LONGEST: Duration = Duration::from_secs(1);

/// The last frames' instants and the warm-up due before the next one.
#[derive(Debug, Default)]
pub(super) struct WarmAhead {
    gaps: [Duration; GAPS],
    count: usize,
    last: Option<Instant>,
    due: Option<Instant>,
}

impl WarmAhead {
    /// A frame taken at `at`: the warm-up due `lead` before the next one, when the last
    /// `GAPS` gaps are steady and `lead` is under half of them; else none.
    pub(super) fn frame_taken(&mut self, at: Instant, lead: Option<Duration>) {
        if let Some(gap) = self.last.and_then(|l| at.checked_duration_since(l)) {
            self.gaps[self.count % GAPS] = gap;
            self.count += 1;
        }
        self.last = Some(at);
        self.due = match (lead, self.period()) {
            (Some(lead), Some(period)) if lead < period / 2 => Some(at + period - lead),
            _ => None,
        };
    }

    /// The gaps' median when the last `GAPS` of them are steady.
    fn period(&self) -> Option<Duration> {
        if self.count < GAPS {
            return None;
        }
        let mut g = self.gaps;
        g.sort_unstable();
        let median = g[GAPS / 2];
        let steady = (g[GAPS - 1] - g[0]).as_secs_f64() <= SPREAD * median.as_secs_f64();
        (steady && (SHORTEST..=LONGEST).contains(&median)).then_some(median)
    }

    /// How long the thread may wait for the next frame before the warm-up is due: until
    /// then, at most `max`.
    pub(super) fn wait(&self, now: Instant, max: Duration) -> Duration {
        match self.due {
            Some(due) => due.saturating_duration_since(now).min(max),
            None => max,
        }
    }

    /// Whether the warm-up is due at `now` (once per frame: it is then spent).
    pub(super) fn take_due(&mut self, now: Instant) -> bool {
        let due = self.due.is_some_and(|d| d <= now);
        if due {
            self.due = None;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Frames taken at `t0 + gaps[..k]` summed.
    fn taken(w: &mut WarmAhead, t0: Instant, gaps: &[Duration], lead: Option<Duration>) -> Instant {
        let mut t = t0;
        w.frame_taken(t, lead);
        for &g in gaps {
            t += g;
            w.frame_taken(t, lead);
        }
        t
    }

    #[test]
    fn due_lead_before_the_next_frame_of_a_steady_camera_and_only_once() {
        let lead = Some(Duration::from_micros(500));
        let t0 = Instant::now();
        let mut w = WarmAhead::default();
        // 33.3 ms with +-1 ms of jitter: steady.
        let gaps: Vec<Duration> = (0..GAPS)
            .map(|k| Duration::from_micros(33_333 + [0, 900, 0, 1000][k % 4] - 500))
            .collect();
        let last = taken(&mut w, t0, &gaps[..GAPS - 1], lead);
        assert!(!w.take_due(last + 100 * MS), "seven gaps are too few");
        let last = last + gaps[GAPS - 1];
        w.frame_taken(last, lead);
        let mut sorted = gaps.clone();
        sorted.sort();
        let due = last + sorted[GAPS / 2] - Duration::from_micros(500);
        assert_eq!(w.wait(last, 10 * MS), 10 * MS);
        assert_eq!(w.wait(due - 3 * MS, 10 * MS), 3 * MS);
        assert!(!w.take_due(due - Duration::from_micros(1)));
        assert!(w.take_due(due));
        assert!(!w.take_due(due + MS), "spent");
        assert_eq!(w.wait(due, 10 * MS), 10 * MS);
    }

    #[test]
    fn none_when_off_unsteady_too_fast_too_slow_or_the_lead_too_long() {
        let t0 = Instant::now();
        let steady = [33 * MS; GAPS];
        let cases: [(&[Duration], Option<Duration>); 6] = [
            (&steady, None),
            // a dropped frame doubles one gap
            (
                &[
                    33 * MS,
                    33 * MS,
                    66 * MS,
                    33 * MS,
                    33 * MS,
                    33 * MS,
                    33 * MS,
                    33 * MS,
                ],
                Some(MS),
            ),
            (
                &[Duration::from_micros(500); GAPS],
                Some(Duration::from_micros(100)),
            ),
            (&[Duration::from_secs(2); GAPS], Some(MS)),
            (&steady, Some(17 * MS)),
            (&steady, Some(33 * MS)),
        ];
        for (k, (gaps, lead)) in cases.iter().enumerate() {
            let mut w = WarmAhead::default();
            let last = taken(&mut w, t0, gaps, *lead);
            assert!(!w.take_due(last + Duration::from_secs(10)), "case {k}");
            assert_eq!(w.wait(last, 10 * MS), 10 * MS, "case {k}");
        }
        // The control: the steady gaps with a short lead are due.
        let mut w = WarmAhead::default();
        let last = taken(&mut w, t0, &steady, Some(MS));
        assert!(w.take_due(last + 32 * MS));
    }

    #[test]
    fn a_frame_off_the_beat_cancels_the_warm_up_until_the_rate_is_steady_again() {
        let (t0, lead) = (Instant::now(), Some(MS));
        let mut w = WarmAhead::default();
        let last = taken(&mut w, t0, &[33 * MS; GAPS], lead);
        // The next frame comes early, before the warm-up: that one is gone, and with a
        // 20 ms gap among the last eight none is due.
        let early = last + 20 * MS;
        w.frame_taken(early, lead);
        assert!(!w.take_due(early + 32 * MS));
        let mut t = early;
        for k in 0..GAPS {
            t += 33 * MS;
            w.frame_taken(t, lead);
            assert_eq!(w.take_due(t + 32 * MS), k == GAPS - 1, "frame {k} after");
        }
    }
}
