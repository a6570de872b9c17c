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

/// One colour per pyramid level (cycled), as Foxglove colours.
fn level_color(octave: i32) -> cdr::Color {
    const P: [(f64, f64, f64); 8] = [
        (0.0, 1.0, 0.0),
        (1.0, 1.0, 0.0),
        (1.0, 0.5, 0.0),
        (1.0, 0.0, 0.0),
        (1.0, 0.0, 1.0),
        (0.5, 0.3, 1.0),
        (0.0, 0.6, 1.0),
        (0.0, 1.0, 1.0),
    ];
    let (r, g, b) = P[octave.rem_euclid(8) as usize];
    cdr::Color { r, g, b, a: 1.0 }
}

/// Foxglove image annotations: one `POINTS` annotation (colour = pyramid level), one
/// `LINE_LIST` with each keypoint's orientation (radius = size / 2), and a count label.
pub fn annotations_message(header: &Header, keypoints: &[Keypoint]) -> Vec<u8> {
    let ts = header.stamp;
    let points = keypoints
        .iter()
        .map(|k| cdr::Point2 {
            x: k.x as f64,
            y: k.y as f64,
        })
        .collect();
    let colors = keypoints.iter().map(|k| level_color(k.octave)).collect();
    let mut lines = Vec::new();
    let mut line_colors = Vec::new();
    for k in keypoints.iter().filter(|k| k.angle >= 0.0) {
        let a = (k.angle as f64).to_radians();
        let r = k.size as f64 / 2.0;
        lines.push(cdr::Point2 {
            x: k.x as f64,
            y: k.y as f64,
        });
        lines.push(cdr::Point2 {
            x: k.x as f64 + r * a.cos(),
            y: k.y as f64 + r * a.sin(),
        });
        let c = level_color(k.octave);
        line_colors.push(c);
        line_colors.push(c);
    }
    let clear = cdr::Color::default();
    let mut ann = cdr::ImageAnnotations {
        circles: Vec::new(),
        points: vec![cdr::PointsAnnotation {
            timestamp: ts,
            kind: cdr::POINTS,
            points,
            outline_color: level_color(0),
            outline_colors: colors,
            fill_color: clear,
            thickness: 4.0,
        }],
        texts: vec![cdr::TextAnnotation {
            timestamp: ts,
            position: cdr::Point2 { x: 8.0, y: 20.0 },
            text: format!("{} keypoints", keypoints.len()),
            font_size: 16.0,
            text_color: cdr::Color {
                r: 1.0,
                g: 1.0,
                b: 1.0,
                a: 1.0,
            },
            background_color: cdr::Color {
                r: 0.0,
                g: 0.0,
                b: 0.0,
                a: 0.6,
            },
        }],
    };
    if !lines.is_empty() {
        ann.points.push(cdr::PointsAnnotation {
            timestamp: ts,
            kind: cdr::LINE_LIST,
            points: lines,
            outline_color: level_color(0),
            outline_colors: line_colors,
            fill_color: clear,
            thickness: 1.0,
        });
    }
    ann.encode()
}
