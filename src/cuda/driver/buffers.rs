//! Raw device buffers and pinned host buffers, allocated once per resolution and reused.
//! Plain `cuMemAlloc` / `cuMemHostAlloc` with RAII; kernels get typed addresses ([`DevPtr`]).

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaStream};

use super::device::cuda_err;
use super::launch::{DevPtr, DeviceType};
use crate::error::Result;

/// Device memory holding `len` values of `T` (`len` may be 0: then nothing is allocated and
/// the address is null). Kernels get its address as a [`DevPtr<T>`], typed as their
/// parameter is.
pub struct DevBuf<T = u8> {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: DeviceType> DevBuf<T> {
    /// Room for `len` values, not initialised.
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        let bytes = len * std::mem::size_of::<T>();
        let ptr = if bytes == 0 {
            0
        } else {
            unsafe { result::malloc_sync(bytes) }
                .map_err(|e| cuda_err(&format!("cuMemAlloc of {bytes} bytes"), e))?
        };
        Ok(DevBuf {
            ctx: ctx.clone(),
            ptr,
            len,
            _t: PhantomData,
        })
    }
    pub fn empty(ctx: &Arc<CudaContext>) -> Self {
        DevBuf {
            ctx: ctx.clone(),
            ptr: 0,
            len: 0,
            _t: PhantomData,
        }
    }
    /// A buffer holding `data` (synchronous upload: only used at set-up, never per frame).
    pub fn from_slice(ctx: &Arc<CudaContext>, data: &[T]) -> Result<Self> {
        let b = Self::new(ctx, data.len())?;
        b.copy_from_sync(data)?;
        Ok(b)
    }
    /// Copies `data` into the buffer's start and waits (set-up and measurements only, never
    /// per frame); an error when it does not fit.
    pub fn copy_from_sync(&self, data: &[T]) -> Result<()> {
        if data.len() > self.len {
            return Err(crate::error::Error::Cuda(format!(
                "{} values into a device buffer of {}",
                data.len(),
                self.len
            )));
        }
        if !data.is_empty() {
            // SAFETY: the buffer holds `self.len >= data.len()` values of `T` (checked above);
            // the copy is synchronous.
            unsafe { result::memcpy_htod_sync(self.ptr, data) }
                .map_err(|e| cuda_err("host-to-device copy", e))?;
        }
        Ok(())
    }
    /// Sets the bytes of values `range` to `byte`, queued on `stream`; an error when the range
    /// is outside the buffer.
    pub fn fill_async(&self, stream: &CudaStream, range: Range<usize>, byte: u8) -> Result<()> {
        let (start, bytes) = self.byte_range(&range)?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: `start..start + bytes` lies inside this allocation (checked), which outlives
        // the queued set: the buffers of a stage are dropped only after a stream sync.
        unsafe { result::memset_d8_async(self.ptr + start, byte, bytes, stream.cu_stream()) }
            .map_err(|e| cuda_err("setting device memory", e))
    }
    /// [`DevBuf::fill_async`], waited for (set-up only).
    pub fn fill_sync(&self, range: Range<usize>, byte: u8) -> Result<()> {
        let (start, bytes) = self.byte_range(&range)?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: inside this allocation (checked); synchronous.
        unsafe { result::memset_d8_sync(self.ptr + start, byte, bytes) }
            .map_err(|e| cuda_err("setting device memory", e))
    }
    /// Copies values `from..from + dst.len()` into `dst` and waits (tests and the pyramid
    /// readback, never per frame); an error when they are outside the buffer.
    pub fn copy_to_sync(&self, from: usize, dst: &mut [T]) -> Result<()> {
        let (start, bytes) = self.byte_range(&(from..from + dst.len()))?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: inside this allocation (checked), into a host slice of as many bytes;
        // synchronous.
        unsafe { result::memcpy_dtoh_sync(dst, self.ptr + start) }
            .map_err(|e| cuda_err("device-to-host copy", e))
    }
    /// (first byte, byte count) of values `range`, checked against the buffer.
    fn byte_range(&self, range: &Range<usize>) -> Result<(u64, usize)> {
        if range.start > range.end || range.end > self.len {
            return Err(crate::error::Error::Cuda(format!(
                "values {range:?} of a device buffer of {}",
                self.len
            )));
        }
        let size = std::mem::size_of::<T>();
        Ok(((range.start * size) as u64, range.len() * size))
    }
    /// Its address, for a kernel's `T*` parameter.
    #[inline]
    pub fn ptr(&self) -> DevPtr<T> {
        DevPtr::from_addr(self.ptr)
    }
    /// Values it holds room for.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline]
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T> Drop for DevBuf<T> {
    fn drop(&mut self) {
        if self.ptr != 0 {
            let _ = self.ctx.bind_to_thread();
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Page-locked host memory for async copies, or mapped for kernels to read
/// ([`HostBuf::new_mapped`]).
pub struct HostBuf {
    ctx: Arc<CudaContext>,
    ptr: *mut u8,
    bytes: usize,
    /// The device's address of the bytes when mapped, else 0.
    dev_ptr: u64,
}

unsafe impl Send for HostBuf {}

impl HostBuf {
    /// `write_combined`: for upload staging the host only writes (faster PCIe reads);
    /// never for buffers the host reads back.
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize, write_combined: bool) -> Result<Self> {
        let flags = if write_combined {
            sys::CU_MEMHOSTALLOC_WRITECOMBINED
        } else {
            0
        };
        Self::alloc(ctx, bytes, flags)
    }

    /// Write-combined pinned memory mapped into the device's address space: kernels read it
    /// at [`HostBuf::dev_ptr`] (over PCIe on a discrete GPU; the same DRAM on an integrated
    /// one). Only for buffers the host writes and the device reads.
    pub fn new_mapped(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self> {
        Self::alloc_mapped(
            ctx,
            bytes,
            sys::CU_MEMHOSTALLOC_WRITECOMBINED | sys::CU_MEMHOSTALLOC_DEVICEMAP,
        )
    }

    /// Pinned memory that kernels write at [`HostBuf::dev_ptr`] and the host reads after a
    /// sync (cached: not write-combined), where the device can map host memory
    /// (`can_map`); else plain pinned memory, filled by copies (`dev_ptr` 0).
    pub fn new_device_written(ctx: &Arc<CudaContext>, bytes: usize, can_map: bool) -> Result<Self> {
        if !can_map {
            return Self::new(ctx, bytes, false);
        }
        Self::alloc_mapped(ctx, bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP)
    }

    /// [`HostBuf::alloc`] with `flags` (which hold DEVICEMAP), then the device's address.
    fn alloc_mapped(ctx: &Arc<CudaContext>, bytes: usize, flags: u32) -> Result<Self> {
        let mut b = Self::alloc(ctx, bytes, flags)?;
        if bytes == 0 {
            return Ok(b);
        }
        let mut dev: sys::CUdeviceptr = 0;
        // SAFETY: `b.ptr` was just allocated with DEVICEMAP in the current context.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, b.ptr as *mut _, 0) }
            .result()
            .map_err(|e| cuda_err("cuMemHostGetDevicePointer", e))?;
        b.dev_ptr = dev;
        Ok(b)
    }

    /// `cuMemHostAlloc` of `bytes` with `flags` (nothing for 0 bytes), not mapped yet.
    fn alloc(ctx: &Arc<CudaContext>, bytes: usize, flags: u32) -> Result<Self> {
        let ptr = if bytes == 0 {
            std::ptr::null_mut()
        } else {
            unsafe { result::malloc_host(bytes, flags) }
                .map_err(|e| cuda_err(&format!("cuMemHostAlloc of {bytes} bytes"), e))?
                as *mut u8
        };
        Ok(HostBuf {
            ctx: ctx.clone(),
            ptr,
            bytes,
            dev_ptr: 0,
        })
    }

    /// The device's address of a mapped buffer (null when not mapped).
    pub fn dev_ptr(&self) -> DevPtr<u8> {
        DevPtr::from_addr(self.dev_ptr)
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    /// The host address (null for 0 bytes), for readers that must not hold a slice while
    /// a download may still write the buffer (`canny::Canny::edges_into_when`).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }
    pub fn as_slice(&self) -> &[u8] {
        if self.bytes == 0 {
            return &[];
        }
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.bytes == 0 {
            return &mut [];
        }
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            let _ = self.ctx.bind_to_thread();
            let _ = unsafe { result::free_host(self.ptr as *mut _) };
        }
    }
}

/// Async host -> device copy of `bytes` from pinned `src` (offset 0) to `dst`.
pub fn upload<T>(stream: &CudaStream, src: &HostBuf, dst: DevPtr<T>, bytes: usize) -> Result<()> {
    upload_range(stream, src, 0, dst, bytes)
}

/// Async host -> device copy of `src[src_off..src_off + bytes]` (pinned) to `dst`.
pub fn upload_range<T>(
    stream: &CudaStream,
    src: &HostBuf,
    src_off: usize,
    dst: DevPtr<T>,
    bytes: usize,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let host = &src.as_slice()[src_off..src_off + bytes];
    unsafe { result::memcpy_htod_async(dst.addr(), host, stream.cu_stream()) }
        .map_err(|e| cuda_err("host-to-device copy", e))
}

/// Async device -> device copy of `height` rows of `width` bytes, from `src` (rows `pitch`
/// bytes apart) to `dst` (likewise), on `stream`; `what` names it in the error.
pub fn copy_rows_on_device(
    stream: &CudaStream,
    (src, src_pitch): (DevPtr<u8>, usize),
    (dst, dst_pitch): (DevPtr<u8>, usize),
    (width, height): (usize, usize),
    what: &str,
) -> Result<()> {
    let dev = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    let c = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: dev,
        srcHost: std::ptr::null(),
        srcDevice: src.addr(),
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: dev,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst.addr(),
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: height,
    };
    // SAFETY: `c` names two device regions of `height` rows of `width` bytes at their
    // pitches, which the callers own for as long as the stream uses them (as `upload`'s
    // `dst`); no host memory is involved.
    unsafe { sys::cuMemcpy2DAsync_v2(&c, stream.cu_stream()) }
        .result()
        .map_err(|e| cuda_err(what, e))
}

/// Async device -> host copy of `bytes` into pinned `dst` at `dst_off`.
pub fn download<T>(
    stream: &CudaStream,
    src: DevPtr<T>,
    dst: &mut HostBuf,
    dst_off: usize,
    bytes: usize,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    unsafe {
        result::memcpy_dtoh_async(
            &mut dst.as_mut_slice()[dst_off..dst_off + bytes],
            src.addr(),
            stream.cu_stream(),
        )
    }
    .map_err(|e| cuda_err("device-to-host copy", e))
}
