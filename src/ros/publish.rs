//! Which outputs are worth building: an output nobody reads is neither serialized nor
//! published (the edge image since docs/performance.md change 53; the keypoints, the tracks
//! and VINS's `feature` since change 63). A subscriber that has not matched yet would miss
//! the message either way (volatile topics).

/// Whether another process subscribes to `p`'s topic; an unknown count counts as yes.
pub(super) fn listened(p: &r2r::PublisherUntyped) -> bool {
    p.get_inter_process_subscription_count().unwrap_or(1) > 0
}
