//! NVRTC: the kernels' translation unit to a CUBIN for the device's own architecture, the
//! options it is compiled with, and where the CUBINs are cached on disk (keyed by a hash of
//! the source, options, architecture, driver and NVRTC versions; `context.rs` loads them).

use std::ffi::CString;
use std::path::PathBuf;

use cudarc::driver::sys;
use cudarc::nvrtc;

use crate::error::{Error, Result};

pub(crate) fn cuda_err(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Cuda(format!("{what}: {e:?}"))
}

pub(super) fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

pub(super) fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("GPU_FEATURES_KERNEL_CACHE") {
        if d == "off" || d.is_empty() {
            return None;
        }
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("gpu_features"));
    }
    if let Some(d) = std::env::var_os("HOME") {
        return Some(PathBuf::from(d).join(".cache").join("gpu_features"));
    }
    Some(std::env::temp_dir().join("gpu_features-cache"))
}

pub(super) fn nvrtc_version() -> Result<(i32, i32)> {
    let (mut a, mut b) = (0, 0);
    let r = unsafe { nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
    if r != nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::Cuda(format!("nvrtcVersion failed: {r:?}")));
    }
    Ok((a, b))
}

pub(super) fn driver_version() -> Result<i32> {
    let mut v = 0;
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| cuda_err("cuDriverGetVersion", e))?;
    Ok(v)
}

/// NVRTC's options for `arch` (e.g. "sm_90").
pub(super) fn compile_options(arch: &str) -> Vec<String> {
    let mut opts = vec![
        format!("--gpu-architecture={arch}"),
        // Bit-exact float arithmetic with the CPU reference: no FMA contraction.
        "--fmad=false".into(),
        "--std=c++17".into(),
    ];
    // For profiling: `ncu`'s source view needs line information (same code otherwise).
    if std::env::var_os(LINE_INFO_ENV).is_some() {
        opts.push("--generate-line-info".into());
    }
    opts
}

/// Environment variable: compile the kernels with line information (for `ncu`).
pub const LINE_INFO_ENV: &str = "GPU_FEATURES_KERNEL_LINE_INFO";

/// NVRTC: source -> CUBIN (options from [`compile_options`]).
pub(super) fn compile_cubin(src: &str, opts: &[String]) -> Result<Vec<u8>> {
    let csrc = CString::new(src).map_err(|e| cuda_err("kernel source", e))?;
    let name = CString::new("gpu_features.cu").unwrap();
    let prog = nvrtc::result::create_program(&csrc, Some(&name))
        .map_err(|e| cuda_err("nvrtcCreateProgram", e))?;
    struct Guard(nvrtc::sys::nvrtcProgram);
    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = unsafe { nvrtc::result::destroy_program(self.0) };
        }
    }
    let guard = Guard(prog);
    if let Err(e) = unsafe { nvrtc::result::compile_program(guard.0, opts) } {
        let log = unsafe { nvrtc::result::get_program_log(guard.0) }
            .map(|l| {
                // c_char is i8 on x86-64, u8 on aarch64: its byte either way.
                let bytes: Vec<u8> = l
                    .iter()
                    .map(|&c| c.to_ne_bytes()[0])
                    .take_while(|&c| c != 0)
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default();
        return Err(Error::Cuda(format!(
            "NVRTC failed to compile the kernels ({e:?}, options {opts:?}):\n{log}"
        )));
    }
    let mut size = 0usize;
    let r = unsafe { nvrtc::sys::nvrtcGetCUBINSize(guard.0, &mut size) };
    if r != nvrtc::sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
        return Err(Error::Cuda(format!("nvrtcGetCUBINSize failed: {r:?}")));
    }
    let mut cubin = vec![0u8; size];
    let r = unsafe { nvrtc::sys::nvrtcGetCUBIN(guard.0, cubin.as_mut_ptr() as *mut _) };
    if r != nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::Cuda(format!("nvrtcGetCUBIN failed: {r:?}")));
    }
    Ok(cubin)
}
