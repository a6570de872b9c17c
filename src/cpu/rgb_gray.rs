//! 8-bit colour pixels to gray on the host: OpenCV's fixed-point formula (`cv::cvtColor`
//! RGB2GRAY and kin on 8-bit images, [`gray_from_rgb`]) and rows of it vectorized, bit for
//! bit, 32 pixels per step with AVX2 where the CPU has it, the scalar loop elsewhere. Used
//! by the CPU decode and by the CUDA backend's copy into pinned memory (`cuda.host_gray`),
//! which converts a colour frame while copying it so that a third (a quarter) of the bytes
//! go up to the GPU.
//!
//! The weights (at most 19235) and the rounding term (16384) fit a signed 16-bit lane, and
//! every pixel's sum fits 31 bits, so `vpmaddwd` on (red, green) and (blue, 1) pairs gives
//! the formula's sum exactly; the test runs all 2^24 colours through both.

/// Fixed-point luma weights of OpenCV's RGB2GRAY for 8-bit images (sum = 1 << 15; the
/// 14-bit weights of older releases differ on ~0.04% of pixels).
pub const GRAY_R: u32 = 9798;
pub const GRAY_G: u32 = 19235;
pub const GRAY_B: u32 = 3735;
pub const GRAY_SHIFT: u32 = 15;

/// `(r * GRAY_R + g * GRAY_G + b * GRAY_B + 2^14) >> 15`.
#[inline]
pub fn gray_from_rgb(r: u8, g: u8, b: u8) -> u8 {
    ((r as u32 * GRAY_R + g as u32 * GRAY_G + b as u32 * GRAY_B + (1 << (GRAY_SHIFT - 1)))
        >> GRAY_SHIFT) as u8
}

/// Whether [`rgb_to_gray`] runs vectorized on this CPU (x86-64 with AVX2).
pub fn vectorized() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::simd::level() >= super::simd::Level::Avx2
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `dst[i] = gray(src[bpp * i + r], src[bpp * i + 1], src[bpp * i + b])` for every `i` of
/// `dst` (`bpp` 3 or 4; red at byte `r`, blue at byte `b` of a pixel, 0 and 2 either way).
/// `STREAM`: the bytes are written with streaming stores and fenced before the return, so
/// that they are in memory, not dirty in this core's cache (for a DMA that reads them next).
pub fn rgb_to_gray<const STREAM: bool>(dst: &mut [u8], src: &[u8], bpp: usize, r: usize, b: usize) {
    assert!(
        (bpp == 3 || bpp == 4) && r + b == 2 && r != 1,
        "rgb_to_gray: {bpp} bytes a pixel, red at {r}, blue at {b}"
    );
    assert!(
        src.len() >= dst.len() * bpp,
        "rgb_to_gray: source too short"
    );
    // The pixels done vectorized; the scalar loop below does the rest (all of them off x86-64).
    #[cfg(target_arch = "x86_64")]
    let done = if vectorized() {
        // SAFETY: AVX2 is present (checked above); the lengths are checked above.
        unsafe {
            match (bpp, r) {
                (3, 0) => avx2::rows::<3, 0, STREAM>(dst, src),
                (3, _) => avx2::rows::<3, 2, STREAM>(dst, src),
                (_, 0) => avx2::rows::<4, 0, STREAM>(dst, src),
                _ => avx2::rows::<4, 2, STREAM>(dst, src),
            }
        }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for (d, px) in dst[done..]
        .iter_mut()
        .zip(src[done * bpp..].chunks_exact(bpp))
    {
        *d = gray_from_rgb(px[r], px[1], px[b]);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{gray_from_rgb, GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT};

    /// Pixels per step.
    const STEP: usize = 32;

    /// The vectorized part of [`super::rgb_to_gray`]: converts a prefix of `dst` and returns
    /// its length (the rest is left to the caller's scalar loop). With `STREAM`, the prefix
    /// up to `dst`'s first 32-byte boundary is scalar too, and a fence ends the call.
    ///
    /// # Safety
    /// AVX2 is present; `src.len() >= dst.len() * BPP`.
    #[target_feature(enable = "avx2")]
    pub unsafe fn rows<const BPP: usize, const R: usize, const STREAM: bool>(
        dst: &mut [u8],
        src: &[u8],
    ) -> usize {
        let n = dst.len();
        let b = 2 - R;
        let mut i = 0;
        if STREAM {
            i = dst.as_ptr().align_offset(32).min(n);
            for k in 0..i {
                let p = &src[k * BPP..];
                dst[k] = gray_from_rgb(p[R], p[1], p[b]);
            }
        }
        // Per 128-bit lane, four pixels at bytes 0, BPP, 2 BPP, 3 BPP: one mask puts (red,
        // green) as two u16 in each 32-bit slot, the other (blue, 0), to which the OR adds
        // the high u16 1 that picks the rounding term from the weights.
        let mut rg = [-1i8; 32];
        let mut b1 = [-1i8; 32];
        for lane in 0..2 {
            for p in 0..4 {
                let (o, base) = (16 * lane + 4 * p, BPP * p);
                rg[o] = (base + R) as i8;
                rg[o + 2] = (base + 1) as i8;
                b1[o] = (base + b) as i8;
            }
        }
        // SAFETY (all below): AVX2 is enabled for this function; loads read at most
        // `src[(i + 32) * BPP + 4]` (BPP 3: the upper lane's 16 bytes start 12 after its
        // group, 4 past the group's end), which the loop condition keeps inside `src`;
        // stores write `dst[i..i + 32]`, inside `dst`, 32-byte aligned when streaming.
        unsafe {
            let rg = _mm256_loadu_si256(rg.as_ptr() as *const __m256i);
            let b1 = _mm256_loadu_si256(b1.as_ptr() as *const __m256i);
            let one = _mm256_set1_epi32(1 << 16);
            let w_rg = _mm256_set1_epi32(((GRAY_G << 16) | GRAY_R) as i32);
            let rounding = 1 << (GRAY_SHIFT - 1);
            let w_b1 = _mm256_set1_epi32(((rounding << 16) | GRAY_B) as i32);
            // packs/packus work per 128-bit lane: the 32 bytes come out as pixels 0-3, 8-11,
            // 16-19, 24-27, 4-7, ...; this puts the 4-byte groups back in order.
            let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            let over = if BPP == 3 { 4 } else { 0 };
            while i + STEP <= n && (i + STEP) * BPP + over <= src.len() {
                let mut sums = [_mm256_setzero_si256(); 4];
                for (k, sum) in sums.iter_mut().enumerate() {
                    let p = src.as_ptr().add((i + 8 * k) * BPP);
                    let v = if BPP == 3 {
                        _mm256_loadu2_m128i(p.add(12) as *const __m128i, p as *const __m128i)
                    } else {
                        _mm256_loadu_si256(p as *const __m256i)
                    };
                    let pair_rg = _mm256_shuffle_epi8(v, rg);
                    let pair_b1 = _mm256_or_si256(_mm256_shuffle_epi8(v, b1), one);
                    let s = _mm256_add_epi32(
                        _mm256_madd_epi16(pair_rg, w_rg),
                        _mm256_madd_epi16(pair_b1, w_b1),
                    );
                    *sum = _mm256_srli_epi32::<{ GRAY_SHIFT as i32 }>(s);
                }
                let lo = _mm256_packs_epi32(sums[0], sums[1]);
                let hi = _mm256_packs_epi32(sums[2], sums[3]);
                let bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(lo, hi), order);
                let d = dst.as_mut_ptr().add(i) as *mut __m256i;
                if STREAM {
                    _mm256_stream_si256(d, bytes);
                } else {
                    _mm256_storeu_si256(d, bytes);
                }
                i += STEP;
            }
            if STREAM {
                _mm_sfence();
            }
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every 24-bit colour, in every layout and at every alignment of the output: equal to
    /// the scalar formula (the vectorized path where this CPU has AVX2).
    #[test]
    fn all_colours_equal_the_formula() {
        let n = 1usize << 24;
        for (bpp, r) in [(3, 0), (3, 2), (4, 0), (4, 2)] {
            let b = 2 - r;
            let mut src = vec![0u8; n * bpp + 64];
            for c in 0..n {
                let px = &mut src[c * bpp..c * bpp + bpp];
                px[r] = (c >> 16) as u8;
                px[1] = (c >> 8) as u8;
                px[b] = c as u8;
                if bpp == 4 {
                    px[3] = (c * 7) as u8;
                }
            }
            let mut out = vec![0u8; n + 64];
            for shift in [0, 5] {
                let dst = &mut out[shift..shift + n];
                rgb_to_gray::<false>(dst, &src[..n * bpp], bpp, r, b);
                let bad = (0..n).find(|&c| {
                    let want = gray_from_rgb((c >> 16) as u8, (c >> 8) as u8, c as u8);
                    dst[c] != want
                });
                assert_eq!(bad, None, "bpp {bpp}, red at {r}, output shifted {shift}");
                rgb_to_gray::<true>(dst, &src[..n * bpp], bpp, r, b);
                let again = (0..n).find(|&c| {
                    let want = gray_from_rgb((c >> 16) as u8, (c >> 8) as u8, c as u8);
                    dst[c] != want
                });
                assert_eq!(
                    again, None,
                    "streaming: bpp {bpp}, red at {r}, shift {shift}"
                );
            }
        }
    }

    /// Short rows and rows whose source ends right after the last pixel (the 3-byte
    /// layout's loads reach 4 bytes past a group: the tail goes scalar) at every length.
    #[test]
    fn every_length_and_a_tight_source() {
        for bpp in [3, 4] {
            for n in 0..200 {
                let src: Vec<u8> = (0..n * bpp).map(|i| (i * 37 % 253) as u8).collect();
                let mut dst = vec![0u8; n];
                rgb_to_gray::<true>(&mut dst, &src, bpp, 2, 0);
                for (i, d) in dst.iter().enumerate() {
                    let p = &src[i * bpp..];
                    assert_eq!(
                        *d,
                        gray_from_rgb(p[2], p[1], p[0]),
                        "bpp {bpp}, {n} px, at {i}"
                    );
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "source too short")]
    fn a_short_source_is_refused() {
        rgb_to_gray::<false>(&mut [0u8; 10], &[0u8; 29], 3, 0, 2);
    }
}
