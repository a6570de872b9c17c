//! The device, its context and streams, and the kernel module: NVRTC compiles `kernels/*.cu` once for the device's
//! own architecture (`sm_XY`) and the CUBIN is cached on disk, keyed by a hash of the source
//! and options, the architecture, the driver version and the NVRTC version, so a restart
//! loads it in milliseconds. Every failure here is an `Error::Cuda` with the reason; nothing
//! panics (cudarc's loader panics on a missing library are checked first and caught).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{result, sys, CudaContext, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

pub(crate) use super::compile::cuda_err;
pub use super::compile::LINE_INFO_ENV;
use super::compile::{
    cache_dir, compile_cubin, compile_options, driver_version, fnv1a, nvrtc_version,
};
use super::sources::translation_unit;
use crate::error::{Error, Result};

/// How the kernel module was obtained.
#[derive(Clone, Debug)]
pub struct ModuleInfo {
    pub arch: String,
    pub from_cache: bool,
    pub cache_path: Option<PathBuf>,
    /// NVRTC compile (or cache load) time.
    pub ms: f64,
}

/// A CUDA device with its context, its streams and the compiled kernel module (the typed
/// kernel handles are `cuda::Gpu`'s, above this layer).
pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    /// A second stream, of a priority above the main stream's: Canny runs there beside the
    /// pyramid and the detection (they share only the decoded frame, which both read).
    pub side: Arc<CudaStream>,
    /// The feature tracker's stream (`cuda::lk`, `cuda::gftt`), at the main stream's
    /// priority: a frame's LK pyramid and flow start there as soon as the decode is done,
    /// beside the detection on the main stream (`CudaPipeline::process_edges_then`), which
    /// the node needs first (the keypoints go out before the tracks).
    pub track: Arc<CudaStream>,
    /// The priority of the pyramid's launches (above Canny's stream), where the device has
    /// enough priority levels.
    pub pyramid_priority: Option<i32>,
    /// The compiled kernels (`cuda::kernels` loads its typed handles from it).
    pub(in crate::cuda) cu_module: Arc<CudaModule>,
    pub name: String,
    pub module: ModuleInfo,
    /// An integrated GPU (Jetson): its memory is the host's (`cuda.zero_copy: auto` maps).
    pub integrated: bool,
    /// The device can read mapped pinned host memory (`cuda.zero_copy`).
    pub can_map_host: bool,
    /// Fault injection for tests: when non-zero, the launch that brings it to 0 fails
    /// (`GPU_FEATURES_INJECT_CUDA_FAULT=N` at start-up, or [`Device::inject_fault`]).
    pub(super) fault_in: AtomicU64,
    /// The device can launch a kernel while the one before it drains (sm_90 and later).
    programmatic_capable: bool,
    /// Launches carry the programmatic-serialization attribute (`cuda.programmatic_launch`
    /// on a capable device; note "programmatic dependent launch" in kernels/common.cuh).
    pub(super) programmatic: AtomicBool,
}

/// Environment variable: make the N-th kernel or graph launch fail (tests of the CPU fallback).
pub const INJECT_FAULT_ENV: &str = "GPU_FEATURES_INJECT_CUDA_FAULT";

/// The device (CUDA ordinal) that [`Device::new`] opens: 0 unless [`set_device`] chose another.
static DEVICE: AtomicUsize = AtomicUsize::new(0);

/// Chooses the CUDA device (ordinal, as `nvidia-smi` / `CUDA_VISIBLE_DEVICES` number them)
/// that pipelines created from now on open, so that several GPUs can share the cameras
/// (the node's `cuda.device` parameter). An ordinal the driver does not have makes
/// [`Device::new`] fail with a message naming it.
pub fn set_device(ordinal: usize) {
    DEVICE.store(ordinal, Ordering::Relaxed);
}

/// The ordinal [`Device::new`] opens (see [`set_device`]).
pub fn device() -> usize {
    DEVICE.load(Ordering::Relaxed)
}

/// CUDA devices the driver reports; 0 when there is no driver or no device (never panics).
/// Tests use it to tell "no GPU here" (skip) from "a GPU that fails" (a failure).
pub fn device_count() -> usize {
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return 0;
    }
    std::panic::catch_unwind(|| {
        result::init().ok()?;
        result::device::get_count().ok()
    })
    .ok()
    .flatten()
    .map_or(0, |n| n.max(0) as usize)
}

impl Device {
    /// Opens the selected device ([`set_device`]; 0 by default), compiles (or loads the
    /// cached) kernels. Never panics.
    pub fn new() -> Result<Device> {
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::Cuda(
                "no CUDA driver: libcuda.so could not be loaded (no NVIDIA driver installed?)"
                    .into(),
            ));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(Error::Cuda(
                "libnvrtc could not be loaded (install the CUDA runtime compiler, or add its \
                 directory, e.g. /usr/local/cuda/lib64, to LD_LIBRARY_PATH)"
                    .into(),
            ));
        }
        match std::panic::catch_unwind(Self::open) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                Err(Error::Cuda(format!("CUDA initialisation failed: {msg}")))
            }
        }
    }

    fn open() -> Result<Device> {
        result::init().map_err(|e| cuda_err("cuInit (no usable driver or device)", e))?;
        let n = result::device::get_count().map_err(|e| cuda_err("cuDeviceGetCount", e))?;
        if n < 1 {
            return Err(Error::Cuda("no CUDA device found".into()));
        }
        let ordinal = device();
        if ordinal >= n as usize {
            return Err(Error::Cuda(format!(
                "CUDA device {ordinal} was asked for, but the driver reports {n} device(s) (0..={})",
                n - 1
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| cuda_err("creating a CUDA context", e))?;
        // One stream, raw pointers: cudarc's per-buffer event tracking is not needed.
        unsafe { ctx.disable_event_tracking() };
        // Priorities (docs/performance.md, change 29): the pyramid's launches first while
        // their frame is the only one in flight (the detection waits for all of it); Canny's
        // stream next, so that its edge map is back early and the host unpacks it while the
        // detection still runs; the detection last. With fewer than three levels Canny keeps
        // the greatest and the pyramid runs at its stream's. (Greater priorities are smaller
        // numbers.)
        let (least, greatest) = result::stream::get_priority_range()
            .map_err(|e| cuda_err("stream priority range", e))?;
        let (main_prio, side_prio, pyramid_priority) = if least - greatest >= 2 {
            (least, greatest + 1, Some(greatest))
        } else {
            (least, greatest, None)
        };
        let stream = ctx
            .new_stream_with_priority(main_prio)
            .map_err(|e| cuda_err("creating a stream", e))?;
        let side = ctx
            .new_stream_with_priority(side_prio)
            .map_err(|e| cuda_err("creating a stream", e))?;
        let track = ctx
            .new_stream_with_priority(main_prio)
            .map_err(|e| cuda_err("creating a stream", e))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let flag = |a| ctx.attribute(a).map(|v| v != 0).unwrap_or(false);
        let integrated = flag(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_INTEGRATED);
        let can_map_host = flag(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| cuda_err("compute capability", e))?;
        let arch = format!("sm_{major}{minor}");
        let (module, info) = Self::load_kernels(&ctx, &arch)?;
        Ok(Device {
            ctx,
            stream,
            side,
            track,
            pyramid_priority,
            cu_module: module,
            name,
            module: info,
            integrated,
            can_map_host,
            programmatic_capable: major >= 9,
            programmatic: AtomicBool::new(false),
            fault_in: AtomicU64::new(
                std::env::var(INJECT_FAULT_ENV)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0),
            ),
        })
    }

    /// Makes the `n`-th launch from now (of a kernel, or of a recorded graph: `cuda.graphs`)
    /// fail with an `Error::Cuda` (0 disarms), as a launch failure, an out-of-memory or a lost device would: for testing the recovery.
    pub fn inject_fault(&self, n: u64) {
        self.fault_in.store(n, Ordering::Relaxed);
    }

    fn load_kernels(ctx: &Arc<CudaContext>, arch: &str) -> Result<(Arc<CudaModule>, ModuleInfo)> {
        let t = Instant::now();
        let src = translation_unit();
        let opts = compile_options(arch);
        let (nv_major, nv_minor) = nvrtc_version()?;
        let drv = driver_version()?;
        let mut h = fnv1a(src.as_bytes(), 0xcbf29ce484222325);
        h = fnv1a(opts.join(" ").as_bytes(), h);
        let file = format!("kernels-{h:016x}-{arch}-drv{drv}-nvrtc{nv_major}.{nv_minor}.cubin");
        let path = cache_dir().map(|d| d.join(file));
        if let Some(p) = &path {
            if let Ok(bytes) = std::fs::read(p) {
                if let Ok(m) = ctx.load_module(Ptx::from_binary(bytes)) {
                    let info = ModuleInfo {
                        arch: arch.into(),
                        from_cache: true,
                        cache_path: path.clone(),
                        ms: t.elapsed().as_secs_f64() * 1e3,
                    };
                    return Ok((m, info));
                }
                // A stale or corrupt cache file: recompile and overwrite it.
            }
        }
        let cubin = compile_cubin(&src, &opts)?;
        let m = ctx
            .load_module(Ptx::from_binary(cubin.clone()))
            .map_err(|e| cuda_err(&format!("loading the {arch} kernel module"), e))?;
        if let Some(p) = &path {
            // Best effort: a read-only home only costs the compile on the next start.
            if let Some(d) = p.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            let tmp = p.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, &cubin).is_ok() {
                let _ = std::fs::rename(&tmp, p);
            }
        }
        let info = ModuleInfo {
            arch: arch.into(),
            from_cache: false,
            cache_path: path,
            ms: t.elapsed().as_secs_f64() * 1e3,
        };
        Ok((m, info))
    }

    /// Device memory in use (total - free, all processes: `cuMemGetInfo`), bytes.
    pub fn memory_used(&self) -> Result<u64> {
        self.bind()?;
        let (free, total) =
            cudarc::driver::result::mem_get_info().map_err(|e| cuda_err("cuMemGetInfo", e))?;
        Ok((total - free) as u64)
    }

    /// Makes the context current on the calling thread (cheap; call at each entry point).
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_err("binding the CUDA context", e))
    }

    /// Whether the launches from now on let a kernel start while the one before it in its
    /// stream drains (`cuda.programmatic_launch`; kept off where the device cannot).
    pub fn set_programmatic_launch(&self, on: bool) {
        self.programmatic
            .store(on && self.programmatic_capable, Ordering::Relaxed);
    }

    /// Waits for the main stream's work.
    pub fn sync(&self) -> Result<()> {
        unsafe { result::stream::synchronize(self.stream.cu_stream()) }
            .map_err(|e| cuda_err("stream synchronize (a kernel failed)", e))
    }

    /// Waits for the tracker's stream's work ([`Device::track`]).
    pub fn sync_track(&self) -> Result<()> {
        unsafe { result::stream::synchronize(self.track.cu_stream()) }
            .map_err(|e| cuda_err("stream synchronize (a kernel failed)", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels compile for the data-centre GPU this project is measured on (sm_90) and
    /// for every Jetson GPU the loaded NVRTC supports (Xavier sm_72, Orin sm_87, Thor sm_101
    /// in CUDA 12 / sm_110 in CUDA 13) wherever libnvrtc can be loaded, no GPU needed: the
    /// test command installs the NVRTC wheel (scripts/setup-nvrtc.sh) and sets
    /// GF_REQUIRE_NVRTC, so that a kernel that does not compile fails CI and not first on a
    /// robot. Orin is required of any NVRTC; Xavier of CUDA 12's (CUDA 13 dropped it).
    #[test]
    fn kernels_compile_with_nvrtc() {
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            assert!(
                std::env::var_os("GF_REQUIRE_NVRTC").is_none(),
                "GF_REQUIRE_NVRTC is set but libnvrtc cannot be loaded"
            );
            eprintln!(
                "SKIPPED kernels_compile_with_nvrtc: libnvrtc not found (scripts/setup-nvrtc.sh \
                 installs it; LD_LIBRARY_PATH must name its folder)"
            );
            return;
        }
        let src = translation_unit();
        let supported = supported_archs();
        let (major, minor) = nvrtc_version();
        let mut archs: Vec<i32> = JETSON_ARCHS
            .iter()
            .copied()
            .filter(|a| supported.contains(a))
            .collect();
        assert!(
            archs.contains(&87),
            "NVRTC {major}.{minor} cannot compile for Orin (sm_87)"
        );
        if major == 12 {
            assert!(
                archs.contains(&72),
                "NVRTC 12.{minor} without Xavier (sm_72)"
            );
        }
        archs.push(90);
        eprintln!("NVRTC {major}.{minor}: compiling for {archs:?} (it supports {supported:?})");
        for arch in archs.iter().map(|a| format!("sm_{a}")) {
            let arch = arch.as_str();
            let opts = compile_options(arch);
            let cubin = compile_cubin(&src, &opts).unwrap_or_else(|e| panic!("{arch}: {e}"));
            assert!(cubin.len() > 1000, "{arch}: a {} byte CUBIN", cubin.len());
            // For scripts/cubin-regs.py (registers and stack of every kernel, no GPU needed).
            if let Some(dir) = std::env::var_os("GF_DUMP_CUBIN") {
                let path = std::path::Path::new(&dir).join(format!("kernels-{arch}.cubin"));
                std::fs::write(&path, &cubin).expect("writing the CUBIN");
            }
            eprintln!("kernels compiled for {arch}: {} byte CUBIN", cubin.len());
        }
    }

    /// Jetson GPUs: Xavier, Orin, Thor (CUDA 12 names it sm_101, CUDA 13 sm_110).
    const JETSON_ARCHS: [i32; 4] = [72, 87, 101, 110];

    fn nvrtc_version() -> (i32, i32) {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two out-pointers to live locals; libnvrtc is loaded (checked above).
        let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        assert_eq!(r, cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS);
        (major, minor)
    }

    /// The `sm_XY` numbers the loaded NVRTC can compile for.
    fn supported_archs() -> Vec<i32> {
        let mut n = 0;
        // SAFETY: an out-pointer to a live local.
        let r = unsafe { cudarc::nvrtc::sys::nvrtcGetNumSupportedArchs(&mut n) };
        assert_eq!(r, cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS);
        let mut v = vec![0; n.max(0) as usize];
        // SAFETY: `v` holds the `n` ints NVRTC writes.
        let r = unsafe { cudarc::nvrtc::sys::nvrtcGetSupportedArchs(v.as_mut_ptr()) };
        assert_eq!(r, cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS);
        v
    }
}
