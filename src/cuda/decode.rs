//! Encoding decode + gray conversion on the GPU (host side of `kernels/decode.cu`): the raw
//! message bytes go to the device through a pinned staging buffer; the conversion runs there.

use super::buffers::{upload, DevBuf, HostBuf};
use super::context::Gpu;
use crate::error::Result;
use crate::image::{Encoding, ImageView};

pub fn encoding_code(e: Encoding) -> i32 {
    match e {
        Encoding::Mono8 => 0,
        Encoding::Mono16 => 1,
        Encoding::Rgb8 => 2,
        Encoding::Bgr8 => 3,
        Encoding::Rgba8 => 4,
        Encoding::Bgra8 => 5,
        Encoding::Uyvy => 6,
        Encoding::Yuyv => 7,
    }
}

/// Upload staging and raw device bytes for frames of one geometry.
pub struct Decoder {
    raw_bytes: usize,
    host: HostBuf,
    dev: DevBuf,
}

impl Decoder {
    pub fn new(gpu: &Gpu, frame: &ImageView) -> Result<Self> {
        let raw_bytes = frame.step() * frame.height();
        Ok(Decoder {
            raw_bytes,
            host: HostBuf::new(&gpu.ctx, raw_bytes, true)?,
            dev: DevBuf::new(&gpu.ctx, raw_bytes)?,
        })
    }

    /// Copies the frame into pinned memory, uploads it and converts it into `gray` (w*h).
    /// A packed mono8 frame is uploaded straight into `gray`.
    pub fn run(&mut self, gpu: &Gpu, frame: &ImageView, gray: u64) -> Result<()> {
        let n = self.raw_bytes;
        self.host.as_mut_slice()[..n].copy_from_slice(&frame.data()[..n]);
        let (w, h) = (frame.width(), frame.height());
        let stream = &gpu.stream;
        if frame.encoding() == Encoding::Mono8 && frame.step() == w {
            return upload(stream, &self.host, gray, n);
        }
        upload(stream, &self.host, self.dev.ptr(), n)?;
        let raw = self.dev.ptr();
        let step = frame.step() as i32;
        let (wi, hi) = (w as i32, h as i32);
        let enc = encoding_code(frame.encoding());
        let be = frame.big_endian() as i32;
        let out = gray;
        use crate::cpu::decode::{GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT};
        let wt: [u32; 4] = [GRAY_R, GRAY_G, GRAY_B, GRAY_SHIFT];
        gpu.launch(
            "decode_gray",
            &gpu.k.decode_gray,
            (w.div_ceil(32) as u32, h.div_ceil(8) as u32, 1),
            (32, 8, 1),
            0,
            &mut kargs![raw, step, wi, hi, enc, be, wt, out],
        )
    }
}
