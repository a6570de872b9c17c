//! `f32` fused multiply-add, exact at every SIMD level and fast at each.
//!
//! OpenCV's float filters (the descriptor blur, cornerHarris's Sobel) fuse their
//! multiply-adds, so ours do too: `f32::mul_add`, one rounding. With FMA in the target
//! (x86-64-v3, `simd::Level::Avx2`; every aarch64) that is one vector
//! instruction. Without it (`GF_SIMD=sse4.1` or `baseline`, x86 CPUs before Haswell, the
//! Atom-class cores) it is a call into libm per element: the descriptor stage took 140 ms
//! against 5.0 with FMA (1080p, one thread, this repo's 2-core AMD machine); through
//! [`Emulated`] it takes 45 (docs/performance.md).
//!
//! [`Emulated`] computes the same bits in vectorizable `f64` arithmetic. `a * b` of two
//! `f32` is exact in `f64` (48 significant bits of 53). The sum with `c` is rounded to
//! `f64` *to odd*: rounded to nearest, then, where that was inexact (Knuth's TwoSum gives
//! the error exactly) and the last mantissa bit came out even, moved one ulp towards the
//! exact value, so an inexact result always has an odd last bit. Rounding that to `f32`
//! (to nearest, ties to even) gives the exactly rounded `a * b + c`: a value rounded to odd
//! with at least two more bits than the target never lands on a halfway point unless the
//! exact value is one (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
//! proved algorithms using rounding to odd", IEEE TC 2008). Plain round-to-nearest in
//! `f64` would not do: it lands on halfway from just above or below it, and the second
//! rounding then goes to even, one ulp off in about one case in 2^29. `tests` has such a case.
//!
//! `simd::versions!`'s `fma` form gives a stage [`Fused`] at the levels
//! with the instruction and [`Emulated`] below them.

/// A way to compute `a * b + c` rounded once to `f32`.
pub trait Fma: Copy {
    /// `a * b + c`, rounded once (to nearest, ties to even).
    fn fma(self, a: f32, b: f32, c: f32) -> f32;

    /// [`fma`](Fma::fma) where the caller has shown that `a * b + c` is exact in `f64` (all
    /// its terms on one grid of 2^-k spanning at most 53 bits; the caller's docs say why):
    /// then the `f64` sum is already the exact value, and one rounding to `f32` is all.
    fn fma_exact_in_f64(self, a: f32, b: f32, c: f32) -> f32;
}

/// `f32::mul_add`: the FMA instruction where the target has it, else libm's `fmaf`.
#[derive(Clone, Copy, Debug)]
pub struct Fused;

impl Fma for Fused {
    #[inline(always)]
    fn fma(self, a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }

    #[inline(always)]
    fn fma_exact_in_f64(self, a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

/// Through `f64` rounded to odd (the module's note).
#[derive(Clone, Copy, Debug)]
pub struct Emulated;

impl Fma for Emulated {
    #[inline(always)]
    fn fma_exact_in_f64(self, a: f32, b: f32, c: f32) -> f32 {
        (a as f64 * b as f64 + c as f64) as f32
    }

    #[inline(always)]
    fn fma(self, a: f32, b: f32, c: f32) -> f32 {
        let (p, c) = (a as f64 * b as f64, c as f64);
        let s = p + c;
        // TwoSum: err = (p + c) - s exactly.
        let pv = s - c;
        let cv = s - pv;
        let err = (p - pv) + (c - cv);
        let bits = s.to_bits();
        // Inexact: the odd one of s and its neighbour towards the exact value (one below s
        // in magnitude where err's sign is not s's). s is nonzero and finite there; an
        // infinite input makes err NaN, which fails the test, and s is left as it is.
        let towards = bits - ((err.to_bits() ^ bits) >> 63);
        let odd = if err.abs() > 0.0 { towards | 1 } else { bits };
        f64::from_bits(odd) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn same(a: f32, b: f32, c: f32) {
        let want = a.mul_add(b, c);
        let got = Emulated.fma(a, b, c);
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "fma({a:e}, {b:e}, {c:e}) = {want:e}, emulated {got:e}"
        );
    }

    #[test]
    fn double_rounding_cases() {
        // a * b = -2^-24 + 2^-70 and c = 1 + 2^-23: the exact sum 1 + 2^-24 + 2^-70 is just
        // above halfway between 1 and 1 + 2^-23, so it rounds up; rounded to nearest in f64
        // it is 1 + 2^-24, exactly halfway, and then goes to even: 1.
        let (a, b, c) = (
            -(2f32.powi(-24)) * (1.0 + f32::EPSILON),
            1.0 - f32::EPSILON,
            1.0 + f32::EPSILON,
        );
        assert_eq!(a.mul_add(b, c), 1.0 + f32::EPSILON);
        assert_eq!(
            (a as f64 * b as f64 + c as f64) as f32,
            1.0,
            "double rounding"
        );
        same(a, b, c);
        // The same from below (the sum just under halfway), and its mirror image.
        same(-a, b, 1.0);
        same(a, -b, -c);
        // Exactly halfway (1 + 2^-24 and 1 + 3 * 2^-24): ties go to even.
        same(2f32.powi(-24), 1.0, 1.0);
        same(2f32.powi(-24), 3.0, 1.0);
        // Below f32's normal range.
        same(1e-20, 1e-20, 0.0);
        same(1e-20, 1e-19, -1e-39);
        same(f32::MIN_POSITIVE, 0.5, 0.0);
        same(f32::MIN_POSITIVE, -0.5, f32::from_bits(1));
        // Signed zeros, overflow, infinities, NaN.
        same(0.0, -3.0, 0.0);
        same(-0.0, 3.0, -0.0);
        same(2.0, -1.5, 3.0);
        same(f32::MAX, 2.0, -f32::MAX);
        same(f32::MAX, 1.5, 0.0);
        same(f32::MAX, 1.0, f32::MAX / 2f32.powi(24));
        same(f32::INFINITY, 0.0, 1.0);
        same(f32::INFINITY, 1.0, 1.0);
        same(2.0, f32::NEG_INFINITY, 1.0);
        same(2.0, 3.0, f32::INFINITY);
        same(f32::INFINITY, 1.0, f32::NEG_INFINITY);
        same(f32::NAN, 1.0, 1.0);
    }

    proptest! {
        #[test]
        fn equals_fused_on_any_bits(a in any::<u32>(), b in any::<u32>(), c in any::<u32>()) {
            same(f32::from_bits(a), f32::from_bits(b), f32::from_bits(c));
        }

        #[test]
        fn equals_fused_near_cancellation(a in -1e3f32..1e3, b in -1e3f32..1e3, e in -1e-3f32..1e-3) {
            // c close to -(a*b): the sum keeps the product's low digits.
            let c = -(a * b) + e;
            same(a, b, c);
        }

        #[test]
        fn equals_fused_around_halfway(c in 1u32..1 << 23, i in 1u32..4096, e in -8i32..8, neg: bool) {
            // a * b = ±(half an ulp of c)(1 + i 2^-23)(1 - i 2^-23) = ±half (1 - i² 2^-46): the
            // exact sum is a hair beside a halfway point, where rounding to nearest in f64
            // lands on it and the second rounding goes to even (wrong for half of the c).
            let c = f32::from_bits(0x3f80_0000 | c) * 2f32.powi(e);
            let half = f32::from_bits(c.to_bits() & 0x7f80_0000) * 2f32.powi(-24);
            let a = half * (1.0 + i as f32 * f32::EPSILON);
            let b = 1.0 - i as f32 * f32::EPSILON;
            same(if neg { -a } else { a }, b, c);
        }

        #[test]
        fn equals_fused_on_integer_taps(p in 0u8..=255, k in -2f32..2.0, c in -600f32..600.0) {
            same(p as f32, k, c);
        }
    }
}
