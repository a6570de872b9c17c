//! CPU reference of the matcher: one pass over every (query, train) pair, keeping each
//! query's two lowest neighbour keys and, for the cross-check, each train descriptor's
//! lowest key over the queries. Single-threaded; the x86-64 build uses the POPCNT
//! instruction when the CPU has it (checked at run time: the baseline target lacks it).

use super::{
    check_sizes, filter_into, insert2, key, Descriptor, Knn2, Match, MatchParams, Neighbor, NO_KEY,
};
use crate::error::Result;

/// The descriptor as four little-endian words (plain loads on every target we build for).
#[inline(always)]
fn words(d: &Descriptor) -> [u64; 4] {
    let w = |k: usize| u64::from_le_bytes(d[8 * k..8 * k + 8].try_into().unwrap());
    [w(0), w(1), w(2), w(3)]
}

#[inline(always)]
fn hamming(a: &[u64; 4], b: &[u64; 4]) -> u32 {
    (a[0] ^ b[0]).count_ones()
        + (a[1] ^ b[1]).count_ones()
        + (a[2] ^ b[2]).count_ones()
        + (a[3] ^ b[3]).count_ones()
}

/// Hamming distance of two descriptors (number of differing bits, 0..=256).
pub fn distance(a: &Descriptor, b: &Descriptor) -> u32 {
    hamming(&words(a), &words(b))
}

/// Queries handled together: each train descriptor is loaded once per group and its
/// reverse key updated once, with the group's minimum.
const GROUP: usize = 4;

/// `reverse` is only touched when `CROSS` (it is empty otherwise).
#[inline(always)]
fn scan<const CROSS: bool>(
    query: &[Descriptor],
    train: &[Descriptor],
    knn: &mut [[u32; 2]],
    reverse: &mut [u32],
) {
    for (c, (chunk, out)) in query.chunks(GROUP).zip(knn.chunks_mut(GROUP)).enumerate() {
        let start = c * GROUP;
        // A short last group is padded with copies of its first query whose reverse tag is
        // all ones: `key(d, NO_KEY) == NO_KEY`, so they never win a reverse minimum.
        let mut q = [words(&chunk[0]); GROUP];
        let mut tag = [NO_KEY; GROUP];
        for (g, d) in chunk.iter().enumerate() {
            q[g] = words(d);
            tag[g] = (start + g) as u32;
        }
        let mut b = [[NO_KEY; 2]; GROUP];
        for (j, t) in train.iter().enumerate() {
            let t = words(t);
            let mut col = NO_KEY;
            for g in 0..GROUP {
                let d = hamming(&q[g], &t);
                let [b1, b2] = &mut b[g];
                insert2(key(d, j as u32), b1, b2);
                if CROSS {
                    col = col.min(key(d, tag[g]));
                }
            }
            if CROSS {
                reverse[j] = reverse[j].min(col);
            }
        }
        out.copy_from_slice(&b[..out.len()]);
    }
}

fn scan_any(query: &[Descriptor], train: &[Descriptor], knn: &mut [[u32; 2]], reverse: &mut [u32]) {
    if reverse.is_empty() {
        scan::<false>(query, train, knn, reverse)
    } else {
        scan::<true>(query, train, knn, reverse)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn scan_popcnt(
    query: &[Descriptor],
    train: &[Descriptor],
    knn: &mut [[u32; 2]],
    reverse: &mut [u32],
) {
    if reverse.is_empty() {
        scan::<false>(query, train, knn, reverse)
    } else {
        scan::<true>(query, train, knn, reverse)
    }
}

/// Every query's two lowest neighbour keys into `knn` (resized to `query.len()`) and, when
/// `cross`, every train descriptor's lowest key over the queries into `reverse` (resized
/// to `train.len()`; left empty otherwise). Sizes are checked by the callers.
pub(crate) fn neighbour_keys(
    query: &[Descriptor],
    train: &[Descriptor],
    cross: bool,
    knn: &mut Vec<[u32; 2]>,
    reverse: &mut Vec<u32>,
) {
    knn.clear();
    knn.resize(query.len(), [NO_KEY; 2]);
    reverse.clear();
    if cross {
        reverse.resize(train.len(), NO_KEY);
    }
    if query.is_empty() || train.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked just above).
        unsafe { scan_popcnt(query, train, knn, reverse) };
        return;
    }
    scan_any(query, train, knn, reverse);
}

/// The two nearest train descriptors of every query (ties to the lower train index; `None`
/// where the train set has fewer than one or two descriptors). Errors only past
/// [`super::MAX_DESCRIPTORS`].
pub fn knn2(query: &[Descriptor], train: &[Descriptor]) -> Result<Vec<Knn2>> {
    check_sizes(query.len(), train.len())?;
    let (mut knn, mut reverse) = (Vec::new(), Vec::new());
    neighbour_keys(query, train, false, &mut knn, &mut reverse);
    Ok(knn
        .iter()
        .map(|&[a, b]| Knn2 {
            best: Neighbor::from_key(a),
            second: Neighbor::from_key(b),
        })
        .collect())
}

/// The matches of `query` in `train` under `params` (rules in the module docs of
/// [`super`]), sorted by query index. Errors only past [`super::MAX_DESCRIPTORS`].
pub fn match_descriptors(
    query: &[Descriptor],
    train: &[Descriptor],
    params: &MatchParams,
) -> Result<Vec<Match>> {
    check_sizes(query.len(), train.len())?;
    let (mut knn, mut reverse) = (Vec::new(), Vec::new());
    neighbour_keys(query, train, params.cross_check, &mut knn, &mut reverse);
    let mut out = Vec::new();
    filter_into(&knn, &reverse, params, &mut out);
    Ok(out)
}
