//! The load generator's common schedule: frame n of every input is due at start + n
//! periods, as cameras triggered together, and a publisher that falls behind rejoins it
//! instead of moving its own ([`on_schedule`]).

use std::time::{Duration, Instant};

/// The next frame a publisher sends on the common schedule (frame n due at start + n
/// periods) at `now`, when frame `n` is the next it has not sent: `(frame, skipped, wait)`.
/// Frame `n` itself while it is due less than a period ago (`wait` until it is due, zero
/// once it is); further behind, the first frame due less than a period ago, now, with the
/// frames skipped to reach it.
pub(super) fn on_schedule(
    start: Instant,
    period: Duration,
    n: u32,
    now: Instant,
) -> (u32, u32, Duration) {
    let due = start + period * n;
    if now < due {
        return (n, 0, due - now);
    }
    let behind = now - due;
    if behind <= period {
        return (n, 0, Duration::ZERO);
    }
    let skipped = (behind.as_nanos() / period.as_nanos()) as u32;
    (n + skipped, skipped, Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_publisher_skips_to_the_common_schedule() {
        let start = Instant::now();
        let p = Duration::from_millis(10);
        let ms = Duration::from_millis;
        // early: wait for the frame's due time
        assert_eq!(on_schedule(start, p, 3, start + ms(25)), (3, 0, ms(5)));
        // due, or less than a period behind: publish it now
        assert_eq!(
            on_schedule(start, p, 3, start + ms(30)),
            (3, 0, Duration::ZERO)
        );
        assert_eq!(
            on_schedule(start, p, 3, start + ms(40)),
            (3, 0, Duration::ZERO)
        );
        // 2.5 periods behind: frames 3 and 4 skipped, frame 5 (due 5 ms ago) now
        assert_eq!(
            on_schedule(start, p, 3, start + ms(55)),
            (5, 2, Duration::ZERO)
        );
        // two publishers, one of them late, meet on the same frame at the next due time
        let (a, _, wait_a) = on_schedule(start, p, 6, start + ms(52));
        let (b, skipped_b, _) = on_schedule(start, p, 2, start + ms(52));
        assert_eq!((a, wait_a, b, skipped_b), (6, ms(8), 5, 3));
        let (b, _, wait_b) = on_schedule(start, p, b + 1, start + ms(52));
        assert_eq!((b, wait_b), (6, ms(8)));
    }
}
