//! Per-frame instants on the host's monotonic clock, written by the node, the relay and the
//! load generator when `GF_TRACE_DIR` is set, so that a frame's round trip can be split
//! where no single process sees it: the way in (the load's publish -> the node's take), the
//! node (take -> keypoints published) and the way back (-> the answer's arrival at the load).
//! CLOCK_MONOTONIC is one clock for every process of a host, and Rust's `Instant` reads it,
//! so instants taken in different processes compare directly (r2r 0.9.7 drops the
//! middleware's own source timestamp: its takes pass a message info they never read).
//!
//! Each process keeps its rows in memory, in a buffer sized once when tracing is on (no
//! allocation, no file access per frame; rows past [`MAX_ROWS`] are not kept), and writes
//! `DIR/<process>-<input>.tsv` when it stops: a header line, then `stamp_ns` (the header
//! stamp in ns, [`crate::ros::convert::stamp_ns`]), and two
//! instants in ns. `scripts/trace_split.py DIR` joins the files by header stamp.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

/// Rows kept per input: 30 minutes at 60 Hz (24 bytes each, 3 MiB, only while tracing).
pub const MAX_ROWS: usize = 1 << 17;

/// The directory `GF_TRACE_DIR` names, if set and not empty.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os("GF_TRACE_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// CLOCK_MONOTONIC now, in ns.
fn monotonic_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through the pointer, which points to a live
    // local; CLOCK_MONOTONIC exists on every Linux, and its failure (EINVAL, EFAULT) is
    // impossible with these arguments (checked below anyway).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `t` on CLOCK_MONOTONIC, in ns: one anchor pair (an `Instant` and the clock read right
/// after it) taken on first use, then pure arithmetic. `Instant` reads the same clock on
/// Linux, so the anchor's only error is the ~20-50 ns between its two reads.
pub fn monotonic_ns(t: Instant) -> u64 {
    static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
    let &(at, ns) = ANCHOR.get_or_init(|| (Instant::now(), monotonic_now_ns()));
    if t >= at {
        ns + (t - at).as_nanos() as u64
    } else {
        ns.saturating_sub((at - t).as_nanos() as u64)
    }
}

/// One input's rows: a header stamp and two instants.
#[derive(Default)]
pub struct Trace {
    rows: Vec<(i64, Instant, Instant)>,
}

impl Trace {
    /// A trace that keeps rows only when `on` (its buffer allocated now, once).
    pub fn new(on: bool) -> Trace {
        Trace {
            rows: Vec::with_capacity(if on { MAX_ROWS } else { 0 }),
        }
    }

    /// Keeps one frame's row while tracing and while the buffer has room.
    pub fn push(&mut self, stamp_ns: i64, a: Instant, b: Instant) {
        if self.rows.len() < self.rows.capacity() {
            self.rows.push((stamp_ns, a, b));
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Writes `dir/<process>-<input>.tsv` (input `image` where the node has no `inputs`)
    /// with the columns `stamp_ns`, `columns[0]`, `columns[1]`; nothing when not tracing.
    pub fn write(
        &self,
        dir: &Path,
        process: &str,
        input: &str,
        columns: [&str; 2],
    ) -> std::io::Result<()> {
        if self.rows.capacity() == 0 {
            return Ok(());
        }
        std::fs::create_dir_all(dir)?;
        let input = if input.is_empty() { "image" } else { input };
        let path = dir.join(format!("{process}-{input}.tsv"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(f, "stamp_ns\t{}\t{}", columns[0], columns[1])?;
        for &(stamp, a, b) in &self.rows {
            writeln!(f, "{stamp}\t{}\t{}", monotonic_ns(a), monotonic_ns(b))?;
        }
        f.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn instants_map_onto_the_monotonic_clock_read_directly() {
        let before = monotonic_now_ns();
        let t = Instant::now();
        let after = monotonic_now_ns();
        let ns = monotonic_ns(t);
        // The anchor's two reads are at most a few microseconds apart, even on a loaded
        // machine; a clock other than CLOCK_MONOTONIC would be off by far more.
        assert!(
            ns + 1_000_000 >= before && ns <= after + 1_000_000,
            "{before} {ns} {after}"
        );
        let later = t + Duration::from_micros(1234);
        assert_eq!(monotonic_ns(later) - ns, 1_234_000);
        let earlier = t - Duration::from_micros(5);
        assert_eq!(ns - monotonic_ns(earlier), 5_000);
    }

    #[test]
    fn rows_are_kept_only_while_tracing_and_written_in_order() {
        let t0 = Instant::now();
        let mut off = Trace::new(false);
        off.push(1, t0, t0);
        assert!(off.is_empty());
        let dir = std::env::temp_dir().join(format!("gf-trace-test-{}", std::process::id()));
        off.write(&dir, "node", "cam1", ["received_ns", "keypoints_ns"])
            .unwrap();
        assert!(!dir.join("node-cam1.tsv").exists());

        let mut on = Trace::new(true);
        on.push(2_000_000_000, t0, t0 + Duration::from_micros(300));
        on.push(
            2_016_666_667,
            t0 + Duration::from_millis(17),
            t0 + Duration::from_millis(18),
        );
        assert_eq!(on.len(), 2);
        on.write(&dir, "node", "", ["received_ns", "keypoints_ns"])
            .unwrap();
        let text = std::fs::read_to_string(dir.join("node-image.tsv")).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(lines[0], ["stamp_ns", "received_ns", "keypoints_ns"]);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1][0], "2000000000");
        assert_eq!(lines[2][0], "2016666667");
        let n = |r: usize, c: usize| lines[r][c].parse::<u64>().unwrap();
        assert_eq!(n(1, 2) - n(1, 1), 300_000);
        assert_eq!(n(2, 1) - n(1, 1), 17_000_000);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_full_buffer_keeps_its_rows_and_takes_no_more() {
        let t0 = Instant::now();
        let mut on = Trace::new(true);
        for i in 0..MAX_ROWS + 10 {
            on.push(i as i64, t0, t0);
        }
        assert_eq!(on.len(), MAX_ROWS);
        assert_eq!(on.rows.capacity(), MAX_ROWS);
        assert_eq!(on.rows.last().unwrap().0, MAX_ROWS as i64 - 1);
    }
}
