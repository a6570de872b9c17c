//! Gray frames on the device for the feature tracker: the pipeline's last frame borrowed
//! ([`DeviceGray`], valid while its owner is borrowed), and one kept past the pipeline's
//! next frame ([`KeptGray`]: the second stereo camera's, waiting for its pair).

use super::driver::{buffers, DevPtr};
use super::CudaPipeline;
use crate::error::Result;

/// A gray image on the device: `height` rows of `width` bytes, `pitch` bytes apart,
/// borrowed from its owner (a pipeline's last frame, valid until its next one, or a
/// [`KeptGray`]) for `'a`: the owner cannot run its next frame, or be dropped, while the
/// tracker reads it. Its address stays inside this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceGray<'a> {
    ptr: DevPtr<u8>,
    width: usize,
    height: usize,
    pitch: usize,
    owner: std::marker::PhantomData<&'a ()>,
}

impl DeviceGray<'_> {
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn height(&self) -> usize {
        self.height
    }

    /// The device address (this module's kernels and copies only).
    pub(crate) fn ptr(&self) -> DevPtr<u8> {
        self.ptr
    }

    pub(crate) fn pitch(&self) -> usize {
        self.pitch
    }

    /// A handle to gray bytes at `ptr`, owned by nobody.
    ///
    /// # Safety
    /// Whoever reads through it must find `height` rows of `width` bytes, `pitch` apart, at
    /// `ptr` in this context for as long as it is used (tests hand a CPU tracker one that
    /// is never read).
    #[cfg(test)]
    pub(crate) unsafe fn from_raw(
        addr: u64,
        width: usize,
        height: usize,
        pitch: usize,
    ) -> DeviceGray<'static> {
        DeviceGray {
            ptr: DevPtr::from_addr(addr),
            width,
            height,
            pitch,
            owner: std::marker::PhantomData,
        }
    }
}

/// A gray frame copied out of a pipeline so that it outlives the pipeline's next frame (the
/// second stereo camera's, waiting for its pair: [`CudaPipeline::keep_gray`]). One device
/// buffer, reused while the size holds.
pub struct KeptGray {
    buf: buffers::DevBuf,
    width: usize,
    height: usize,
}

impl KeptGray {
    /// The kept frame, rows packed (`pitch == width`).
    pub fn gray(&self) -> DeviceGray<'_> {
        DeviceGray {
            ptr: self.buf.ptr(),
            width: self.width,
            height: self.height,
            pitch: self.width,
            owner: std::marker::PhantomData,
        }
    }
}

impl super::state::State {
    /// The frame's gray image on the device: the pyramid's level 0, as the decode wrote it.
    pub(super) fn gray(&self) -> Option<DeviceGray<'_>> {
        let l = self.pyr.levels.first()?;
        Some(DeviceGray {
            ptr: self.pyr.level_ptr(0),
            width: l.w,
            height: l.h,
            pitch: l.w,
            owner: std::marker::PhantomData,
        })
    }
}

/// Work on a frame queued as soon as its gray image is on the device, beside the
/// detection: the feature tracker's `begin` (`CudaPipeline::process_edges_then`).
pub type AfterDecode<'h> = &'h mut dyn FnMut(DeviceGray<'_>);

impl CudaPipeline {
    /// The last frame's gray image on the device (the pyramid's level 0, what the decode
    /// wrote), after a frame that ran to its end; valid until the next frame, which
    /// overwrites it. The feature tracker builds its pyramid from it instead of uploading
    /// the frame again (`Tracker::track_input`).
    pub fn gray_on_device(&self) -> Option<DeviceGray<'_>> {
        self.state.as_ref().filter(|_| self.gray_ready)?.gray()
    }

    /// Copies the last frame's gray image ([`CudaPipeline::gray_on_device`]) into `dst` on
    /// the device and waits for the copy; `dst` is (re)allocated only when the size
    /// changes. Ok(false), `dst` untouched, when there is no gray image to keep.
    pub fn keep_gray(&self, dst: &mut Option<KeptGray>) -> Result<bool> {
        let Some(src) = self.gray_on_device() else {
            return Ok(false);
        };
        let (w, h) = (src.width(), src.height());
        let kept = match dst {
            Some(k) if (k.width, k.height) == (w, h) => k,
            _ => {
                *dst = None;
                dst.insert(KeptGray {
                    buf: buffers::DevBuf::new(&self.gpu.ctx, w * h)?,
                    width: w,
                    height: h,
                })
            }
        };
        buffers::copy_rows_on_device(
            &self.gpu.stream,
            (src.ptr(), src.pitch()),
            (kept.buf.ptr(), w),
            (w, h),
            "keeping the gray frame",
        )?;
        self.gpu.sync()?;
        Ok(true)
    }
}
