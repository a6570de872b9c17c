//! A neighbour as one `u32` key, `distance << INDEX_BITS | index`, so that "lower key" is
//! the matching order (distance, then index). The CPU reference and the GPU matcher
//! (`cuda/matcher.rs`, `kernels/match.cu`) both build on these; this file imports nothing.

/// Bits of a neighbour key that hold the index; the distance (<= 256) sits above them.
pub(crate) const INDEX_BITS: u32 = 23;
/// Largest query or train set one call accepts (indices must fit in `INDEX_BITS`).
pub const MAX_DESCRIPTORS: usize = (1 << INDEX_BITS) - 1;
/// "No neighbour": above every real key (distance 511 cannot occur).
pub(crate) const NO_KEY: u32 = u32::MAX;

/// The key of a neighbour at `distance` with index `index`.
#[inline(always)]
pub(crate) fn key(distance: u32, index: u32) -> u32 {
    (distance << INDEX_BITS) | index
}

/// Adds `k` to the two lowest keys `(b1, b2)`, `b1 <= b2` (branch-free; `NO_KEY` is a
/// no-op, and so the GPU kernel's merge of partial results uses the same rule).
#[inline(always)]
pub(crate) fn insert2(k: u32, b1: &mut u32, b2: &mut u32) {
    let hi = k.max(*b1);
    *b1 = k.min(*b1);
    *b2 = hi.min(*b2);
}
