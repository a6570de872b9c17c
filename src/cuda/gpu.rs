//! The GPU session: the device of the driver layer (context, streams, module) with the typed
//! handles of its kernels. One per pipeline; the tracker of the same frames shares it
//! (`CudaPipeline::session`).

use std::ops::Deref;

use super::driver::Device;
use super::kernels::Kernels;
use crate::error::Result;

pub struct Gpu {
    device: Device,
    /// Every kernel, by stage, each launch typed (`cuda::kernels`).
    pub k: Kernels,
}

impl Gpu {
    /// Opens the selected device (`cuda::set_device`; 0 by default) and compiles (or loads
    /// the cached) kernels. Never panics.
    pub fn new() -> Result<Gpu> {
        let device = Device::new()?;
        let k = Kernels::load(&device)?;
        Ok(Gpu { device, k })
    }
}

/// The driver's calls (streams, `bind`, `sync`, the fault injection) on the session.
impl Deref for Gpu {
    type Target = Device;
    fn deref(&self) -> &Device {
        &self.device
    }
}
