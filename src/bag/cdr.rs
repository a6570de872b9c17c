//! Hand-written CDR (XCDR1, as ROS 2's rmw layers put on the wire and rosbag2 stores) for the
//! few messages the replay reads and writes, with no ROS install.
//!
//! A serialized message is a 4-byte encapsulation header (`00 01 00 00` little-endian,
//! `00 00 00 00` big-endian) and the fields in declaration order. Every primitive is aligned
//! to its own size, counted from the end of the header; strings are a `uint32` length that
//! includes the terminating NUL, the bytes and the NUL; sequences are a `uint32` count and the
//! elements. We read both byte orders and always write little-endian.

use std::borrow::Cow;

use crate::error::{Error, Result};

/// `builtin_interfaces/msg/Time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub stamp: Time,
    pub frame_id: String,
}

/// `sensor_msgs/msg/Image`; `data` borrows from the serialized message when it can.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image<'a> {
    pub header: Header,
    pub height: u32,
    pub width: u32,
    pub encoding: String,
    pub is_bigendian: u8,
    pub step: u32,
    pub data: Cow<'a, [u8]>,
}

/// `sensor_msgs/msg/CompressedImage`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressedImage<'a> {
    pub header: Header,
    pub format: String,
    pub data: Cow<'a, [u8]>,
}

/// `sensor_msgs/msg/PointField`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointField {
    pub name: String,
    pub offset: u32,
    pub datatype: u8,
    pub count: u32,
}

/// `sensor_msgs/msg/PointCloud2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointCloud2<'a> {
    pub header: Header,
    pub height: u32,
    pub width: u32,
    pub fields: Vec<PointField>,
    pub is_bigendian: bool,
    pub point_step: u32,
    pub row_step: u32,
    pub data: Cow<'a, [u8]>,
    pub is_dense: bool,
}

/// `foxglove_msgs/msg/Point2`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Point2 {
    pub x: f64,
    pub y: f64,
}

/// `foxglove_msgs/msg/Color` (components in 0..=1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Color {
    pub r: f64,
    pub g: f64,
    pub b: f64,
    pub a: f64,
}

/// `foxglove_msgs/msg/CircleAnnotation`.
#[derive(Clone, Debug, PartialEq)]
pub struct CircleAnnotation {
    pub timestamp: Time,
    pub position: Point2,
    pub diameter: f64,
    pub thickness: f64,
    pub fill_color: Color,
    pub outline_color: Color,
}

/// `foxglove_msgs/msg/PointsAnnotation` (`kind` is the message's `type`).
#[derive(Clone, Debug, PartialEq)]
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
#[derive(Clone, Debug, PartialEq)]
pub struct TextAnnotation {
    pub timestamp: Time,
    pub position: Point2,
    pub text: String,
    pub font_size: f64,
    pub text_color: Color,
    pub background_color: Color,
}

/// `foxglove_msgs/msg/ImageAnnotations`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImageAnnotations {
    pub circles: Vec<CircleAnnotation>,
    pub points: Vec<PointsAnnotation>,
    pub texts: Vec<TextAnnotation>,
}

// ---------------------------------------------------------------------------------------------
// Reading

/// A cursor over one serialized message.
pub struct CdrReader<'a> {
    buf: &'a [u8],
    /// Position in `buf`; alignment counts from 4 (the end of the encapsulation header).
    pos: usize,
    little: bool,
}

fn short(what: &str, pos: usize, need: usize, len: usize) -> Error {
    Error::Bag(format!(
        "CDR: message ends early reading {what} at byte {pos} (needs {need} more, {} left)",
        len.saturating_sub(pos)
    ))
}

impl<'a> CdrReader<'a> {
    pub fn new(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < 4 {
            return Err(Error::Bag(format!(
                "CDR: message of {} bytes has no encapsulation header",
                buf.len()
            )));
        }
        let little = match (buf[0], buf[1]) {
            (0, 0) => false,
            (0, 1) => true,
            (a, b) => {
                return Err(Error::Bag(format!(
                    "CDR: unsupported encapsulation {a:#04x} {b:#04x} (expected plain CDR, 00 00 or 00 01)"
                )))
            }
        };
        Ok(CdrReader {
            buf,
            pos: 4,
            little,
        })
    }

    fn align(&mut self, n: usize) {
        let rel = self.pos - 4;
        self.pos += (n - rel % n) % n;
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| short(what, self.pos, n, self.buf.len()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn fixed<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        self.align(N);
        let mut b: [u8; N] = self.take(N, what)?.try_into().unwrap();
        if !self.little {
            b.reverse();
        }
        Ok(b)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    pub fn bool(&mut self, what: &str) -> Result<bool> {
        Ok(self.u8(what)? != 0)
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.fixed(what)?))
    }
    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.fixed(what)?))
    }
    pub fn f64(&mut self, what: &str) -> Result<f64> {
        Ok(f64::from_le_bytes(self.fixed(what)?))
    }

    pub fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u32(what)? as usize;
        if n == 0 {
            // Some writers put a zero length for the empty string.
            return Ok(String::new());
        }
        let b = self.take(n, what)?;
        let (text, nul) = b.split_at(n - 1);
        if nul != [0] {
            return Err(Error::Bag(format!(
                "CDR: string {what} is not NUL-terminated (wrong message type?)"
            )));
        }
        String::from_utf8(text.to_vec())
            .map_err(|_| Error::Bag(format!("CDR: string {what} is not UTF-8")))
    }

    /// A `uint8[]`, borrowed.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }

    /// A sequence length, checked against the bytes left (each element is at least
    /// `min_elem` bytes), so a corrupt count cannot make us allocate wildly.
    pub fn seq_len(&mut self, what: &str, min_elem: usize) -> Result<usize> {
        let n = self.u32(what)? as usize;
        let left = self.buf.len() - self.pos;
        if n.saturating_mul(min_elem) > left {
            return Err(short(what, self.pos, n * min_elem, self.buf.len()));
        }
        Ok(n)
    }

    pub fn time(&mut self) -> Result<Time> {
        Ok(Time {
            sec: self.i32("stamp.sec")?,
            nanosec: self.u32("stamp.nanosec")?,
        })
    }

    pub fn header(&mut self) -> Result<Header> {
        Ok(Header {
            stamp: self.time()?,
            frame_id: self.string("header.frame_id")?,
        })
    }

    pub fn point2(&mut self) -> Result<Point2> {
        Ok(Point2 {
            x: self.f64("x")?,
            y: self.f64("y")?,
        })
    }

    pub fn color(&mut self) -> Result<Color> {
        Ok(Color {
            r: self.f64("r")?,
            g: self.f64("g")?,
            b: self.f64("b")?,
            a: self.f64("a")?,
        })
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}

impl<'a> Image<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut r = CdrReader::new(buf)?;
        Ok(Image {
            header: r.header()?,
            height: r.u32("height")?,
            width: r.u32("width")?,
            encoding: r.string("encoding")?,
            is_bigendian: r.u8("is_bigendian")?,
            step: r.u32("step")?,
            data: Cow::Borrowed(r.bytes("data")?),
        })
    }
}

impl<'a> CompressedImage<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut r = CdrReader::new(buf)?;
        Ok(CompressedImage {
            header: r.header()?,
            format: r.string("format")?,
            data: Cow::Borrowed(r.bytes("data")?),
        })
    }
}

impl<'a> PointCloud2<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut r = CdrReader::new(buf)?;
        let header = r.header()?;
        let height = r.u32("height")?;
        let width = r.u32("width")?;
        let n = r.seq_len("fields", 13)?;
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            fields.push(PointField {
                name: r.string("field.name")?,
                offset: r.u32("field.offset")?,
                datatype: r.u8("field.datatype")?,
                count: r.u32("field.count")?,
            });
        }
        Ok(PointCloud2 {
            header,
            height,
            width,
            fields,
            is_bigendian: r.bool("is_bigendian")?,
            point_step: r.u32("point_step")?,
            row_step: r.u32("row_step")?,
            data: Cow::Borrowed(r.bytes("data")?),
            is_dense: r.bool("is_dense")?,
        })
    }
}

impl ImageAnnotations {
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut r = CdrReader::new(buf)?;
        let mut out = ImageAnnotations::default();
        let n = r.seq_len("circles", 88)?;
        for _ in 0..n {
            out.circles.push(CircleAnnotation {
                timestamp: r.time()?,
                position: r.point2()?,
                diameter: r.f64("diameter")?,
                thickness: r.f64("thickness")?,
                fill_color: r.color()?,
                outline_color: r.color()?,
            });
        }
        let n = r.seq_len("points", 24)?;
        for _ in 0..n {
            let timestamp = r.time()?;
            let kind = r.u8("type")?;
            let m = r.seq_len("points.points", 16)?;
            let points = (0..m).map(|_| r.point2()).collect::<Result<_>>()?;
            let outline_color = r.color()?;
            let m = r.seq_len("outline_colors", 32)?;
            let outline_colors = (0..m).map(|_| r.color()).collect::<Result<_>>()?;
            out.points.push(PointsAnnotation {
                timestamp,
                kind,
                points,
                outline_color,
                outline_colors,
                fill_color: r.color()?,
                thickness: r.f64("thickness")?,
            });
        }
        let n = r.seq_len("texts", 24)?;
        for _ in 0..n {
            out.texts.push(TextAnnotation {
                timestamp: r.time()?,
                position: r.point2()?,
                text: r.string("text")?,
                font_size: r.f64("font_size")?,
                text_color: r.color()?,
                background_color: r.color()?,
            });
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Writing

/// Builds one little-endian CDR message.
pub struct CdrWriter {
    buf: Vec<u8>,
}

impl Default for CdrWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl CdrWriter {
    pub fn new() -> Self {
        Self::with_capacity(64)
    }

    pub fn with_capacity(n: usize) -> Self {
        let mut buf = Vec::with_capacity(n + 4);
        buf.extend_from_slice(&[0, 1, 0, 0]);
        CdrWriter { buf }
    }

    fn align(&mut self, n: usize) {
        let rel = self.buf.len() - 4;
        let pad = (n - rel % n) % n;
        self.buf.resize(self.buf.len() + pad, 0);
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn bool(&mut self, v: bool) {
        self.buf.push(v as u8);
    }
    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.align(8);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn string(&mut self, s: &str) {
        self.u32(s.len() as u32 + 1);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.buf.extend_from_slice(b);
    }
    pub fn time(&mut self, t: Time) {
        self.i32(t.sec);
        self.u32(t.nanosec);
    }
    pub fn header(&mut self, h: &Header) {
        self.time(h.stamp);
        self.string(&h.frame_id);
    }
    pub fn point2(&mut self, p: Point2) {
        self.f64(p.x);
        self.f64(p.y);
    }
    pub fn color(&mut self, c: Color) {
        self.f64(c.r);
        self.f64(c.g);
        self.f64(c.b);
        self.f64(c.a);
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

impl Image<'_> {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(self.data.len() + 64 + self.header.frame_id.len());
        w.header(&self.header);
        w.u32(self.height);
        w.u32(self.width);
        w.string(&self.encoding);
        w.u8(self.is_bigendian);
        w.u32(self.step);
        w.bytes(&self.data);
        w.finish()
    }
}

impl CompressedImage<'_> {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(self.data.len() + 64 + self.header.frame_id.len());
        w.header(&self.header);
        w.string(&self.format);
        w.bytes(&self.data);
        w.finish()
    }
}

impl PointCloud2<'_> {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(self.data.len() + 256 + self.header.frame_id.len());
        w.header(&self.header);
        w.u32(self.height);
        w.u32(self.width);
        w.u32(self.fields.len() as u32);
        for f in &self.fields {
            w.string(&f.name);
            w.u32(f.offset);
            w.u8(f.datatype);
            w.u32(f.count);
        }
        w.bool(self.is_bigendian);
        w.u32(self.point_step);
        w.u32(self.row_step);
        w.bytes(&self.data);
        w.bool(self.is_dense);
        w.finish()
    }
}

impl ImageAnnotations {
    pub fn encode(&self) -> Vec<u8> {
        let n: usize = self.points.iter().map(|p| 48 * p.points.len() + 128).sum();
        let mut w = CdrWriter::with_capacity(n + 100 * self.circles.len() + 64);
        w.u32(self.circles.len() as u32);
        for c in &self.circles {
            w.time(c.timestamp);
            w.point2(c.position);
            w.f64(c.diameter);
            w.f64(c.thickness);
            w.color(c.fill_color);
            w.color(c.outline_color);
        }
        w.u32(self.points.len() as u32);
        for p in &self.points {
            w.time(p.timestamp);
            w.u8(p.kind);
            w.u32(p.points.len() as u32);
            for &q in &p.points {
                w.point2(q);
            }
            w.color(p.outline_color);
            w.u32(p.outline_colors.len() as u32);
            for &c in &p.outline_colors {
                w.color(c);
            }
            w.color(p.fill_color);
            w.f64(p.thickness);
        }
        w.u32(self.texts.len() as u32);
        for t in &self.texts {
            w.time(t.timestamp);
            w.point2(t.position);
            w.string(&t.text);
            w.f64(t.font_size);
            w.color(t.text_color);
            w.color(t.background_color);
        }
        w.finish()
    }
}

// ---------------------------------------------------------------------------------------------
// Schemas (`ros2msg` text, as rosbag2 stores it: the message, then each dependency after a
// line of 80 `=` and `MSG: pkg/Name`).

pub const IMAGE: &str = "sensor_msgs/msg/Image";
pub const COMPRESSED_IMAGE: &str = "sensor_msgs/msg/CompressedImage";
pub const POINT_CLOUD2: &str = "sensor_msgs/msg/PointCloud2";
pub const IMAGE_ANNOTATIONS: &str = "foxglove_msgs/msg/ImageAnnotations";

const SEP: &str =
    "================================================================================\n";

const TIME_DEF: &str = "int32 sec\nuint32 nanosec\n";
const HEADER_DEF: &str = "builtin_interfaces/Time stamp\nstring frame_id\n";

fn with_deps(main: &str, deps: &[(&str, &str)]) -> String {
    let mut s = main.to_string();
    for (name, def) in deps {
        s.push_str(SEP);
        s.push_str("MSG: ");
        s.push_str(name);
        s.push('\n');
        s.push_str(def);
    }
    s
}

/// The `ros2msg` schema text of a message type this module knows, else `None`.
pub fn schema_text(msgtype: &str) -> Option<String> {
    let header_deps = [
        ("std_msgs/Header", HEADER_DEF),
        ("builtin_interfaces/Time", TIME_DEF),
    ];
    Some(match msgtype {
        IMAGE => with_deps(
            "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\n\
             uint8 is_bigendian\nuint32 step\nuint8[] data\n",
            &header_deps,
        ),
        COMPRESSED_IMAGE => with_deps(
            "std_msgs/Header header\nstring format\nuint8[] data\n",
            &header_deps,
        ),
        POINT_CLOUD2 => with_deps(
            "std_msgs/Header header\nuint32 height\nuint32 width\nsensor_msgs/PointField[] fields\n\
             bool is_bigendian\nuint32 point_step\nuint32 row_step\nuint8[] data\nbool is_dense\n",
            &[
                ("std_msgs/Header", HEADER_DEF),
                ("builtin_interfaces/Time", TIME_DEF),
                (
                    "sensor_msgs/PointField",
                    "uint8 INT8=1\nuint8 UINT8=2\nuint8 INT16=3\nuint8 UINT16=4\nuint8 INT32=5\n\
                     uint8 UINT32=6\nuint8 FLOAT32=7\nuint8 FLOAT64=8\n\
                     string name\nuint32 offset\nuint8 datatype\nuint32 count\n",
                ),
            ],
        ),
        IMAGE_ANNOTATIONS => with_deps(
            "foxglove_msgs/CircleAnnotation[] circles\nfoxglove_msgs/PointsAnnotation[] points\n\
             foxglove_msgs/TextAnnotation[] texts\n",
            &[
                (
                    "foxglove_msgs/CircleAnnotation",
                    "builtin_interfaces/Time timestamp\nfoxglove_msgs/Point2 position\n\
                     float64 diameter\nfloat64 thickness\nfoxglove_msgs/Color fill_color\n\
                     foxglove_msgs/Color outline_color\n",
                ),
                ("builtin_interfaces/Time", TIME_DEF),
                ("foxglove_msgs/Point2", "float64 x\nfloat64 y\n"),
                (
                    "foxglove_msgs/Color",
                    "float64 r\nfloat64 g\nfloat64 b\nfloat64 a\n",
                ),
                (
                    "foxglove_msgs/PointsAnnotation",
                    "builtin_interfaces/Time timestamp\nuint8 UNKNOWN=0\nuint8 POINTS=1\n\
                     uint8 LINE_LOOP=2\nuint8 LINE_STRIP=3\nuint8 LINE_LIST=4\nuint8 type\n\
                     foxglove_msgs/Point2[] points\nfoxglove_msgs/Color outline_color\n\
                     foxglove_msgs/Color[] outline_colors\nfoxglove_msgs/Color fill_color\n\
                     float64 thickness\n",
                ),
                (
                    "foxglove_msgs/TextAnnotation",
                    "builtin_interfaces/Time timestamp\nfoxglove_msgs/Point2 position\n\
                     string text\nfloat64 font_size\nfoxglove_msgs/Color text_color\n\
                     foxglove_msgs/Color background_color\n",
                ),
            ],
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            stamp: Time {
                sec: 1700000000,
                nanosec: 123,
            },
            frame_id: "cam".into(),
        }
    }

    #[test]
    fn image_layout_matches_ros() {
        let img = Image {
            header: header(),
            height: 2,
            width: 3,
            encoding: "mono8".into(),
            is_bigendian: 0,
            step: 3,
            data: Cow::Owned(vec![1, 2, 3, 4, 5, 6]),
        };
        let b = img.encode();
        // Encapsulation, sec, nanosec, frame_id (len 4 "cam\0"), height, width,
        // encoding (len 6 "mono8\0"), is_bigendian (+1 pad to align step), step, data len,
        // data.
        let mut want = vec![0, 1, 0, 0];
        want.extend_from_slice(&1700000000i32.to_le_bytes());
        want.extend_from_slice(&123u32.to_le_bytes());
        want.extend_from_slice(&4u32.to_le_bytes());
        want.extend_from_slice(b"cam\0");
        want.extend_from_slice(&2u32.to_le_bytes());
        want.extend_from_slice(&3u32.to_le_bytes());
        want.extend_from_slice(&6u32.to_le_bytes());
        want.extend_from_slice(b"mono8\0");
        want.extend_from_slice(&[0, 0]);
        want.extend_from_slice(&3u32.to_le_bytes());
        want.extend_from_slice(&6u32.to_le_bytes());
        want.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(b, want);
        assert_eq!(Image::decode(&b).unwrap(), img);
    }

    #[test]
    fn big_endian_is_read() {
        // Header only message: CompressedImage with big-endian encapsulation.
        let mut b = vec![0, 0, 0, 0];
        b.extend_from_slice(&7i32.to_be_bytes());
        b.extend_from_slice(&9u32.to_be_bytes());
        b.extend_from_slice(&1u32.to_be_bytes());
        b.push(0);
        b.extend_from_slice(&[0, 0, 0]);
        b.extend_from_slice(&5u32.to_be_bytes());
        b.extend_from_slice(b"jpeg\0");
        b.extend_from_slice(&[0, 0, 0]);
        b.extend_from_slice(&2u32.to_be_bytes());
        b.extend_from_slice(&[0xff, 0xd8]);
        let m = CompressedImage::decode(&b).unwrap();
        assert_eq!(m.header.stamp, Time { sec: 7, nanosec: 9 });
        assert_eq!(m.format, "jpeg");
        assert_eq!(&*m.data, &[0xff, 0xd8]);
    }

    #[test]
    fn truncated_and_garbage_are_errors() {
        let img = Image {
            header: header(),
            height: 1,
            width: 1,
            encoding: "mono8".into(),
            is_bigendian: 0,
            step: 1,
            data: Cow::Owned(vec![9]),
        };
        let b = img.encode();
        for n in 0..b.len() {
            assert!(Image::decode(&b[..n]).is_err(), "prefix {n}");
        }
        assert!(Image::decode(&[1, 2, 3, 4, 5, 6, 7, 8]).is_err());
    }

    #[test]
    fn pointcloud_and_annotations_roundtrip() {
        let pc = PointCloud2 {
            header: header(),
            height: 1,
            width: 1,
            fields: vec![PointField {
                name: "x".into(),
                offset: 0,
                datatype: 7,
                count: 1,
            }],
            is_bigendian: false,
            point_step: 4,
            row_step: 4,
            data: Cow::Owned(1.5f32.to_le_bytes().to_vec()),
            is_dense: true,
        };
        assert_eq!(PointCloud2::decode(&pc.encode()).unwrap(), pc);
        let a = ImageAnnotations {
            circles: vec![],
            points: vec![PointsAnnotation {
                timestamp: header().stamp,
                kind: POINTS,
                points: vec![Point2 { x: 1.0, y: 2.0 }],
                outline_color: Color::default(),
                outline_colors: vec![Color {
                    r: 1.0,
                    g: 0.0,
                    b: 0.0,
                    a: 1.0,
                }],
                fill_color: Color::default(),
                thickness: 3.0,
            }],
            texts: vec![TextAnnotation {
                timestamp: header().stamp,
                position: Point2 { x: 5.0, y: 6.0 },
                text: "12 keypoints".into(),
                font_size: 14.0,
                text_color: Color::default(),
                background_color: Color::default(),
            }],
        };
        assert_eq!(ImageAnnotations::decode(&a.encode()).unwrap(), a);
        for t in [IMAGE, COMPRESSED_IMAGE, POINT_CLOUD2, IMAGE_ANNOTATIONS] {
            assert!(schema_text(t).unwrap().contains('\n'));
        }
    }
}
