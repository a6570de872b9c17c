//! The message structs, fields in declaration order as in their `.msg` files. Wire format and
//! field codecs: see the [module docs](super).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::{bytes, string};

/// `builtin_interfaces/msg/Time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Time {
    pub sec: i32,
    pub nanosec: u32,
}

impl Time {
    /// Nanoseconds since the epoch (negative seconds clamp to 0).
    pub fn as_nanos(self) -> u64 {
        (self.sec.max(0) as u64) * 1_000_000_000 + self.nanosec as u64
    }

    pub fn from_nanos(ns: u64) -> Self {
        Time {
            sec: (ns / 1_000_000_000).min(i32::MAX as u64) as i32,
            nanosec: (ns % 1_000_000_000) as u32,
        }
    }
}

/// `std_msgs/msg/Header`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub stamp: Time,
    #[serde(deserialize_with = "string::deserialize")]
    pub frame_id: String,
}

/// `sensor_msgs/msg/Image`; `data` borrows from the serialized message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image<'a> {
    pub header: Header,
    pub height: u32,
    pub width: u32,
    #[serde(deserialize_with = "string::deserialize")]
    pub encoding: String,
    pub is_bigendian: u8,
    pub step: u32,
    #[serde(borrow, with = "bytes")]
    pub data: Cow<'a, [u8]>,
}

impl<'a> Image<'a> {
    /// A mono8 image of `width` x `height` bytes `data` (rows packed).
    pub fn mono8(header: Header, width: usize, height: usize, data: &'a [u8]) -> Self {
        Image {
            header,
            height: height as u32,
            width: width as u32,
            encoding: "mono8".into(),
            is_bigendian: 0,
            step: width as u32,
            data: Cow::Borrowed(data),
        }
    }
}

/// `sensor_msgs/msg/CompressedImage`; `data` borrows from the serialized message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompressedImage<'a> {
    pub header: Header,
    #[serde(deserialize_with = "string::deserialize")]
    pub format: String,
    #[serde(borrow, with = "bytes")]
    pub data: Cow<'a, [u8]>,
}

/// `sensor_msgs/msg/PointField`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointField {
    #[serde(deserialize_with = "string::deserialize")]
    pub name: String,
    pub offset: u32,
    pub datatype: u8,
    pub count: u32,
}

/// `sensor_msgs/msg/PointCloud2`; `data` borrows from the serialized message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointCloud2<'a> {
    pub header: Header,
    pub height: u32,
    pub width: u32,
    pub fields: Vec<PointField>,
    pub is_bigendian: bool,
    pub point_step: u32,
    pub row_step: u32,
    #[serde(borrow, with = "bytes")]
    pub data: Cow<'a, [u8]>,
    pub is_dense: bool,
}

/// `geometry_msgs/msg/Point32`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point32 {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}

/// `sensor_msgs/msg/ChannelFloat32`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelFloat32 {
    #[serde(deserialize_with = "string::deserialize")]
    pub name: String,
    pub values: Vec<f32>,
}

/// `sensor_msgs/msg/PointCloud` (VINS's `feature` message).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointCloud {
    pub header: Header,
    pub points: Vec<Point32>,
    pub channels: Vec<ChannelFloat32>,
}

/// `sensor_msgs/msg/RegionOfInterest`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionOfInterest {
    pub x_offset: u32,
    pub y_offset: u32,
    pub height: u32,
    pub width: u32,
    pub do_rectify: bool,
}

/// `sensor_msgs/msg/CameraInfo` (the replay reads it beside an image topic).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CameraInfo {
    pub header: Header,
    pub height: u32,
    pub width: u32,
    #[serde(deserialize_with = "string::deserialize")]
    pub distortion_model: String,
    pub d: Vec<f64>,
    pub k: [f64; 9],
    pub r: [f64; 9],
    pub p: [f64; 12],
    pub binning_x: u32,
    pub binning_y: u32,
    pub roi: RegionOfInterest,
}

/// `std_msgs/msg/Bool` (the tracker's `restart`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bool {
    pub data: bool,
}

/// `foxglove_msgs/msg/Point2`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point2 {
    pub x: f64,
    pub y: f64,
}

/// `foxglove_msgs/msg/Color` (components in 0..=1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Color {
    pub r: f64,
    pub g: f64,
    pub b: f64,
    pub a: f64,
}

/// `foxglove_msgs/msg/CircleAnnotation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CircleAnnotation {
    pub timestamp: Time,
    pub position: Point2,
    pub diameter: f64,
    pub thickness: f64,
    pub fill_color: Color,
    pub outline_color: Color,
}

/// `foxglove_msgs/msg/PointsAnnotation` (`kind` is the message's `type`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointsAnnotation {
    pub timestamp: Time,
    pub kind: u8,
    pub points: Vec<Point2>,
    pub outline_color: Color,
    pub outline_colors: Vec<Color>,
    pub fill_color: Color,
    pub thickness: f64,
}

/// `PointsAnnotation.type` values.
pub const POINTS: u8 = 1;
pub const LINE_LIST: u8 = 4;

/// `foxglove_msgs/msg/TextAnnotation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextAnnotation {
    pub timestamp: Time,
    pub position: Point2,
    #[serde(deserialize_with = "string::deserialize")]
    pub text: String,
    pub font_size: f64,
    pub text_color: Color,
    pub background_color: Color,
}

/// `foxglove_msgs/msg/ImageAnnotations`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageAnnotations {
    pub circles: Vec<CircleAnnotation>,
    pub points: Vec<PointsAnnotation>,
    pub texts: Vec<TextAnnotation>,
}
