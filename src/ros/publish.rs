//! Which outputs are worth building: an output nobody reads is neither serialized nor
//! published (the edge image since docs/performance.md change 53; the keypoints, the tracks
//! and VINS's `feature` since change 63). A subscriber that has not matched yet would miss
//! the message either way (volatile topics).

/// Whether another process subscribes, from a publisher's
/// `get_inter_process_subscription_count()` (typed or untyped); an unknown count counts as
/// yes.
pub(super) fn listened(count: r2r::Result<usize>) -> bool {
    count.unwrap_or(1) > 0
}
