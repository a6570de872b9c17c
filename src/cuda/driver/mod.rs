//! The CUDA host's lowest layer: what every stage needs and none owns. The device with its
//! context, streams and kernel module ([`mod@device`], compiled by [`compile`] from the sources of
//! [`sources`]), device and pinned host buffers ([`buffers`]), the one raw launch
//! ([`launch`]: an `unsafe fn` with its safety contract), CUDA graphs ([`graph`]), the
//! staging of a frame into pinned memory ([`staging`]) with its host threads ([`crew`]).
//!
//! Above it, `cuda::kernels` gives each kernel a typed wrapper; the stages call those.
//!
//! May import: `cpu` (the ORB pattern the kernel sources embed), `error`.

pub mod buffers;
pub mod compile;
pub mod crew;
pub mod device;
pub mod graph;
pub mod launch;
pub mod sources;
pub mod staging;

pub use self::buffers::{DevBuf, HostBuf};
pub(crate) use self::device::cuda_err;
pub use self::device::{device, device_count, set_device, Device, ModuleInfo};
pub use self::launch::{DevPtr, DeviceType, KernelArg, Launch};
