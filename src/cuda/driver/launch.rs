//! Kernel launches, the raw layer under the typed wrappers of `cuda::kernels`: the shape of a
//! launch ([`Launch`]), the typed device address kernels take ([`DevPtr`]), the values a
//! kernel may take by value ([`KernelArg`], with the C spelling the signature test compares
//! with kernels/*.cu), and [`Device::launch`], the one `unsafe fn` every launch goes through
//! (fault injection, the priority and programmatic-launch attributes).

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use cudarc::driver::{result, sys, CudaFunction, CudaStream};

use super::device::{cuda_err, Device, INJECT_FAULT_ENV};
use crate::error::{Error, Result};

/// The address of `T`s in device memory (of a [`super::DevBuf<T>`], at an element offset),
/// or null where a kernel takes an optional buffer. The type says what the kernel's pointer
/// parameter points to; the address alone does not keep the memory alive (the launch's
/// safety contract does).
#[repr(transparent)]
pub struct DevPtr<T> {
    addr: sys::CUdeviceptr,
    _t: PhantomData<*const T>,
}

impl<T> Clone for DevPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevPtr<T> {}

// SAFETY: an address, never dereferenced on the host.
unsafe impl<T> Send for DevPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for DevPtr<T> {}

impl<T> PartialEq for DevPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}
impl<T> Eq for DevPtr<T> {}

impl<T> std::fmt::Debug for DevPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DevPtr({:#x})", self.addr)
    }
}

impl<T> DevPtr<T> {
    /// No buffer (kernels that take an optional buffer test for null).
    pub const NULL: DevPtr<T> = DevPtr {
        addr: 0,
        _t: PhantomData,
    };
    pub(in crate::cuda) fn from_addr(addr: sys::CUdeviceptr) -> Self {
        DevPtr {
            addr,
            _t: PhantomData,
        }
    }
    /// The address `n` elements further on.
    pub fn offset(self, n: usize) -> Self {
        Self::from_addr(self.addr + (n * std::mem::size_of::<T>()) as u64)
    }
    pub fn is_null(self) -> bool {
        self.addr == 0
    }
    /// Whether the address is a multiple of `bytes` (vector loads).
    pub fn aligned(self, bytes: u64) -> bool {
        self.addr % bytes == 0
    }
    /// The same address as `U`s (a byte buffer read as words, a record as its fields).
    pub fn cast<U>(self) -> DevPtr<U> {
        DevPtr::from_addr(self.addr)
    }
    /// The address for the driver's copies (`buffers::upload` and the like).
    pub(in crate::cuda) fn addr(self) -> sys::CUdeviceptr {
        self.addr
    }
}

/// A type a kernel parameter may have, with its spelling in kernels/*.cu.
///
/// # Safety
/// The type's size, alignment and bytes are those of the C type [`KernelArg::c_type`] names
/// (as nvcc lays it out for the device), so that the driver may copy it into the parameter.
pub unsafe trait KernelArg: Copy {
    fn c_type() -> String;
}

/// The element types device buffers hold, with their spelling in kernels/*.cu.
///
/// # Safety
/// As [`KernelArg`]: the layout of the C type named.
pub unsafe trait DeviceType: Copy {
    const C: &'static str;
}

macro_rules! device_types {
    ($($t:ty => $c:literal),* $(,)?) => {$(
        // SAFETY: a Rust primitive or array of the C type's size and alignment.
        unsafe impl DeviceType for $t {
            const C: &'static str = $c;
        }
        // SAFETY: as above.
        unsafe impl KernelArg for $t {
            fn c_type() -> String {
                $c.into()
            }
        }
    )*};
}

device_types! {
    u8 => "u8", u16 => "u16", i16 => "short", u32 => "u32", i32 => "int", f32 => "float",
    f64 => "double",
    u64 => "unsigned long long", [u32; 2] => "uint2", [u32; 4] => "uint4", [i32; 2] => "int2",
    [f32; 2] => "float2", [f32; 4] => "float4",
}

// SAFETY: `DevPtr` is a transparent `CUdeviceptr` (u64), the size of a device pointer.
unsafe impl<T: DeviceType> KernelArg for DevPtr<T> {
    fn c_type() -> String {
        format!("{}*", T::C)
    }
}

/// Implements [`KernelArg`] (and [`DeviceType`], for buffers of them) for `#[repr(C)]`
/// structs that mirror a struct of kernels/*.cu of the same name.
macro_rules! c_struct_arg {
    ($($t:ty => $c:literal),* $(,)?) => {$(
        // SAFETY: `#[repr(C)]`, field for field the struct of that name in kernels/*.cu.
        unsafe impl $crate::cuda::driver::launch::KernelArg for $t {
            fn c_type() -> String {
                $c.into()
            }
        }
        // SAFETY: as above.
        unsafe impl $crate::cuda::driver::launch::DeviceType for $t {
            const C: &'static str = $c;
        }
    )*};
}
pub(in crate::cuda) use c_struct_arg;

/// Where and how large a launch is: the grid, the block, the dynamic shared memory, the
/// stream (the device's main one unless [`Launch::on`]) and a priority of its own.
#[derive(Clone, Copy)]
pub struct Launch<'a> {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared: u32,
    stream: Option<&'a CudaStream>,
    priority: Option<i32>,
}

impl<'a> Launch<'a> {
    pub fn new(grid: (u32, u32, u32), block: (u32, u32, u32)) -> Self {
        Launch {
            grid,
            block,
            shared: 0,
            stream: None,
            priority: None,
        }
    }
    /// With `bytes` of dynamic shared memory per block.
    pub fn shared(self, bytes: u32) -> Self {
        Launch {
            shared: bytes,
            ..self
        }
    }
    /// On `stream` (the device's [`Device::side`], or the one a stage was given).
    pub fn on(self, stream: &'a CudaStream) -> Launch<'a> {
        Launch {
            stream: Some(stream),
            ..self
        }
    }
    /// At `priority` (a stream priority) for this launch alone, or the stream's with `None`;
    /// captured into a graph, its node keeps it (graphs run with their nodes' priorities).
    pub fn priority(self, priority: Option<i32>) -> Self {
        Launch { priority, ..self }
    }
}

impl Device {
    /// Launches `f` (`name` for errors) at `at`; `args` points at the kernel's arguments.
    /// Only the typed wrappers of `cuda::kernels` call it.
    ///
    /// # Safety
    /// The GPU runs `f` on whatever `args` describe, and nothing here can check it:
    /// - `args` holds one pointer per parameter of `f`, in order, each to a live value of
    ///   exactly that parameter's type (what the wrappers' [`KernelArg`] types guarantee);
    /// - every device address among them is memory of this context that stays allocated
    ///   until the launch has run on the stream, large enough for every access `f` makes at
    ///   this grid and block;
    /// - no host code writes memory `f` reads, or reads memory it writes, before the
    ///   stream's work is waited for.
    pub unsafe fn launch(
        &self,
        at: Launch<'_>,
        name: &str,
        f: &CudaFunction,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        let Launch {
            grid,
            block,
            shared,
            stream,
            priority,
        } = at;
        let stream = stream.unwrap_or(&self.stream);
        if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
            return Ok(());
        }
        self.check_fault(name)?;
        // At most two attributes, in an array: no allocation per launch.
        // SAFETY: an all-zero CUlaunchAttribute is a valid value (an ignored id and a union
        // of plain integers); each one used below gets its id and the member that id reads.
        let mut attrs: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
        let mut n = 0;
        if let Some(priority) = priority {
            attrs[n].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PRIORITY;
            attrs[n].value.priority = priority;
            n += 1;
        }
        if self.programmatic.load(Ordering::Relaxed) {
            attrs[n].id =
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attrs[n].value.programmaticStreamSerializationAllowed = 1;
            n += 1;
        }
        let launched = if n == 0 {
            // SAFETY: the caller's contract (one live argument per kernel parameter, buffers
            // of this context large enough for the grid).
            unsafe {
                result::launch_kernel(
                    f.cu_function(),
                    grid,
                    block,
                    shared,
                    stream.cu_stream(),
                    args,
                )
            }
        } else {
            let config = sys::CUlaunchConfig {
                gridDimX: grid.0,
                gridDimY: grid.1,
                gridDimZ: grid.2,
                blockDimX: block.0,
                blockDimY: block.1,
                blockDimZ: block.2,
                sharedMemBytes: shared,
                hStream: stream.cu_stream(),
                attrs: attrs.as_mut_ptr(),
                numAttrs: n as u32,
            };
            // SAFETY: as above; `config` and `attrs` outlive the call.
            unsafe {
                sys::cuLaunchKernelEx(
                    &config,
                    f.cu_function(),
                    args.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
            .result()
        };
        launched.map_err(|e| cuda_err(&format!("launching {name}"), e))
    }

    /// The injected fault ([`Device::inject_fault`]), if this launch (of a kernel or a
    /// graph) is the one it was armed for.
    pub fn check_fault(&self, name: &str) -> Result<()> {
        let armed = self.fault_in.load(Ordering::Relaxed);
        if armed > 0 {
            self.fault_in.store(armed - 1, Ordering::Relaxed);
            if armed == 1 {
                return Err(Error::Cuda(format!(
                    "launching {name}: injected fault ({INJECT_FAULT_ENV} / Gpu::inject_fault)"
                )));
            }
        }
        Ok(())
    }
}
