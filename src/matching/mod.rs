//! Brute-force Hamming matching of 256-bit binary descriptors (ORB's `[u8; 32]`), on the
//! CPU ([`cpu`], the reference) and on the GPU (`src/cuda/matcher.rs` + `kernels/match.cu`),
//! with identical results.
//!
//! Definitions, shared by both backends:
//! - distance: the number of differing bits, 0..=256.
//! - nearest neighbours of a query: the train descriptors in increasing (distance, train
//!   index) order, so ties go to the lower train index. [`knn2`] keeps the first two.
//! - reverse best of a train descriptor: the query with the lowest (distance, query index).
//!
//! A query `i` yields the [`Match`] `(i, j)`, `j` its nearest neighbour, when every enabled
//! test of [`MatchParams`] passes:
//! - `max_distance: Some(d)`: `distance <= d` (inclusive).
//! - `ratio: Some(r)` (Lowe's test on the two nearest): `(best as f32) < r * (second as f32)`,
//!   the product rounded to f32; strict, so a tie between the two nearest always fails for
//!   `r <= 1`. A query with a single train candidate (M = 1) has no second neighbour and
//!   passes.
//! - `cross_check`: the reverse best of `j` is `i` (a mutual nearest neighbour).
//!
//! The matches come sorted by query index, at most one per query. Internally a neighbour is
//! one `u32` key, `distance << 23 | index`, so that "lower key" is exactly the order above;
//! hence at most [`MAX_DESCRIPTORS`] descriptors per set.
//!
//! May import: `cuda`, `error`, `features`, `pipeline` (`cuda::matcher` for the GPU matcher,
//! `pipeline` for the backend choice).

pub mod cpu;
pub mod keys;

pub use cpu::{knn2, match_descriptors};

use crate::error::{Error, Result};
use crate::pipeline::{BackendChoice, BackendKind};

/// One 256-bit binary descriptor, `[u8; 32]` (the pipeline's `Features::descriptors`).
use crate::features::Descriptor;

pub use self::keys::MAX_DESCRIPTORS;
pub(crate) use self::keys::{insert2, key, INDEX_BITS, NO_KEY};

/// A neighbour: train (or query) index and its distance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Neighbor {
    pub index: u32,
    pub distance: u32,
}

impl Neighbor {
    #[inline]
    pub(crate) fn from_key(k: u32) -> Option<Neighbor> {
        (k != NO_KEY).then_some(Neighbor {
            index: k & ((1 << INDEX_BITS) - 1),
            distance: k >> INDEX_BITS,
        })
    }
}

/// The two nearest train descriptors of one query (`None` when the train set is too small).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Knn2 {
    pub best: Option<Neighbor>,
    pub second: Option<Neighbor>,
}

/// A kept correspondence: `query` and `train` index, and their Hamming distance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Match {
    pub query: u32,
    pub train: u32,
    pub distance: u32,
}

/// Which nearest-neighbour pairs become matches (module docs give the exact rules).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatchParams {
    /// Lowe's ratio test on the two nearest: keep when `best < ratio * second` (f32,
    /// strict). Default `Some(0.8)`.
    pub ratio: Option<f32>,
    /// Keep only mutual nearest neighbours. Default `true`.
    pub cross_check: bool,
    /// Keep only `distance <= max_distance`. Default `None`.
    pub max_distance: Option<u32>,
}

impl Default for MatchParams {
    /// Ratio 0.8 and cross-check: the usual pair of tests for ORB frame-to-frame matching;
    /// together they drop most ambiguous (repetitive texture) and one-sided matches.
    fn default() -> Self {
        MatchParams {
            ratio: Some(0.8),
            cross_check: true,
            max_distance: None,
        }
    }
}

impl MatchParams {
    /// Every nearest neighbour, no test (`cv::BFMatcher::match` without cross-check).
    pub fn all() -> Self {
        MatchParams {
            ratio: None,
            cross_check: false,
            max_distance: None,
        }
    }
}

pub(crate) fn check_sizes(query: usize, train: usize) -> Result<()> {
    if query > MAX_DESCRIPTORS || train > MAX_DESCRIPTORS {
        return Err(Error::Config(format!(
            "matching: {query} query and {train} train descriptors; at most {MAX_DESCRIPTORS} \
             per set"
        )));
    }
    Ok(())
}

/// Turns the neighbour keys into matches (the last step of both backends, so the tests
/// are applied by one piece of code). `knn[i]`: query `i`'s two lowest keys; `reverse[j]`:
/// train `j`'s lowest key over the queries (only read with `cross_check`).
pub(crate) fn filter_into(
    knn: &[[u32; 2]],
    reverse: &[u32],
    params: &MatchParams,
    out: &mut Vec<Match>,
) {
    out.clear();
    for (i, &[k1, k2]) in knn.iter().enumerate() {
        let Some(best) = Neighbor::from_key(k1) else {
            continue;
        };
        if params.max_distance.is_some_and(|d| best.distance > d) {
            continue;
        }
        if let (Some(r), Some(second)) = (params.ratio, Neighbor::from_key(k2)) {
            if (best.distance as f32) >= r * (second.distance as f32) {
                continue;
            }
        }
        if params.cross_check
            && Neighbor::from_key(reverse[best.index as usize]).map(|n| n.index) != Some(i as u32)
        {
            continue;
        }
        out.push(Match {
            query: i as u32,
            train: best.index,
            distance: best.distance,
        });
    }
}

enum Backend {
    Cpu,
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::cuda::matcher::CudaMatcher>),
}

/// A matcher with its backend and buffers: the GPU's (device and pinned host memory) grow
/// only when a call brings more descriptors than any before, so a steady stream of frames
/// allocates nothing, on the device or the host (`out` and the key buffers keep their
/// capacity).
pub struct Matcher {
    backend: Backend,
    fallback_reason: Option<String>,
    knn: Vec<[u32; 2]>,
    reverse: Vec<u32>,
}

impl Matcher {
    /// `Auto`: CUDA when a usable GPU is present, else the CPU ([`Matcher::fallback_reason`]
    /// says why); `Cuda` fails with the reason instead.
    pub fn new(choice: BackendChoice) -> Result<Self> {
        let (backend, fallback_reason) = match choice {
            BackendChoice::Cpu => (Backend::Cpu, None),
            BackendChoice::Cuda => (Self::cuda_backend()?, None),
            BackendChoice::Auto => match Self::cuda_backend() {
                Ok(b) => (b, None),
                Err(e) => (Backend::Cpu, Some(e.to_string())),
            },
        };
        Ok(Matcher::with_backend(backend, fallback_reason))
    }

    /// The matcher of `pipeline`'s descriptors: on the CUDA backend in the pipeline's own
    /// GPU session (its context, kernels and main stream, after the frame's work); on the
    /// CPU otherwise, or when the GPU matcher cannot start ([`Matcher::fallback_reason`]
    /// says why).
    pub fn for_pipeline(pipeline: &crate::pipeline::Pipeline) -> Matcher {
        let (backend, fallback_reason) = match Self::session_backend(pipeline) {
            Some(Ok(b)) => (b, None),
            Some(Err(e)) => (Backend::Cpu, Some(e.to_string())),
            None => (Backend::Cpu, None),
        };
        Matcher::with_backend(backend, fallback_reason)
    }

    fn with_backend(backend: Backend, fallback_reason: Option<String>) -> Matcher {
        Matcher {
            backend,
            fallback_reason,
            knn: Vec::new(),
            reverse: Vec::new(),
        }
    }

    /// The GPU matcher in `pipeline`'s session, None when the pipeline runs on the CPU.
    #[cfg(feature = "cuda")]
    fn session_backend(pipeline: &crate::pipeline::Pipeline) -> Option<Result<Backend>> {
        let gpu = pipeline.gpu_session()?;
        let m = crate::cuda::matcher::CudaMatcher::with_gpu(gpu);
        Some(m.map(|m| Backend::Cuda(Box::new(m))))
    }

    #[cfg(not(feature = "cuda"))]
    fn session_backend(_: &crate::pipeline::Pipeline) -> Option<Result<Backend>> {
        None
    }

    #[cfg(feature = "cuda")]
    fn cuda_backend() -> Result<Backend> {
        Ok(Backend::Cuda(Box::new(
            crate::cuda::matcher::CudaMatcher::new()?,
        )))
    }

    #[cfg(not(feature = "cuda"))]
    fn cuda_backend() -> Result<Backend> {
        Err(Error::Cuda(
            "this build has no CUDA backend (built without the `cuda` feature)".into(),
        ))
    }

    pub fn backend(&self) -> BackendKind {
        match self.backend {
            Backend::Cpu => BackendKind::Cpu,
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => BackendKind::Cuda,
        }
    }

    /// Set when `BackendChoice::Auto` could not use CUDA: the reason, for a one-time log.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// The GPU matcher, when that is the backend (for its device name and kernel info).
    #[cfg(feature = "cuda")]
    pub fn cuda(&self) -> Option<&crate::cuda::matcher::CudaMatcher> {
        match &self.backend {
            Backend::Cuda(c) => Some(c),
            Backend::Cpu => None,
        }
    }

    fn neighbours(
        &mut self,
        query: &[Descriptor],
        train: &[Descriptor],
        cross: bool,
    ) -> Result<()> {
        check_sizes(query.len(), train.len())?;
        match &mut self.backend {
            Backend::Cpu => {
                cpu::neighbour_keys(query, train, cross, &mut self.knn, &mut self.reverse);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => {
                c.neighbour_keys(query, train, cross, &mut self.knn, &mut self.reverse)
            }
        }
    }

    /// The matches of `query` in `train` under `params`, into `out` (cleared first), sorted
    /// by query index; identical on both backends.
    pub fn match_into(
        &mut self,
        query: &[Descriptor],
        train: &[Descriptor],
        params: &MatchParams,
        out: &mut Vec<Match>,
    ) -> Result<()> {
        self.neighbours(query, train, params.cross_check)?;
        filter_into(&self.knn, &self.reverse, params, out);
        Ok(())
    }

    /// The two nearest train descriptors of every query, into `out` (cleared first).
    pub fn knn2_into(
        &mut self,
        query: &[Descriptor],
        train: &[Descriptor],
        out: &mut Vec<Knn2>,
    ) -> Result<()> {
        self.neighbours(query, train, false)?;
        out.clear();
        out.extend(self.knn.iter().map(|&[a, b]| Knn2 {
            best: Neighbor::from_key(a),
            second: Neighbor::from_key(b),
        }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_by_distance_then_index() {
        assert!(key(3, 500) < key(4, 0));
        assert!(key(3, 1) < key(3, 2));
        assert!(key(256, MAX_DESCRIPTORS as u32 - 1) < NO_KEY);
        // A padded query's tag: any distance with an all-ones index is "no key".
        assert_eq!(key(17, NO_KEY), NO_KEY);
        assert_eq!(
            Neighbor::from_key(key(256, 7)),
            Some(Neighbor {
                index: 7,
                distance: 256
            })
        );
        assert_eq!(Neighbor::from_key(NO_KEY), None);
    }

    #[test]
    fn insert2_keeps_the_two_lowest() {
        let (mut b1, mut b2) = (NO_KEY, NO_KEY);
        for k in [9, NO_KEY, 4, 7, 4, 12] {
            insert2(k, &mut b1, &mut b2);
        }
        assert_eq!((b1, b2), (4, 4));
        let (mut b1, mut b2) = (NO_KEY, NO_KEY);
        insert2(5, &mut b1, &mut b2);
        assert_eq!((b1, b2), (5, NO_KEY));
    }

    #[test]
    fn set_size_limit() {
        assert!(check_sizes(MAX_DESCRIPTORS, MAX_DESCRIPTORS).is_ok());
        assert!(check_sizes(MAX_DESCRIPTORS + 1, 0).is_err());
        assert!(check_sizes(0, MAX_DESCRIPTORS + 1).is_err());
    }
}
