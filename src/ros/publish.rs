//! Which outputs are worth building: an output nobody reads is neither serialized nor
//! published (the edge image since docs/performance.md change 53; the keypoints, the tracks
//! and VINS's `feature` since change 63). A subscriber that has not matched yet would miss
//! the message either way (volatile topics). And the one optional output whose message type
//! the node may lack: `keypoints/annotations` ([`annotations_publisher`]).

use r2r::QosProfile;

use crate::cdr::IMAGE_ANNOTATIONS;

/// Whether another process subscribes, from a publisher's
/// `get_inter_process_subscription_count()` (typed or untyped); an unknown count counts as
/// yes.
pub(super) fn listened(count: r2r::Result<usize>) -> bool {
    count.unwrap_or(1) > 0
}

/// With `foxglove_annotations`, the input's `keypoints/annotations` publisher (`topic`), or
/// why there is none: a node built without foxglove_msgs (r2r generates only the message
/// types it found). The caller logs it, puts it in the input's /diagnostics
/// (`foxglove_annotations`, WARN) and runs on without it.
pub(super) fn annotations_publisher(
    node: &mut r2r::Node,
    topic: &str,
    qos: &QosProfile,
) -> Result<r2r::PublisherUntyped, String> {
    node.create_publisher_untyped(topic, IMAGE_ANNOTATIONS, qos.clone())
        .map_err(|e| {
            format!(
                "foxglove_annotations: no {IMAGE_ANNOTATIONS} in this build ({e}); build the node with foxglove_msgs installed (apt: ros-$ROS_DISTRO-foxglove-msgs; the PyPI wheels: scripts/setup-ros.sh builds it)"
            )
        })
}
