//! Encoding decode + gray conversion on the GPU (host side of `kernels/decode.cu`): the raw
//! message bytes go to the device through a pinned staging buffer; the conversion runs there.
//!
//! The copy into the staging buffer was the largest single cost of a 1080p frame (190 us on
//! one thread for 2 MB of mono8 on the H100 machine, 4x the 50 us pinned upload that
//! follows): one core cannot fill write-combined memory at PCIe speed. Frames of more than
//! [`COPY_CHUNK`] bytes are cut into pieces that double in size ([`piece_bounds`]; a frame of
//! one piece stays on the calling thread), and each piece's upload is queued as soon as that
//! piece is in ([`stage_and_upload`]): the DMA of the first pieces runs while the others are
//! copied by the crew ([`super::driver::staging`]). Tunables and measurements: docs/performance.md,
//! changes 8, 23 and 26.
//!
//! An 8-bit colour frame (rgb8, bgr8, rgba8, bgra8) from a caller's buffer is converted to
//! gray by the crew during that copy when `cuda.host_gray` is on and the CPU has AVX2
//! ([`stage_gray_and_upload`], `cpu::rgb_gray`, bit for bit `decode_gray`'s formula): the
//! staging then holds the gray image, a third (a quarter) of the frame's bytes, and that is
//! what goes up, straight into the pyramid's level 0.

use cudarc::driver::{result, CudaStream};

use super::driver::buffers::{upload, DevBuf, HostBuf};
pub use super::driver::crew::Helpers;
use super::driver::cuda_err;
pub use super::driver::staging::{
    copy_in_pieces, copy_streaming_into, fill_in_pieces, piece_bounds, COPY_CHUNK,
};
use super::driver::{DevPtr, Launch};
use super::Gpu;
use crate::cpu::decode::color_layout;
use crate::cpu::rgb_gray::{self, rgb_to_gray};
use crate::error::Result;
use crate::image::{Encoding, FrameLayout};

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

/// `dst.copy_from_slice(src)` into pinned memory, by the crew for frames of several pieces.
pub fn copy_to_staging(dst: &mut [u8], src: &[u8]) -> Result<()> {
    copy_in_pieces(src, dst, Helpers::Crew, |_, _| Ok(()))
}

/// Copies `src` into the pinned `host` buffer and queues its upload to `dst` on `stream`
/// (no sync), in pieces copied by the crew (and this thread), each piece's upload
/// queued by this thread as soon as it is copied, so that the upload overlaps the copy. No
/// allocation.
pub fn stage_and_upload(
    stream: &CudaStream,
    host: &mut HostBuf,
    dst: DevPtr<u8>,
    src: &[u8],
) -> Result<()> {
    stage_and_upload_by(stream, host, dst, src, Helpers::Crew)
}

/// [`stage_and_upload`] with the copy helped by `helpers` (the bench compares them).
pub fn stage_and_upload_by(
    stream: &CudaStream,
    host: &mut HostBuf,
    dst: DevPtr<u8>,
    src: &[u8],
    helpers: Helpers,
) -> Result<()> {
    let n = src.len();
    copy_in_pieces(src, &mut host.as_mut_slice()[..n], helpers, |off, bytes| {
        // SAFETY: `bytes` is pinned staging that nobody writes again before the stream's
        // sync (the next frame's copy comes after it); `dst` holds the frame (the caller's).
        unsafe { result::memcpy_htod_async(dst.offset(off).addr(), bytes, stream.cu_stream()) }
            .map_err(|e| cuda_err("host-to-device copy", e))
    })
}

/// Converts the 8-bit colour frame `src` of layout `l` to gray (`l.width * l.height` bytes,
/// packed) into the pinned `host` buffer, in the pieces of [`fill_in_pieces`] made by the
/// crew and this thread, and queues each piece's upload to `gray` on `stream` as soon as it
/// is in (no sync). No allocation.
pub fn stage_gray_and_upload(
    stream: &CudaStream,
    host: &mut HostBuf,
    gray: DevPtr<u8>,
    src: &[u8],
    l: FrameLayout,
) -> Result<()> {
    let n = l.width * l.height;
    if host.as_slice().len() < n {
        return Err(crate::Error::Config(
            "stage_gray_and_upload: staging too short".into(),
        ));
    }
    gray_in_pieces(
        src,
        l,
        &mut host.as_mut_slice()[..n],
        Helpers::Crew,
        |off, bytes| {
            // SAFETY: as in `stage_and_upload_by`; `gray` holds `n` bytes (the caller's).
            unsafe { result::memcpy_htod_async(gray.offset(off).addr(), bytes, stream.cu_stream()) }
                .map_err(|e| cuda_err("host-to-device copy", e))
        },
    )
}

/// The gray image of the 8-bit colour frame `src` of layout `l` into `dst` (`l.width *
/// l.height` bytes, packed), written with streaming stores in the pieces of
/// [`fill_in_pieces`] by this thread and `helpers`, `on_piece(offset, bytes)` called on this
/// thread for each piece as soon as it is in. No allocation.
pub fn gray_in_pieces(
    src: &[u8],
    l: FrameLayout,
    dst: &mut [u8],
    helpers: Helpers,
    on_piece: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    let (bpp, r, b) = color_layout(l.encoding).ok_or_else(|| {
        crate::Error::Config(format!("{:?} is not an 8-bit colour encoding", l.encoding))
    })?;
    let (w, step) = (l.width, l.step);
    if src.len() < l.bytes()? || dst.len() != w * l.height {
        return Err(crate::Error::Config(
            "gray_in_pieces: the buffers do not fit the layout".into(),
        ));
    }
    // Output pixels `off..` of a stripe, a row's part at a time; a row's source runs on to
    // the frame's end, so that the 3-byte layouts' loads past a row stay inside `src`.
    let fill = |off: usize, part: &mut [u8]| {
        let mut done = 0;
        while done < part.len() {
            let (y, x) = ((off + done) / w, (off + done) % w);
            let len = (w - x).min(part.len() - done);
            let row = &src[y * step + x * bpp..];
            rgb_to_gray::<true>(&mut part[done..done + len], row, bpp, r, b);
            done += len;
        }
    };
    fill_in_pieces(dst, helpers, &fill, on_piece)
}

/// Where [`Decoder::run`] takes the frame's bytes from.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A caller's (pageable) buffer: copied into the pinned staging, then uploaded.
    Copy(&'a [u8]),
    /// Already in the pinned staging ([`Decoder::staging`]): uploaded as it is.
    Staged,
}

/// Upload staging and raw device bytes for frames of one layout; or, mapped
/// (`cuda.zero_copy`), one pinned buffer that the first kernel reads in place.
pub struct Decoder {
    layout: FrameLayout,
    raw_bytes: usize,
    host: HostBuf,
    /// The uploaded raw bytes (empty when mapped).
    dev: DevBuf,
    /// Whether the staging holds a frame of `layout` (false after a frame converted to gray
    /// on the host: it holds that gray image then).
    staged_raw: bool,
}

impl Decoder {
    pub fn new(gpu: &Gpu, layout: FrameLayout, mapped: bool) -> Result<Self> {
        let raw_bytes = layout.bytes()?;
        let (host, dev) = if mapped {
            (
                HostBuf::new_mapped(&gpu.ctx, raw_bytes)?,
                DevBuf::empty(&gpu.ctx),
            )
        } else {
            (
                HostBuf::new(&gpu.ctx, raw_bytes, true)?,
                DevBuf::new(&gpu.ctx, raw_bytes)?,
            )
        };
        Ok(Decoder {
            layout,
            raw_bytes,
            host,
            dev,
            staged_raw: true,
        })
    }

    pub fn layout(&self) -> FrameLayout {
        self.layout
    }

    /// Whether the kernels read the staging in place (`cuda.zero_copy`).
    pub fn mapped(&self) -> bool {
        !self.host.dev_ptr().is_null()
    }

    /// The pinned staging bytes of one frame: write a frame here and run with
    /// [`Source::Staged`] to skip the copy.
    pub fn staging(&mut self) -> &mut [u8] {
        self.staged_raw = true;
        &mut self.host.as_mut_slice()[..self.raw_bytes]
    }

    /// The staged frame's bytes (e.g. for the CPU to redo a frame the GPU failed on); none
    /// when the last frame was converted to gray on the host (`host_gray` of [`Decoder::run`]).
    pub fn staged(&self) -> Option<&[u8]> {
        self.staged_raw
            .then(|| &self.host.as_slice()[..self.raw_bytes])
    }

    /// Brings the frame to the GPU (copy into pinned memory and upload, or the upload
    /// alone; mapped: the copy alone) and converts it into `gray` (w*h). A packed mono8
    /// frame is uploaded (or, mapped, copied by a kernel) straight into `gray`. `host_gray`
    /// (`cuda.host_gray`): an 8-bit colour frame from a caller's buffer, not mapped, on a
    /// CPU with AVX2, is converted during the copy and its gray image uploaded into `gray`.
    pub fn run(
        &mut self,
        gpu: &Gpu,
        source: Source,
        gray: DevPtr<u8>,
        host_gray: bool,
    ) -> Result<()> {
        let n = self.raw_bytes;
        let l = self.layout;
        let packed_mono8 = l.encoding == Encoding::Mono8 && l.step == l.width;
        match source {
            Source::Staged if !self.staged_raw => {
                return Err(crate::Error::Config(
                    "no frame in the input buffer: write one through input_buffer".into(),
                ))
            }
            Source::Staged => {}
            Source::Copy(src) => {
                let convert_here = host_gray
                    && !self.mapped()
                    && color_layout(l.encoding).is_some()
                    && rgb_gray::vectorized();
                self.staged_raw = !convert_here;
                if convert_here {
                    return stage_gray_and_upload(&gpu.stream, &mut self.host, gray, src, l);
                }
            }
        }
        if self.mapped() {
            if let Source::Copy(src) = source {
                copy_to_staging(&mut self.host.as_mut_slice()[..n], &src[..n])?;
            }
            let raw = self.host.dev_ptr();
            if packed_mono8 && raw.aligned(16) && gray.aligned(16) {
                let n64 = n as u64;
                let blocks = n.div_ceil(16 * 256).max(1) as u32;
                // SAFETY: `copy_frame16`'s buffers are this context's, sized for this launch when the
                // stage was built.
                return unsafe {
                    gpu.k.decode.copy_frame16(
                        gpu,
                        Launch::new((blocks, 1, 1), (256, 1, 1)),
                        raw,
                        gray,
                        n64,
                    )
                };
            }
            return self.convert(gpu, raw, gray);
        }
        let stream = &gpu.stream;
        let dst = if packed_mono8 { gray } else { self.dev.ptr() };
        match source {
            Source::Copy(src) => stage_and_upload(stream, &mut self.host, dst, &src[..n])?,
            Source::Staged => upload(stream, &self.host, dst, n)?,
        }
        if packed_mono8 {
            return Ok(());
        }
        self.convert(gpu, self.dev.ptr(), gray)
    }

    /// The encoding's conversion from the raw bytes at `raw` (device address) into `gray`.
    fn convert(&self, gpu: &Gpu, raw: DevPtr<u8>, gray: DevPtr<u8>) -> Result<()> {
        let l = self.layout;
        let step = l.step as i32;
        let (wi, hi) = (l.width as i32, l.height as i32);
        let enc = encoding_code(l.encoding);
        let be = l.big_endian as i32;
        let out = gray;
        use crate::cpu::decode::{GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT};
        let wt: [u32; 4] = [GRAY_R, GRAY_G, GRAY_B, GRAY_SHIFT];
        // SAFETY: `decode_gray`'s buffers are this context's, sized for this launch when the
        // stage was built.
        let grid = (l.width.div_ceil(32) as u32, l.height.div_ceil(8) as u32, 1);
        unsafe {
            gpu.k.decode.decode_gray(
                gpu,
                Launch::new(grid, (32, 8, 1)),
                raw,
                step,
                wi,
                hi,
                enc,
                be,
                wt,
                out,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crew's conversion in pieces equals the CPU decode, for frames of one piece and of
    /// several, padded rows and odd widths, every colour layout; a layout that does not fit
    /// the buffers is an error.
    #[test]
    fn gray_in_pieces_equals_the_cpu_decode() {
        use crate::image::{GrayImage, ImageView};
        for (w, h, pad) in [(7, 3, 0), (640, 480, 5), (1001, 700, 3)] {
            for enc in [
                Encoding::Rgb8,
                Encoding::Bgr8,
                Encoding::Rgba8,
                Encoding::Bgra8,
            ] {
                let bpp = enc.bytes_per_pixel();
                let step = w * bpp + pad;
                let src: Vec<u8> = (0..step * h).map(|i| (i * 131 % 251) as u8).collect();
                let l = FrameLayout {
                    width: w,
                    height: h,
                    step,
                    encoding: enc,
                    big_endian: false,
                };
                let mut got = vec![0u8; w * h];
                let mut pieces = 0;
                gray_in_pieces(&src, l, &mut got, Helpers::Crew, |_, _| {
                    pieces += 1;
                    Ok(())
                })
                .unwrap();
                let view = ImageView::with_encoding(&src, w, h, step, enc, false).unwrap();
                let mut want = GrayImage::default();
                crate::cpu::decode::decode(&view, &mut want);
                assert!(got == want.data, "{w}x{h} {enc:?}");
                assert_eq!(pieces, piece_bounds(w * h).1, "{w}x{h}");
            }
        }
        let l = FrameLayout::mono8(4, 4);
        assert!(gray_in_pieces(&[0; 16], l, &mut [0; 16], Helpers::Crew, |_, _| Ok(())).is_err());
    }

    #[test]
    fn staging_copy_is_exact_at_every_size_around_the_thresholds() {
        for n in [0, 1, COPY_CHUNK - 1, COPY_CHUNK, 3 * COPY_CHUNK + 17] {
            let src: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let mut dst = vec![0u8; n];
            copy_to_staging(&mut dst, &src).unwrap();
            assert!(dst == src, "{n} bytes");
        }
    }
}
