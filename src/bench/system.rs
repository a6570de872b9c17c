//! What the report says about the machine and the run.

#[allow(unused_imports)]
use super::*;

/// `cmd` arguments; the report prints them.
pub(super) fn command_line() -> String {
    let mut v: Vec<String> = std::env::args().collect();
    if let Some(first) = v.first_mut() {
        if let Some(name) = Path::new(first.as_str()).file_name() {
            *first = name.to_string_lossy().into_owned();
        }
    }
    v.join(" ")
}

/// Today's UTC date, YYYY-MM-DD (civil-from-days; no date crate needed).
pub(super) fn utc_date() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

pub(super) fn cpu_model() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let simd = crate::cpu::simd::level().name();
    format!("{model}, {n} logical CPUs, the CPU stages at SIMD level {simd}")
}

/// GPU name, driver and CUDA version from nvidia-smi, when it is there.
pub(super) fn gpu_info() -> Option<String> {
    let q = Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let line = String::from_utf8_lossy(&q.stdout)
        .lines()
        .next()?
        .trim()
        .to_string();
    let cuda = Command::new("nvidia-smi")
        .output()
        .ok()
        .and_then(|o| {
            let s = String::from_utf8_lossy(&o.stdout).into_owned();
            s.split("CUDA Version:")
                .nth(1)
                .and_then(|r| r.split_whitespace().next().map(str::to_string))
        })
        .unwrap_or_else(|| "?".into());
    let mut parts = line.split(',').map(str::trim);
    let name = parts.next().unwrap_or("?");
    let driver = parts.next().unwrap_or("?");
    let mem = parts.next().unwrap_or("?");
    Some(format!("{name} ({mem}), driver {driver}, CUDA {cuda}"))
}
