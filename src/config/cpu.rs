//! `cpu.*`: how the CPU stages use the machine's cores.

use serde::{Deserialize, Serialize};

/// Settings of the CPU stages (the CPU backend's pipeline and the tracker's CPU work).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuConfig {
    /// Threads of the CPU stages: pyramid rows, levels, Canny beside detection, descriptor
    /// and LK points. 0 = auto: every core for the CPU backend's pipeline and a tracker
    /// beside it, 1 for a tracker whose frames a GPU pipeline processes (its CPU work then
    /// stays off the cores the GPU's host side uses). Outputs are the same for any count.
    pub threads: u32,
}

/// Most threads `cpu.threads` may ask for.
pub const MAX_CPU_THREADS: i64 = 256;

impl CpuConfig {
    /// The thread count for a pipeline (`gpu`: whether a GPU processes its frames).
    pub fn threads_for(&self, gpu: bool) -> usize {
        match self.threads {
            0 if gpu => 1,
            0 => cores(),
            n => n as usize,
        }
    }
}

/// The cores this process may use, read once: `available_parallelism` reads the cgroup
/// files on Linux, and [`CpuConfig::threads_for`] is asked on every frame.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
