//! A gray frame kept on the device past the pipeline's next frame ([`KeptGray`]): the
//! second stereo camera's, waiting for its pair.

use super::{buffers, CudaPipeline, DeviceGray};
use crate::error::Result;

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

impl CudaPipeline {
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
