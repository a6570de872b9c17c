//! Where the fields of a serialized `sensor_msgs/Image` lie, found without allocating or
//! copying: the node takes its images as the middleware's serialized bytes
//! ([`super::serialized`]) and reads the pixels where they are. The wire form (XCDR1, the
//! encapsulation header, alignment counted from its end) is described in
//! [`crate::bag::cdr`], whose serde decoder reads the same messages in the replay; this
//! reader is the node's per-frame one (that decoder allocates the two strings), and its
//! tests check that the two agree.

use std::ops::Range;

/// The fields of one serialized Image; the strings and the pixels as byte ranges of the
/// message (the strings without their NUL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageFields {
    pub sec: i32,
    pub nanosec: u32,
    pub frame_id: Range<usize>,
    pub height: u32,
    pub width: u32,
    pub encoding: Range<usize>,
    pub is_bigendian: u8,
    pub step: u32,
    pub data: Range<usize>,
}

struct Reader<'a> {
    msg: &'a [u8],
    /// Offset in `msg`; alignment counts from 4, the end of the encapsulation header.
    pos: usize,
    little: bool,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<Range<usize>, String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.msg.len());
        let end = end.ok_or_else(|| {
            format!(
                "the message ends inside {what} ({n} bytes at {} of {})",
                self.pos,
                self.msg.len()
            )
        })?;
        let r = self.pos..end;
        self.pos = end;
        Ok(r)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        self.pos = 4 + (self.pos - 4).next_multiple_of(4);
        let r = self.take(4, what)?;
        let b: [u8; 4] = self.msg[r].try_into().expect("4 bytes");
        Ok(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    /// A byte sequence: its count, then the bytes.
    fn bytes(&mut self, what: &str) -> Result<Range<usize>, String> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }

    /// A string: a count that includes the NUL (0 read as empty), the bytes, the NUL.
    fn string(&mut self, what: &str) -> Result<Range<usize>, String> {
        let r = self.bytes(what)?;
        if r.is_empty() {
            return Ok(r);
        }
        if self.msg[r.end - 1] != 0 {
            return Err(format!("{what} does not end in NUL"));
        }
        Ok(r.start..r.end - 1)
    }
}

/// The fields of the serialized Image `msg` (encapsulation header included). Errors: a
/// header other than plain CDR (`00 00` big-endian, `00 01` little-endian), or a message
/// that ends inside a field or whose strings do not end in NUL. Bytes after the pixels
/// are ignored, as rosbag2 readers do. The values themselves (sizes, encoding) are the
/// frame's to check ([`crate::image::ImageView::new`]).
pub fn parse(msg: &[u8]) -> Result<ImageFields, String> {
    let little = match msg.get(..2) {
        Some([0, 1]) => true,
        Some([0, 0]) => false,
        Some(h) => {
            return Err(format!(
                "encapsulation {:02x} {:02x} is not plain CDR (00 00 or 00 01)",
                h[0], h[1]
            ))
        }
        None => return Err(format!("{} bytes are no CDR message", msg.len())),
    };
    if msg.len() < 4 {
        return Err(format!("{} bytes are no CDR message", msg.len()));
    }
    let mut r = Reader {
        msg,
        pos: 4,
        little,
    };
    let sec = r.u32("header.stamp.sec")? as i32;
    let nanosec = r.u32("header.stamp.nanosec")?;
    let frame_id = r.string("header.frame_id")?;
    let height = r.u32("height")?;
    let width = r.u32("width")?;
    let encoding = r.string("encoding")?;
    let is_bigendian = msg[r.take(1, "is_bigendian")?][0];
    let step = r.u32("step")?;
    let data = r.bytes("data")?;
    Ok(ImageFields {
        sec,
        nanosec,
        frame_id,
        height,
        width,
        encoding,
        is_bigendian,
        step,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bag::cdr::{self, Header, Image, Time};
    use std::borrow::Cow;

    fn image<'a>(frame_id: &str, encoding: &str, data: &'a [u8]) -> Image<'a> {
        Image {
            header: Header {
                stamp: Time {
                    sec: -7,
                    nanosec: 999_999_999,
                },
                frame_id: frame_id.into(),
            },
            height: 3,
            width: 5,
            encoding: encoding.into(),
            is_bigendian: 1,
            step: 16,
            data: Cow::Borrowed(data),
        }
    }

    /// The replay's serde decoder and this reader find the same fields, for strings of
    /// every length modulo 4 (each shifts the alignment of what follows) and both byte
    /// orders; a message longer than its fields reads the same.
    #[test]
    fn agrees_with_the_replays_decoder() {
        let data: Vec<u8> = (0..48).map(|i| (i * 7) as u8).collect();
        for id_len in 0..9 {
            for enc in ["mono8", "bgr8", "yuv422_yuy2", ""] {
                let id: String = "camera_frame".chars().take(id_len).collect();
                let msg = image(&id, enc, &data);
                let mut le = cdr::encode(&msg);
                let be = big_endian(&msg);
                for (bytes, order) in [(&le, "LE"), (&be, "BE")] {
                    let f = parse(bytes).unwrap();
                    let back = Image::decode(bytes).unwrap();
                    let s = |r: &Range<usize>| std::str::from_utf8(&bytes[r.clone()]).unwrap();
                    assert_eq!(
                        (f.sec, f.nanosec),
                        (back.header.stamp.sec, back.header.stamp.nanosec),
                        "{order}"
                    );
                    assert_eq!(s(&f.frame_id), back.header.frame_id, "{order}");
                    assert_eq!(s(&f.encoding), back.encoding, "{order}");
                    assert_eq!(
                        (f.height, f.width, f.is_bigendian, f.step),
                        (back.height, back.width, back.is_bigendian, back.step),
                        "{order}"
                    );
                    assert_eq!(&bytes[f.data.clone()], &back.data[..], "{order}");
                }
                le.extend_from_slice(&[1, 2, 3]);
                assert_eq!(parse(&le).unwrap().data.len(), 48);
            }
        }
    }

    /// `msg` in big-endian CDR, written field by field.
    fn big_endian(msg: &Image) -> Vec<u8> {
        let mut out = vec![0u8, 0, 0, 0];
        let align = |out: &mut Vec<u8>| {
            while (out.len() - 4) % 4 != 0 {
                out.push(0);
            }
        };
        let u32 = |out: &mut Vec<u8>, v: u32| {
            align(out);
            out.extend_from_slice(&v.to_be_bytes());
        };
        let string = |out: &mut Vec<u8>, s: &str| {
            u32(out, s.len() as u32 + 1);
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        };
        u32(&mut out, msg.header.stamp.sec as u32);
        u32(&mut out, msg.header.stamp.nanosec);
        string(&mut out, &msg.header.frame_id);
        u32(&mut out, msg.height);
        u32(&mut out, msg.width);
        string(&mut out, &msg.encoding);
        out.push(msg.is_bigendian);
        u32(&mut out, msg.step);
        u32(&mut out, msg.data.len() as u32);
        out.extend_from_slice(&msg.data);
        out
    }

    /// Every prefix of a message, and messages with a broken header, string or count, are
    /// errors that say what is wrong, never a panic.
    #[test]
    fn truncated_and_broken_messages_are_errors() {
        let data = [9u8; 48];
        let full = cdr::encode(&image("cam", "bgr8", &data));
        for n in 0..full.len() {
            let e = parse(&full[..n]).unwrap_err();
            assert!(e.contains("ends inside") || e.contains("no CDR"), "{n}: {e}");
        }
        let mut xcdr2 = full.clone();
        xcdr2[1] = 7;
        assert!(parse(&xcdr2).unwrap_err().contains("not plain CDR"));
        let mut no_nul = full.clone();
        let at = 4 + 8 + 4 + 3; // the frame id's NUL
        assert_eq!(no_nul[at], 0);
        no_nul[at] = b'x';
        assert!(parse(&no_nul).unwrap_err().contains("frame_id does not end in NUL"));
        let mut huge = full.clone();
        let count = full.len() - 48 - 4;
        huge[count..count + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&huge).unwrap_err().contains("ends inside data"));
    }
}
