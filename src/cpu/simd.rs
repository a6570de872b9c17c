//! Which vector instructions the CPU stages use, chosen once at run time, and the one
//! macro that compiles a stage for each choice.
//!
//! # Note: SIMD levels
//!
//! A stage is written once, in plain Rust whose inner loops LLVM vectorizes (fixed-size
//! arrays, loops across pixels, no float reassociation), as an `#[inline(always)]` body.
//! `versions!` compiles that body once per [`Level`] (`#[target_feature]` copies) and
//! picks the copy for [`level()`] on every call. A few stages add hand-written intrinsics
//! for one level (the pyramid's AVX2 gathers, the colour conversion's AVX2 shuffles); they
//! ask [`level()`] too.
//!
//! Why every level gives the same bytes: integer arithmetic is exact at any width, and
//! Rust never reassociates or contracts float operations (`a * b + c` stays two roundings;
//! a fused multiply-add is one on every level: the instruction with FMA, exact `f64`
//! arithmetic without, see [`super::fma`]), so a vectorized float loop performs each
//! element's operations in the source's order.
//! `tests/simd_levels.rs` runs every preset at every level this CPU has and compares.
//!
//! Levels: [`Level::Baseline`] is the target's own (SSE2 on x86-64; NEON on aarch64, where
//! it is part of the baseline); [`Level::Sse41`] adds SSE4.1/4.2, SSSE3 and POPCNT
//! (x86-64-v2); [`Level::Avx2`] adds AVX2, FMA, BMI1/2, LZCNT and MOVBE (x86-64-v3). AVX-512
//! is not used: no stage was measured to gain from it. `GF_SIMD=baseline|sse4.1|avx2` caps
//! the level for a process (an unknown value is an error on stderr and leaves no cap);
//! [`set_cap`] does the same from code. Hand-rolled rather than the `multiversion` crate:
//! its dispatcher always takes the best level and cannot be forced, and forcing every
//! level is how the levels are tested.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// An instruction-set level, ordered: a CPU with one has the ones below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The compilation target's own instructions.
    Baseline = 0,
    /// x86-64-v2: SSE4.1, SSE4.2, SSSE3, POPCNT.
    Sse41 = 1,
    /// x86-64-v3: AVX2, FMA, BMI1, BMI2, LZCNT, MOVBE.
    Avx2 = 2,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Baseline, Level::Sse41, Level::Avx2];

    /// The name `GF_SIMD` takes.
    pub fn name(self) -> &'static str {
        match self {
            Level::Baseline => "baseline",
            Level::Sse41 => "sse4.1",
            Level::Avx2 => "avx2",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.name() == s)
    }

    fn from_u8(v: u8) -> Level {
        Level::ALL[(v as usize).min(2)]
    }
}

/// The best level this CPU runs (detected once).
pub fn detected() -> Level {
    static DETECTED: OnceLock<Level> = OnceLock::new();
    *DETECTED.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    use std::arch::is_x86_feature_detected as has;
    if has!("avx2")
        && has!("fma")
        && has!("bmi1")
        && has!("bmi2")
        && has!("lzcnt")
        && has!("movbe")
        && has!("sse4.2")
        && has!("popcnt")
    {
        Level::Avx2
    } else if has!("sse4.1") && has!("sse4.2") && has!("ssse3") && has!("popcnt") {
        Level::Sse41
    } else {
        Level::Baseline
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Baseline
}

/// No cap set yet (`GF_SIMD` not read).
const UNSET: u8 = u8::MAX;
static CAP: AtomicU8 = AtomicU8::new(UNSET);

fn env_cap() -> Level {
    match std::env::var("GF_SIMD") {
        Ok(v) => Level::parse(v.trim()).unwrap_or_else(|| {
            eprintln!("GF_SIMD={v:?} is not one of baseline, sse4.1, avx2: ignored");
            Level::Avx2
        }),
        Err(_) => Level::Avx2,
    }
}

/// Caps the level every stage uses from now on, in the whole process (tests, `bench`).
pub fn set_cap(cap: Level) {
    CAP.store(cap as u8, Ordering::Relaxed);
}

/// The level the stages use: [`detected`], capped by `GF_SIMD` or [`set_cap`].
#[inline]
pub fn level() -> Level {
    let mut cap = CAP.load(Ordering::Relaxed);
    if cap == UNSET {
        cap = env_cap() as u8;
        // A concurrent set_cap wins over the environment.
        let _ = CAP.compare_exchange(UNSET, cap, Ordering::Relaxed, Ordering::Relaxed);
        cap = CAP.load(Ordering::Relaxed);
    }
    detected().min(Level::from_u8(cap))
}

/// The levels this CPU can run, lowest first.
pub fn available() -> Vec<Level> {
    Level::ALL
        .into_iter()
        .filter(|&l| l <= detected())
        .collect()
}

/// Defines `fn $name(args) -> ret` that calls `$body(args)` compiled for [`level()`]:
/// one `#[target_feature]` copy of the (`#[inline(always)]`) body per [`Level`] (see the
/// module's note). Generic parameters go in brackets after the name and must be inferable
/// from the arguments.
///
/// The `fma` form (`= body, fma;`) passes one more argument, an
/// [`Fma`](super::fma::Fma) (see that module): [`Fused`](super::fma::Fused) where the level
/// has the instruction (AVX2 on x86-64; every aarch64 level), else
/// [`Emulated`](super::fma::Emulated).
///
/// ```ignore
/// versions! {
///     /// Docs of the dispatcher.
///     pub fn sobel(img: &GrayImage, out: &mut Vec<i16>) = sobel_impl;
/// }
/// ```
macro_rules! versions {
    ($(#[$m:meta])* $vis:vis fn $name:ident $([$($gen:tt)*])? ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:path;) => {
        $crate::cpu::simd::versions! { @copies [$(#[$m])*] [$vis] $name [$($($gen)*)?]
            [$($arg: $ty),*] [$(-> $ret)?] $body [] [] [] }
    };
    ($(#[$m:meta])* $vis:vis fn $name:ident $([$($gen:tt)*])? ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:path, fma;) => {
        $crate::cpu::simd::versions! { @copies [$(#[$m])*] [$vis] $name [$($($gen)*)?]
            [$($arg: $ty),*] [$(-> $ret)?] $body
            [, $crate::cpu::fma::Fused] [, $crate::cpu::fma::Emulated] [, $crate::cpu::fma::Fused] }
    };
    // `$avx2` / `$below` / `$other`: the extra argument of the AVX2 copy, of the copies
    // below it on x86-64, and of the one copy on other targets.
    (@copies [$($m:tt)*] [$vis:vis] $name:ident [$($gen:tt)*] [$($arg:ident : $ty:ty),*]
        [$($ret:tt)*] $body:path [$($avx2:tt)*] [$($below:tt)*] [$($other:tt)*]) => {
        $($m)*
        $vis fn $name <$($gen)*> ($($arg: $ty),*) $($ret)* {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma,bmi1,bmi2,lzcnt,movbe,sse4.2,popcnt")]
                unsafe fn avx2 <$($gen)*> ($($arg: $ty),*) $($ret)* {
                    $body($($arg),* $($avx2)*)
                }
                #[target_feature(enable = "sse4.1,sse4.2,ssse3,popcnt")]
                unsafe fn sse41 <$($gen)*> ($($arg: $ty),*) $($ret)* {
                    $body($($arg),* $($below)*)
                }
                match $crate::cpu::simd::level() {
                    // SAFETY: level() never exceeds what the CPU has (simd::detected).
                    $crate::cpu::simd::Level::Avx2 => unsafe { avx2($($arg),*) },
                    // SAFETY: as above.
                    $crate::cpu::simd::Level::Sse41 => unsafe { sse41($($arg),*) },
                    $crate::cpu::simd::Level::Baseline => $body($($arg),* $($below)*),
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                $body($($arg),* $($other)*)
            }
        }
    };
}
pub(crate) use versions;

/// Asks the CPU to bring the cache line of `data[i]` into its L1 cache ahead of use (x86-64's
/// PREFETCHT0); nothing when `i` is past the end, and nothing on other targets (Rust has no
/// stable prefetch there). A hint: no result depends on it. For scans whose hardware
/// prefetcher falls behind, e.g. FAST's on frames that come from DRAM (`fast::scan_row`).
#[inline(always)]
pub fn prefetch(data: &[u8], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if i < data.len() {
        // SAFETY: PREFETCHT0 is SSE (in every x86-64 CPU); it reads nothing that the program
        // sees and cannot fault, and the address is inside `data` anyway. Benefit measured
        // where it is used.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                data.as_ptr().add(i).cast(),
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, i);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order() {
        for l in Level::ALL {
            assert_eq!(Level::parse(l.name()), Some(l));
            assert_eq!(Level::from_u8(l as u8), l);
        }
        assert_eq!(Level::parse("avx512"), None);
        assert!(Level::Baseline < Level::Sse41 && Level::Sse41 < Level::Avx2);
        assert_eq!(available()[0], Level::Baseline);
        assert_eq!(*available().last().unwrap(), detected());
    }
}
