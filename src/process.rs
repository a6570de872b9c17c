//! What Linux's `/proc` says about a process (the soak's, the node bench's and the load
//! generator's measures): its resident memory, its CPU time, the calling thread's CPU time.
//! `None` where there is no `/proc` or the process is gone.
//!
//! May import: nothing of the crate.

/// `VmRSS` of this process in KiB (Linux), `None` elsewhere.
pub fn rss_kib() -> Option<u64> {
    rss_kib_of("self")
}

/// `VmRSS` of process `pid` ("self" or a number) in KiB (Linux), `None` elsewhere or when
/// it is gone.
pub fn rss_kib_of(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time of the calling thread in nanoseconds (Linux schedstat), `None` elsewhere.
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Clock ticks per second of `/proc/PID/stat`'s times: Linux's USER_HZ, 100 on every
/// architecture it runs on (x86-64 and aarch64 included).
const USER_HZ: f64 = 100.0;

/// User + system CPU seconds of process `pid` ("self" or a number), all threads; `None`
/// where there is no /proc or the process is gone.
pub fn cpu_seconds_of(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count the fields after its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    // After ')': state is field 3, utime field 14, stime field 15.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}
