//! The pyramid's AVX2 horizontal pass (hand-written: gathers, or byte shuffles where a
//! group of 8 outputs reads one 16-byte window).

use super::HTaps;
use crate::cpu::simd::prefetch;
use std::arch::x86_64::*;

/// [`super::hrows`] with [`hpass_gather`]: row `y0` into `a`, and `y1` into `b` when given;
/// `ahead`, a later row, is prefetched along the first pass.
///
/// # Safety
/// AVX2 is present; every row `rowx` gives has 2 readable bytes past the source width.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn hrows_gather<'r, const SHIFT: u32>(
    rowx: &impl Fn(usize) -> &'r [u8],
    ahead: &[u8],
    h: &HTaps,
    y0: usize,
    y1: usize,
    a: &mut [u16],
    b: Option<&mut [u16]>,
) {
    // SAFETY: the caller's conditions are hpass_gather's.
    unsafe {
        hpass_gather::<SHIFT>(rowx(y0), ahead, h, a);
        if let Some(b) = b {
            hpass_gather::<SHIFT>(rowx(y1), &[], h, b);
        }
    }
}

/// [`super::hpass`] with AVX2 gathers: 8 pairs per step, each read as one 32-bit word
/// at `row + ofs` (so `row` must extend 2 bytes past the last pair), its two low bytes
/// spread to 16-bit lanes and `pmaddwd`-ed with the packed weights `(w0, w1)`. Exact:
/// the products and sums are the same integers (weights fit `i16`, sums `u16`). `ahead`
/// (a later row, or empty) is prefetched in step with `row`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn hpass_gather<const SHIFT: u32>(
    row: &[u8],
    ahead: &[u8],
    h: &HTaps,
    out: &mut [u16],
) {
    let n = out.len();
    let wp = &h.wpack[..n];
    let ofs = &h.ofs[..n];
    debug_assert!(ofs.iter().all(|&i| i as usize + 4 <= row.len()));
    let spread = _mm256_setr_epi8(
        0, -128, 1, -128, 4, -128, 5, -128, 8, -128, 9, -128, 12, -128, 13, -128, 0, -128, 1, -128,
        4, -128, 5, -128, 8, -128, 9, -128, 12, -128, 13, -128,
    );
    let base = row.as_ptr() as *const i32;
    let shift = _mm_cvtsi32_si128(SHIFT as i32);
    let mut x = 0;
    while x + 16 <= n {
        let (g, win) = (x / 8, &h.win[x / 8..x / 8 + 2]);
        if x % 32 == 0 {
            // About one cache line of the source per 32 outputs (any scale from 1 to 2).
            prefetch(ahead, ofs[x] as usize);
        }
        let (p0, p1) = if win[0] != u32::MAX && win[1] != u32::MAX {
            // Each group's 16-byte window in both lanes, its pairs picked by pshufb, instead
            // of a gather (on this AMD EPYC a vpgatherdd costs more than a load and a shuffle).
            let sp = h.spread[g..g + 2].as_ptr() as *const __m256i;
            let v0 = _mm_loadu_si128(row.as_ptr().add(win[0] as usize) as *const __m128i);
            let v1 = _mm_loadu_si128(row.as_ptr().add(win[1] as usize) as *const __m128i);
            let (v0, v1) = (
                _mm256_broadcastsi128_si256(v0),
                _mm256_broadcastsi128_si256(v1),
            );
            (
                _mm256_shuffle_epi8(v0, _mm256_loadu_si256(sp)),
                _mm256_shuffle_epi8(v1, _mm256_loadu_si256(sp.add(1))),
            )
        } else {
            let i0 = _mm256_loadu_si256(ofs.as_ptr().add(x) as *const __m256i);
            let i1 = _mm256_loadu_si256(ofs.as_ptr().add(x + 8) as *const __m256i);
            let g0 = _mm256_i32gather_epi32::<1>(base, i0);
            let g1 = _mm256_i32gather_epi32::<1>(base, i1);
            (
                _mm256_shuffle_epi8(g0, spread),
                _mm256_shuffle_epi8(g1, spread),
            )
        };
        let w0 = _mm256_loadu_si256(wp.as_ptr().add(x) as *const __m256i);
        let w1 = _mm256_loadu_si256(wp.as_ptr().add(x + 8) as *const __m256i);
        let s0 = _mm256_madd_epi16(p0, w0);
        let s1 = _mm256_madd_epi16(p1, w1);
        let s0 = _mm256_srl_epi32(s0, shift);
        let s1 = _mm256_srl_epi32(s1, shift);
        let p = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(s0, s1));
        _mm256_storeu_si256(out.as_mut_ptr().add(x) as *mut __m256i, p);
        x += 16;
    }
    super::hpass_from::<SHIFT>(row, h, out, x);
}
