//! CDR (XCDR1, as ROS 2's rmw layers put on the wire and rosbag2 stores) of the few messages
//! the replay reads and writes and the node publishes as bytes, with no ROS install: a room
//! below `bag`, `output` and `ros`, which all speak these messages.
//!
//! A serialized message is a 4-byte encapsulation header (`00 01 00 00` little-endian,
//! `00 00 00 00` big-endian) and the fields in declaration order. Every primitive is aligned
//! to its own size, counted from the end of the header; strings are a `uint32` length that
//! includes the terminating NUL, the bytes and the NUL; sequences are a `uint32` count and the
//! elements. We read both byte orders and always write little-endian.
//!
//! # Crate
//!
//! The message structs derive serde's `Serialize` / `Deserialize`, and the fields are put on
//! and read off the wire by [`cdr_encoding`] 0.11.0 (crates.io `cdr-encoding`, the CDR
//! serde format of RustDDS and ros2-client). Chosen over the older `cdr` crate (0.2.4)
//! because:
//! * it deserializes from a byte slice and hands out borrowed bytes, so the pixel data of an
//!   [`Image`] (and of the other messages) stays a borrow of the bag's buffer, as it was with
//!   the hand-written reader: no copy of each frame. `cdr` reads through `std::io::Read` and
//!   copies every byte sequence into a fresh `Vec`, allocated at the length the message
//!   declares (up to 4 GiB) before it reads (or checks the limit on) the bytes;
//! * it never reserves memory from a length it has read: sequences grow element by element
//!   and byte sequences are checked against the bytes left before they are borrowed, so a
//!   corrupt count ends in "unexpected end of input", not in a huge allocation
//!   (`tests/robustness.rs` bounds the peak allocation of every decode). `cdr` passes the
//!   count on as serde's size hint (serde then reserves up to 1 MiB per sequence);
//! * it takes the byte order as a type parameter, so both encapsulations decode through the
//!   same derived code.
//!
//! Cost, measured in the test profile on the development machine: decoding a 1920x1080 bgr8
//! `Image` takes about 0.3 µs (nothing is copied), encoding it about 1.1 ms (one copy of the
//! 6 MB); an `ImageAnnotations` of 5000 points (80 kB) encodes in about 0.1 ms and decodes
//! in about 0.03 ms.
//!
//! # What is still written by hand, and why
//!
//! * The 4-byte encapsulation header ([`ENCAPSULATION_LE`], [`ENCAPSULATION_BE`]):
//!   `cdr-encoding` serializes the payload only (in RustDDS the header is part of the RTPS
//!   submessage). [`decode`] reads the header, picks the byte order, and hands the rest to the
//!   crate, whose alignment counts from the start of what it is given: the end of the header,
//!   as CDR wants. [`encode`] writes the header and lets the crate append the payload.
//! * [`bytes`]: `uint8[]` fields are `Cow<[u8]>`, which serde would otherwise serialize one
//!   `u8` at a time and deserialize into an owned `Vec`; the module sends them through
//!   `serialize_bytes` / `deserialize_bytes` (same wire form: count, then the bytes) so they
//!   are written in one copy and read as a borrow.
//! * [`string`]: `cdr-encoding` takes a string whose last byte is not NUL (it drops that
//!   byte and logs a warning), which would let a message of the wrong type decode as garbage.
//!   String fields are read as a byte sequence (the same wire form: a `uint32` count that
//!   includes the NUL, then the bytes) and must end in NUL and be UTF-8. A count of 0 is
//!   taken as the empty string, as some writers put it.
//!
//! Everything else (alignment, padding, primitives in either byte order, sequences, nested
//! structs) is the crate's. It reads `bool` strictly: a byte other than 0 or 1 is an error.
//! Bytes after the last field are ignored, as rosbag2 readers do.
//!
//! # Layout
//!
//! * `messages`: the message structs ([`Image`], [`PointCloud2`], [`ImageAnnotations`], ...).
//! * [`bytes`], [`string`]: the field codecs above.
//! * `schema`: type names and `ros2msg` schema texts ([`schema_text`]).
//! * this module: the encapsulation header, [`decode`] and [`encode`].
//!
//! May import: `error`.

use byteorder::{BigEndian, ByteOrder, LittleEndian};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub mod bytes;
mod messages;
mod schema;
pub mod string;
#[cfg(test)]
mod tests;

pub use self::messages::{
    Bool, CameraInfo, ChannelFloat32, CircleAnnotation, Color, CompressedImage, Header, Image,
    ImageAnnotations, Point2, Point32, PointCloud, PointCloud2, PointField, PointsAnnotation,
    RegionOfInterest, TextAnnotation, Time, LINE_LIST, POINTS,
};
pub use self::schema::{
    schema_text, BOOL, CAMERA_INFO, COMPRESSED_IMAGE, IMAGE, IMAGE_ANNOTATIONS, POINT_CLOUD,
    POINT_CLOUD2,
};

/// Encapsulation header of a little-endian plain CDR message (what we write).
pub const ENCAPSULATION_LE: [u8; 4] = [0, 1, 0, 0];
/// Encapsulation header of a big-endian plain CDR message.
pub const ENCAPSULATION_BE: [u8; 4] = [0, 0, 0, 0];

/// Decodes one serialized message of type `T` (`msgtype` names it in errors): the
/// encapsulation header says the byte order, the crate reads the fields after it. `T` may
/// borrow from `buf`.
pub fn decode<'a, T: Deserialize<'a>>(buf: &'a [u8], msgtype: &str) -> Result<T> {
    let (head, body) = buf.split_at_checked(4).ok_or_else(|| {
        Error::Bag(format!(
            "CDR: {msgtype} message of {} bytes has no encapsulation header",
            buf.len()
        ))
    })?;
    // The last two bytes are options, unused by plain CDR.
    let decoded = match (head[0], head[1]) {
        (0, 1) => cdr_encoding::from_bytes::<T, LittleEndian>(body),
        (0, 0) => cdr_encoding::from_bytes::<T, BigEndian>(body),
        (a, b) => {
            return Err(Error::Bag(format!(
                "CDR: {msgtype}: unsupported encapsulation {a:#04x} {b:#04x} \
                 (expected plain CDR, 00 00 or 00 01)"
            )))
        }
    };
    decoded.map(|(msg, _used)| msg).map_err(|e| {
        Error::Bag(format!(
            "CDR: cannot decode {} bytes as {msgtype}: {e}",
            buf.len()
        ))
    })
}

/// Serializes `msg` as one little-endian message: encapsulation header, then the fields.
pub fn encode<T: Serialize + ?Sized>(msg: &T) -> Vec<u8> {
    le(msg, 64)
}

/// [`encode`] into `out` (cleared first; its capacity kept from message to message: the
/// node serializes its keypoints cloud this way with no allocation per frame).
pub fn encode_into<T: Serialize + ?Sized>(msg: &T, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&ENCAPSULATION_LE);
    cdr_encoding::to_writer::<&T, LittleEndian, _>(&mut *out, &msg)
        .expect("the messages here serialize into a Vec without error");
}

/// Serializes `msg` in byte order `BO` after `header` (which must name `BO`), into a buffer
/// with room for `capacity` more bytes.
fn encode_with<BO: ByteOrder, T: Serialize + ?Sized>(
    msg: &T,
    header: [u8; 4],
    capacity: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity + 4);
    out.extend_from_slice(&header);
    // Alignment counts from the crate's first byte, i.e. from the end of the header.
    cdr_encoding::to_writer::<&T, BO, _>(&mut out, &msg)
        .expect("the messages here serialize into a Vec without error");
    out
}

fn le<T: Serialize + ?Sized>(msg: &T, capacity: usize) -> Vec<u8> {
    encode_with::<LittleEndian, T>(msg, ENCAPSULATION_LE, capacity)
}

impl<'a> Image<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        decode(buf, IMAGE)
    }
    pub fn encode(&self) -> Vec<u8> {
        le(self, self.data.len() + 64 + self.header.frame_id.len())
    }
}

impl<'a> CompressedImage<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        decode(buf, COMPRESSED_IMAGE)
    }
    pub fn encode(&self) -> Vec<u8> {
        le(self, self.data.len() + 64 + self.header.frame_id.len())
    }
}

impl<'a> PointCloud2<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        decode(buf, POINT_CLOUD2)
    }
    pub fn encode(&self) -> Vec<u8> {
        le(self, self.data.len() + 256 + self.header.frame_id.len())
    }
}

impl ImageAnnotations {
    pub fn decode(buf: &[u8]) -> Result<Self> {
        decode(buf, IMAGE_ANNOTATIONS)
    }
    pub fn encode(&self) -> Vec<u8> {
        let n: usize = self.points.iter().map(|p| 48 * p.points.len() + 128).sum();
        le(self, n + 100 * self.circles.len() + 64)
    }
}
