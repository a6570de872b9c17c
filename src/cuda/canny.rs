//! Canny on the GPU (host side of `kernels/canny.cu`): optional bit-exact Gaussian blur,
//! the fused Sobel/magnitude/NMS/threshold kernel, then exact union-find hysteresis, whose
//! last kernel packs the edge map to one bit per pixel. The host unpacks it to 0/255 bytes
//! ([`unpack_edges`]): an eighth of the bytes to bring over PCIe (uf_final writes them into
//! mapped pinned memory where the device can map it), and no byte map to copy out of pinned
//! memory.

use super::driver::buffers::{download, DevBuf, HostBuf};
use super::driver::crew::{self, Helpers};
use super::driver::cuda_err;
use super::driver::{DevPtr, Launch};
use super::Gpu;
use crate::config::CannyConfig;
use crate::cpu::canny::thresholds;
use crate::error::Result;
use crate::image::GrayImage;
use cudarc::driver::{CudaEvent, CudaStream};

/// Rows of canny_classify's and uf_merge's tiles (`CANNY_TH` in kernels/canny.cu).
const CANNY_TILE_H: usize = 16;

/// The blur's buffers: the horizontal pass's sums, the blurred image and the fixed-point
/// kernel of `ksize` taps.
struct Blur {
    tmp: DevBuf<u16>,
    blurred: DevBuf<u8>,
    kernel: DevBuf<u32>,
    ksize: usize,
}

impl Blur {
    /// Queues the Gaussian blur of `src` (`w x h`) at `at`; the blurred image's address.
    fn run(
        &self,
        gpu: &Gpu,
        at: Launch<'_>,
        src: DevPtr<u8>,
        (w, h): (i32, i32),
    ) -> Result<DevPtr<u8>> {
        let (t, b) = (self.tmp.ptr(), self.blurred.ptr());
        let (k, ks) = (self.kernel.ptr(), self.ksize as i32);
        // SAFETY: `blur_h`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe { gpu.k.canny.blur_h(gpu, at, src, w, h, k, ks, t) }?;
        // SAFETY: `blur_v`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe { gpu.k.canny.blur_v(gpu, at, t, w, h, k, ks, b) }?;
        Ok(b)
    }
}

pub struct Canny {
    w: usize,
    h: usize,
    cls: DevBuf<u8>,
    label: DevBuf<i32>,
    /// 32-bit words per row of the packed edge map.
    words_per_row: usize,
    bits: DevBuf<u32>,
    /// When the config blurs.
    blur: Option<Blur>,
    host_bits: HostBuf,
}

impl Canny {
    pub fn new(gpu: &Gpu, w: usize, h: usize, cfg: &CannyConfig) -> Result<Self> {
        let c = &gpu.ctx;
        let n = w * h;
        let blur = if cfg.blur_ksize > 0 {
            let k = crate::cpu::blur::gaussian_kernel_fixed(
                cfg.blur_ksize as usize,
                cfg.blur_sigma.max(0.0),
            );
            Some(Blur {
                tmp: DevBuf::new(c, n)?,
                blurred: DevBuf::new(c, n)?,
                kernel: DevBuf::from_slice(c, &k)?,
                ksize: k.len(),
            })
        } else {
            None
        };
        let words_per_row = w.div_ceil(32);
        // Mapped where the device can: uf_final writes the packed map there, no copy.
        let host_bits = HostBuf::new_device_written(c, words_per_row * h * 4, gpu.can_map_host)?;
        Ok(Canny {
            w,
            h,
            cls: DevBuf::new(c, n)?,
            label: DevBuf::new(c, n)?,
            words_per_row,
            bits: if host_bits.dev_ptr().is_null() {
                DevBuf::new(c, words_per_row * h)?
            } else {
                DevBuf::empty(c)
            },
            blur,
            host_bits,
        })
    }

    /// Queues the whole Canny on `stream`, the packed edge map into the mapped pinned buffer,
    /// else into its device buffer, which [`Canny::download`] then copies (no sync).
    pub fn run(
        &mut self,
        gpu: &Gpu,
        stream: &CudaStream,
        src: DevPtr<u8>,
        cfg: &CannyConfig,
    ) -> Result<()> {
        let (w, h) = (self.w as i32, self.h as i32);
        let grid = (self.w.div_ceil(32) as u32, self.h.div_ceil(8) as u32, 1);
        let block = (32, 8, 1);
        let img = match &self.blur {
            Some(blur) => blur.run(gpu, Launch::new(grid, block).on(stream), src, (w, h))?,
            None => src,
        };
        let (low, high) = thresholds(cfg);
        let l2 = cfg.l2_gradient as i32;
        let (cls, label) = (self.cls.ptr(), self.label.ptr());
        // canny_classify and uf_merge: tiles of 32 x CANNY_TILE_H.
        let tiles = (
            self.w.div_ceil(32) as u32,
            self.h.div_ceil(CANNY_TILE_H) as u32,
            1,
        );
        // uf_final: a word of 32 pixels per thread (kernels/canny.cu).
        let words = (
            self.words_per_row.div_ceil(32) as u32,
            self.h.div_ceil(8) as u32,
            1,
        );
        // SAFETY: `canny_classify`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.canny.canny_classify(
                gpu,
                Launch::new(tiles, block).on(stream),
                img,
                w,
                h,
                l2,
                low,
                high,
                cls,
                label,
            )
        }?;
        // SAFETY: `uf_merge`'s buffers are this context's, sized for this launch when the
        // stage was built.
        // A thread per tile border pixel (kernels/canny.cu).
        let border = ((32 + 2 * (CANNY_TILE_H - 1)) as u32, 1, 1);
        unsafe {
            gpu.k
                .canny
                .uf_merge(gpu, Launch::new(tiles, border).on(stream), label, cls, w, h)
        }?;
        // SAFETY: `uf_resolve`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k
                .canny
                .uf_resolve(gpu, Launch::new(grid, block).on(stream), label, cls, w, h)
        }?;
        let wpr = self.words_per_row as i32;
        let mapped = self.host_bits.dev_ptr();
        let bits = if mapped.is_null() {
            self.bits.ptr()
        } else {
            mapped.cast()
        };
        // SAFETY: `uf_final`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.canny.uf_final(
                gpu,
                Launch::new(words, block).on(stream),
                label,
                cls,
                w,
                h,
                wpr,
                bits,
            )
        }
    }

    /// Queues the download of the packed edge map into pinned memory; nothing where that
    /// memory is mapped (uf_final wrote it there).
    pub fn download(&mut self, stream: &CudaStream) -> Result<()> {
        if !self.host_bits.dev_ptr().is_null() {
            return Ok(());
        }
        let n = self.bits.bytes();
        download(stream, self.bits.ptr(), &mut self.host_bits, 0, n)
    }

    /// [`Canny::edges_into_when`] into `dst` when given (`out` then None), else into `out`'s
    /// image (resized only when the size changes: every byte is overwritten).
    pub fn edges_out_when(
        &self,
        done: &CudaEvent,
        early: bool,
        dst: Option<&mut [u8]>,
        out: &mut Option<GrayImage>,
    ) -> Result<()> {
        if let Some(dst) = dst {
            *out = None;
            return self.edges_into_when(done, early, dst);
        }
        let e = out.get_or_insert_with(GrayImage::default);
        (e.width, e.height) = (self.w, self.h);
        if e.data.len() != self.w * self.h {
            e.data.clear();
            e.data.resize(self.w * self.h, 0);
        }
        self.edges_into_when(done, early, &mut e.data)
    }

    /// Unpacks the edge map into `dst` (w*h bytes, 0/255) once its download is done, which
    /// `done` (an event recorded after it) tells. `early`: each band of rows waits for the
    /// event on the thread that unpacks it, so that the crew's threads wake while the
    /// GPU still runs Canny rather than after it; they are held meanwhile, so only for a
    /// crew that nothing else needs (docs/performance.md, changes 21 and 24). Else this
    /// thread waits, then the crew unpacks.
    pub fn edges_into_when(&self, done: &CudaEvent, early: bool, dst: &mut [u8]) -> Result<()> {
        let wait = || {
            done.synchronize()
                .map_err(|e| cuda_err("waiting for the edge map", e))
        };
        if !early {
            wait()?;
        }
        let bits = PinnedBits(self.host_bits.as_ptr());
        let (row_bytes, total) = (self.words_per_row * 4, self.host_bits.bytes());
        let rows = |first: usize, n: usize| {
            if early {
                wait()?;
            }
            let len = (n * row_bytes).min(total.saturating_sub(first * row_bytes));
            // SAFETY: the download into `host_bits` (or uf_final's writes, where it is mapped)
            // is complete (the event waited for above), nothing writes it until the next
            // frame's Canny, which `&self` excludes; the
            // range lies inside the buffer (`len` is clamped to it).
            Ok(unsafe { std::slice::from_raw_parts(bits.at(first * row_bytes), len) })
        };
        unpack_bands(self.w, self.h, self.words_per_row, dst, rows)
    }
}

/// The pinned edge-map buffer's address, shared by the threads of one unpack.
#[derive(Clone, Copy)]
struct PinnedBits(*const u8);

// SAFETY: only read, after the event that follows its writes, by the threads of one
// `edges_into_when`.
unsafe impl Sync for PinnedBits {}

impl PinnedBits {
    fn at(self, offset: usize) -> *const u8 {
        self.0.wrapping_add(offset)
    }
}

/// Byte `v` of a packed word as 8 pixels (bit i -> byte i: 0 or 255), little-endian.
const UNPACK: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut v = 0;
    while v < 256 {
        let mut b = 0;
        while b < 8 {
            if (v >> b) & 1 == 1 {
                t[v] |= 0xff << (8 * b);
            }
            b += 1;
        }
        v += 1;
    }
    t
};

/// Output bytes per band of rows in [`unpack_edges`]: maps of two bands or more are
/// unpacked by the crew ([`super::driver::crew`]). One core writes the 8 MB of a 4K map in about half a
/// millisecond, more than the GPU's whole detection at that size (docs/performance.md,
/// change 15); the crew is idle then (the frame's copy is over).
pub const UNPACK_BAND_BYTES: usize = 256 << 10;

/// The edge map packed by `uf_final` (`words_per_row` little-endian u32 words per row, bit i
/// of word k = pixel 32k + i) into `dst` (w*h bytes, 0 or 255).
pub fn unpack_edges(bits: &[u8], w: usize, h: usize, words_per_row: usize, dst: &mut [u8]) {
    let row_bytes = words_per_row * 4;
    let rows = |first: usize, n: usize| Ok(&bits[first * row_bytes..(first + n) * row_bytes]);
    let _ = unpack_bands(w, h, words_per_row, dst, rows);
}

/// [`unpack_edges`] in bands of rows, shared with the crew when the map has two bands or more;
/// `rows(first, n)` gives the packed bytes of rows `first..first + n` (it may wait for them
/// first: [`Canny::edges_into_when`]).
fn unpack_bands<'a>(
    w: usize,
    h: usize,
    words_per_row: usize,
    dst: &mut [u8],
    rows: impl Fn(usize, usize) -> Result<&'a [u8]> + Sync,
) -> Result<()> {
    if w == 0 || h == 0 {
        return Ok(());
    }
    let dst = &mut dst[..w * h];
    let band = (UNPACK_BAND_BYTES / w).max(1);
    if band >= h {
        return rows(0, h).map(|bits| unpack_rows(bits, w, h, words_per_row, dst));
    }
    let out = BandsOut(dst.as_mut_ptr());
    crew::for_each(h.div_ceil(band), Helpers::Crew, |k| {
        let (first, n) = (k * band, band.min(h - k * band));
        // SAFETY: band k (rows first..first + n of `dst`, inside it) is written by the one
        // thread that claimed item k, and `dst` stays borrowed until every band is done.
        let out = unsafe { std::slice::from_raw_parts_mut(out.at(first * w), n * w) };
        unpack_rows(rows(first, n)?, w, n, words_per_row, out);
        Ok(())
    })
}

/// The edge image's address, shared by the threads of one [`unpack_bands`].
struct BandsOut(*mut u8);

// SAFETY: each thread writes only the bands it claimed (see `unpack_bands`).
unsafe impl Sync for BandsOut {}

impl BandsOut {
    fn at(&self, offset: usize) -> *mut u8 {
        self.0.wrapping_add(offset)
    }
}

/// [`unpack_edges`] of `h` rows on this thread: 64 pixels per step, most steps a fill of
/// zeros (edge maps are sparse). With streaming stores where the rows allow them
/// ([`unpack_rows_streaming`]).
fn unpack_rows(bits: &[u8], w: usize, h: usize, words_per_row: usize, dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if w % 16 == 0 && (dst.as_ptr() as usize) % 16 == 0 && dst.len() >= w * h {
        let row_bytes = words_per_row * 4;
        if bits.len() >= h * row_bytes && row_bytes * 8 >= w {
            // SAFETY: checked just above: every row of `dst` starts 16-byte aligned (w and
            // the start are multiples of 16) and both slices hold `h` rows.
            unsafe { unpack_rows_streaming(bits, w, h, row_bytes, dst) };
            return;
        }
    }
    unpack_rows_plain(bits, w, h, words_per_row, dst);
}

/// [`unpack_rows`] with streaming stores, 16 pixels per store, and a store fence at the
/// end: the image is not read back by this thread, and writing it around the cache halves
/// its memory traffic (no read for ownership; docs/performance.md, change 25).
///
/// # Safety
/// `w % 16 == 0`, `dst` 16-byte aligned with `w * h` bytes, `bits` with `h * row_bytes`
/// bytes and `row_bytes * 8 >= w`.
#[cfg(target_arch = "x86_64")]
unsafe fn unpack_rows_streaming(bits: &[u8], w: usize, h: usize, row_bytes: usize, dst: &mut [u8]) {
    use std::arch::x86_64::{
        __m128i, _mm_set_epi64x, _mm_setzero_si128, _mm_sfence, _mm_stream_si128,
    };
    let sixteen = |lo: u8, hi: u8| {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_set_epi64x(UNPACK[hi as usize] as i64, UNPACK[lo as usize] as i64) }
    };
    for y in 0..h {
        let src = &bits[y * row_bytes..(y + 1) * row_bytes];
        // SAFETY (the stores): row y of `dst` lies inside it and is 16-byte aligned (the
        // caller's conditions); every store writes 16 bytes at x < w, x % 16 == 0.
        unsafe {
            let row = dst.as_mut_ptr().add(y * w) as *mut __m128i;
            let mut x = 0;
            while x + 64 <= w {
                let b = &src[x / 8..x / 8 + 8];
                let m = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                let out = row.add(x / 16);
                if m == 0 {
                    let z = _mm_setzero_si128();
                    for j in 0..4 {
                        _mm_stream_si128(out.add(j), z);
                    }
                } else {
                    for j in 0..4 {
                        _mm_stream_si128(out.add(j), sixteen(b[2 * j], b[2 * j + 1]));
                    }
                }
                x += 64;
            }
            while x < w {
                _mm_stream_si128(row.add(x / 16), sixteen(src[x / 8], src[x / 8 + 1]));
                x += 16;
            }
        }
    }
    // SAFETY: SSE2; orders the streaming stores before the caller's completion flag.
    unsafe { _mm_sfence() };
}

/// [`unpack_rows`] with plain stores, any width.
fn unpack_rows_plain(bits: &[u8], w: usize, h: usize, words_per_row: usize, dst: &mut [u8]) {
    let row_bytes = words_per_row * 4;
    for (row, src) in dst[..w * h]
        .chunks_exact_mut(w.max(1))
        .zip(bits.chunks_exact(row_bytes.max(1)))
        .take(h)
    {
        let mut px = row.chunks_exact_mut(64);
        for (out, b) in (&mut px).zip(src.chunks_exact(8)) {
            let m = u64::from_le_bytes(b.try_into().expect("8 bytes"));
            if m == 0 {
                out.fill(0);
                continue;
            }
            for (o, byte) in out.chunks_exact_mut(8).zip(m.to_le_bytes()) {
                o.copy_from_slice(&UNPACK[byte as usize].to_le_bytes());
            }
        }
        // The row's last w % 64 pixels: whole bytes, then bits.
        let tail = &src[(w / 64) * 8..];
        let mut eights = px.into_remainder().chunks_exact_mut(8);
        for (o, &byte) in (&mut eights).zip(tail) {
            o.copy_from_slice(&UNPACK[byte as usize].to_le_bytes());
        }
        let last = eights.into_remainder();
        if let Some(&byte) = tail.get((w % 64) / 8).filter(|_| !last.is_empty()) {
            for (i, o) in last.iter_mut().enumerate() {
                *o = if (byte >> i) & 1 == 1 { 255 } else { 0 };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{unpack_edges, CANNY_TILE_H};

    #[test]
    fn tile_height_matches_the_kernels() {
        // CANNY_TH = CANNY_ROWS * TILE_H (8) in kernels/canny.cu: the launches' grids and
        // uf_merge's block are sized from CANNY_TILE_H.
        let src = include_str!("../../kernels/canny.cu");
        let rows: usize = src
            .lines()
            .find_map(|l| l.strip_prefix("#define CANNY_ROWS "))
            .and_then(|v| v.trim().parse().ok())
            .expect("CANNY_ROWS in kernels/canny.cu");
        assert_eq!(rows * 8, CANNY_TILE_H);
    }

    /// The packing of `uf_final` on the host: word y * wpr + x / 32, bit x % 32.
    fn pack(map: &[u8], w: usize, h: usize) -> (Vec<u8>, usize) {
        let wpr = w.div_ceil(32);
        let mut words = vec![0u32; wpr * h];
        for y in 0..h {
            for x in 0..w {
                if map[y * w + x] != 0 {
                    words[y * wpr + x / 32] |= 1 << (x % 32);
                }
            }
        }
        (words.iter().flat_map(|v| v.to_le_bytes()).collect(), wpr)
    }

    #[test]
    fn unpack_inverts_the_packing() {
        let mut seed = 0x2545f4914f6cdd1du64;
        for (w, h) in [
            (1, 1),
            (31, 3),
            (32, 2),
            (33, 5),
            (64, 4),
            (401, 7),
            (3840, 3),
            // Widths of 16-pixel groups (streaming stores), with a 48-pixel tail.
            (48, 5),
            (1264, 9),
            // More than one band: unpacked with the crew, the last band shorter.
            (1921, 301),
            (1920, 301),
        ] {
            for density in [0u64, 3, 50, 100] {
                let map: Vec<u8> = (0..w * h)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        if seed % 100 < density {
                            255
                        } else {
                            0
                        }
                    })
                    .collect();
                let (bits, wpr) = pack(&map, w, h);
                let mut out = vec![0x5au8; w * h];
                unpack_edges(&bits, w, h, wpr, &mut out);
                assert_eq!(out, map, "{w}x{h}, density {density}%");
            }
        }
    }
}
