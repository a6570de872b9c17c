//! The replay's output topics and their messages (see the table in the [module docs](super)).

use std::borrow::Cow;

use crate::cdr::{self, Header};
use crate::features::{Descriptor, Keypoint};
use crate::image::GrayImage;
use crate::output::pointcloud;

/// Output topic names for an input image topic.
pub fn keypoints_topic(t: &str) -> String {
    format!("{}/keypoints", t.trim_end_matches('/'))
}
pub fn edges_topic(t: &str) -> String {
    format!("{}/edges", t.trim_end_matches('/'))
}
pub fn tracks_topic(t: &str) -> String {
    format!("{}/tracks", t.trim_end_matches('/'))
}
pub fn feature_topic(t: &str) -> String {
    format!("{}/feature", t.trim_end_matches('/'))
}
pub fn restart_topic(t: &str) -> String {
    format!("{}/restart", t.trim_end_matches('/'))
}
pub fn debug_image_topic(t: &str) -> String {
    format!("{}/debug_image", t.trim_end_matches('/'))
}
pub fn annotations_topic(t: &str) -> String {
    format!("{}/keypoints/annotations", t.trim_end_matches('/'))
}

/// The `keypoints` PointCloud2, serialized.
pub fn keypoints_message(
    header: &Header,
    keypoints: &[Keypoint],
    descriptors: Option<&[Descriptor]>,
    scratch: &mut Vec<u8>,
) -> Vec<u8> {
    pointcloud::encode(keypoints, descriptors, scratch);
    cloud_message(
        header,
        pointcloud::fields(descriptors.is_some()),
        pointcloud::point_step(descriptors.is_some()),
        keypoints.len(),
        scratch,
        true,
    )
}

/// The `tracks` PointCloud2 (`output::tracks` layout), serialized.
pub fn tracks_message(
    header: &Header,
    tracks: &[crate::track::Track],
    scratch: &mut Vec<u8>,
) -> Vec<u8> {
    use crate::output::tracks as layout;
    layout::encode(tracks, scratch);
    cloud_message(
        header,
        &layout::FIELDS,
        layout::POINT_STEP,
        tracks.len(),
        scratch,
        false,
    )
}

/// A one-row PointCloud2 of `n` points of `step` bytes laid out as `fields`, serialized.
fn cloud_message(
    header: &Header,
    fields: &[pointcloud::Field],
    step: usize,
    n: usize,
    data: &[u8],
    is_dense: bool,
) -> Vec<u8> {
    let (n, step) = (n as u32, step as u32);
    cdr::PointCloud2 {
        header: header.clone(),
        height: 1,
        width: n,
        fields: pointcloud::cdr_fields(fields),
        is_bigendian: false,
        point_step: step,
        row_step: step * n,
        data: Cow::Borrowed(data),
        is_dense,
    }
    .encode()
}

pub(super) fn edges_message(header: &Header, edges: &GrayImage) -> Vec<u8> {
    cdr::Image::mono8(header.clone(), edges.width, edges.height, &edges.data).encode()
}

/// A `bgr8` picture (`pic` holds RGB, swapped in place), serialized as the node's
/// `debug_image`.
pub(super) fn bgr8_message(header: &Header, pic: &mut crate::output::overlay::RgbImage) -> Vec<u8> {
    pic.to_bgr_in_place();
    cdr::Image {
        header: header.clone(),
        height: pic.height as u32,
        width: pic.width as u32,
        encoding: "bgr8".into(),
        is_bigendian: 0,
        step: (pic.width * 3) as u32,
        data: Cow::Borrowed(&pic.data),
    }
    .encode()
}
