//! Wire-layout and round-trip tests of the messages, against hand-written CDR.

use std::borrow::Cow;

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

fn cloud() -> PointCloud2<'static> {
    PointCloud2 {
        header: header(),
        height: 1,
        width: 2,
        fields: vec![
            PointField {
                name: "x".into(),
                offset: 0,
                datatype: 7,
                count: 1,
            },
            PointField {
                name: "octave".into(),
                offset: 4,
                datatype: 5,
                count: 1,
            },
        ],
        is_bigendian: false,
        point_step: 8,
        row_step: 16,
        data: Cow::Owned((0u8..16).collect()),
        is_dense: true,
    }
}

fn annotations() -> ImageAnnotations {
    let c = Color {
        r: 0.25,
        g: 0.5,
        b: 0.75,
        a: 1.0,
    };
    ImageAnnotations {
        circles: vec![CircleAnnotation {
            timestamp: Time { sec: 3, nanosec: 4 },
            position: Point2 { x: -1.5, y: 2.5 },
            diameter: 7.0,
            thickness: 1.0,
            fill_color: c,
            outline_color: Color::default(),
        }],
        points: vec![PointsAnnotation {
            timestamp: Time { sec: 5, nanosec: 6 },
            kind: LINE_LIST,
            points: vec![Point2 { x: 1.0, y: 2.0 }, Point2 { x: 3.0, y: 4.0 }],
            outline_color: c,
            outline_colors: vec![c, Color::default()],
            fill_color: Color::default(),
            thickness: 2.0,
        }],
        texts: vec![TextAnnotation {
            timestamp: Time { sec: 7, nanosec: 8 },
            position: Point2 { x: 9.0, y: 10.0 },
            text: "hi".into(),
            font_size: 12.0,
            text_color: c,
            background_color: Color::default(),
        }],
    }
}

/// Little-endian CDR by hand, alignment counted after the 4-byte header: the layout
/// rosbag2 stores, written independently of the crate to check its output.
struct Le(Vec<u8>);
impl Le {
    fn new() -> Self {
        Le(vec![0, 1, 0, 0])
    }
    fn pad(&mut self, n: usize) -> &mut Self {
        while (self.0.len() - 4) % n != 0 {
            self.0.push(0);
        }
        self
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.pad(4).0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn f64(&mut self, v: f64) -> &mut Self {
        self.pad(8).0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u32(s.len() as u32 + 1);
        self.0.extend_from_slice(s.as_bytes());
        self.u8(0)
    }
    fn time(&mut self, t: Time) -> &mut Self {
        self.u32(t.sec as u32).u32(t.nanosec)
    }
    fn color(&mut self, c: Color) -> &mut Self {
        self.f64(c.r).f64(c.g).f64(c.b).f64(c.a)
    }
    fn point(&mut self, p: Point2) -> &mut Self {
        self.f64(p.x).f64(p.y)
    }
}

#[test]
fn pointcloud_layout_matches_ros() {
    let pc = cloud();
    let mut w = Le::new();
    w.time(pc.header.stamp).str("cam").u32(1).u32(2).u32(2);
    w.str("x").u32(0).u8(7).u32(1);
    w.str("octave").u32(4).u8(5).u32(1);
    w.u8(0).u32(8).u32(16).u32(16);
    w.0.extend(0u8..16);
    w.u8(1);
    assert_eq!(pc.encode(), w.0);
}

#[test]
fn annotations_layout_matches_ros() {
    let a = annotations();
    let mut w = Le::new();
    w.u32(1);
    let c = &a.circles[0];
    w.time(c.timestamp)
        .point(c.position)
        .f64(c.diameter)
        .f64(c.thickness);
    w.color(c.fill_color).color(c.outline_color);
    w.u32(1);
    let p = &a.points[0];
    w.time(p.timestamp).u8(p.kind).u32(2);
    for &q in &p.points {
        w.point(q);
    }
    w.color(p.outline_color).u32(2);
    for &c in &p.outline_colors {
        w.color(c);
    }
    w.color(p.fill_color).f64(p.thickness);
    w.u32(1);
    let t = &a.texts[0];
    w.time(t.timestamp)
        .point(t.position)
        .str(&t.text)
        .f64(t.font_size);
    w.color(t.text_color).color(t.background_color);
    assert_eq!(a.encode(), w.0);
}

#[test]
fn every_message_reads_in_both_byte_orders() {
    fn both<'a, T>(m: &T, le: &'a mut Vec<u8>, be: &'a mut Vec<u8>) -> (T, T)
    where
        T: Serialize + Deserialize<'a> + std::fmt::Debug + PartialEq,
    {
        *le = encode(m);
        *be = encode_with::<BigEndian, _>(m, ENCAPSULATION_BE, 0);
        assert_ne!(le, be);
        assert_eq!(le.len(), be.len());
        (
            decode(le, "le").expect("little-endian"),
            decode(be, "be").expect("big-endian"),
        )
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let img = Image {
        header: header(),
        height: 1,
        width: 2,
        encoding: "mono8".into(),
        is_bigendian: 0,
        step: 2,
        data: Cow::Owned(vec![1, 2]),
    };
    assert_eq!(both(&img, &mut a, &mut b), (img.clone(), img));
    let ci = CompressedImage {
        header: header(),
        format: "png".into(),
        data: Cow::Owned(vec![3; 5]),
    };
    assert_eq!(both(&ci, &mut a, &mut b), (ci.clone(), ci));
    let pc = cloud();
    assert_eq!(both(&pc, &mut a, &mut b), (pc.clone(), pc));
    let an = annotations();
    assert_eq!(both(&an, &mut a, &mut b), (an.clone(), an));
}

#[test]
fn data_is_borrowed_from_the_message() {
    let b = cloud().encode();
    let pc = PointCloud2::decode(&b).unwrap();
    let Cow::Borrowed(d) = pc.data else {
        panic!("data was copied")
    };
    let at = d.as_ptr() as usize - b.as_ptr() as usize;
    assert_eq!(&b[at..at + 16], d);
    let b = CompressedImage {
        header: header(),
        format: "jpeg".into(),
        data: Cow::Owned(vec![0xff, 0xd8]),
    }
    .encode();
    assert!(matches!(
        CompressedImage::decode(&b).unwrap().data,
        Cow::Borrowed(&[0xff, 0xd8])
    ));
}

#[test]
fn strings_must_end_in_nul_and_be_utf8() {
    let good = CompressedImage {
        header: header(),
        format: "png".into(),
        data: Cow::Owned(vec![]),
    }
    .encode();
    // frame_id "cam\0" is at bytes 16..20.
    let mut b = good.clone();
    b[19] = b'x';
    let e = CompressedImage::decode(&b).unwrap_err().to_string();
    assert!(e.contains("NUL") && e.contains(COMPRESSED_IMAGE), "{e}");
    let mut b = good.clone();
    b[16] = 0xff;
    let e = CompressedImage::decode(&b).unwrap_err().to_string();
    assert!(e.contains("UTF-8"), "{e}");
    // A zero length is the empty string.
    let mut b = good[..12].to_vec();
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&good[20..]);
    assert_eq!(CompressedImage::decode(&b).unwrap().header.frame_id, "");
}

#[test]
fn corrupt_counts_and_headers_are_errors() {
    let good = annotations().encode();
    // The circles count, then the points count after the circle (stamp at 4..12, padding,
    // position at 16..32, two f64, two colors: ends at 112, counted after the header).
    for at in [4, 4 + 112] {
        let mut b = good.clone();
        b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = ImageAnnotations::decode(&b).unwrap_err().to_string();
        assert!(e.contains("CDR") && e.contains("end of input"), "{at}: {e}");
    }
    let mut b = cloud().encode();
    let n = b.len();
    b[n - 1] = 2; // is_dense is a bool
    assert!(PointCloud2::decode(&b).is_err());
    for head in [[1, 1, 0, 0], [0, 2, 0, 0], [0x80, 0, 0, 0]] {
        let mut b = good.clone();
        b[..4].copy_from_slice(&head);
        let e = ImageAnnotations::decode(&b).unwrap_err().to_string();
        assert!(e.contains("encapsulation"), "{e}");
    }
    assert!(ImageAnnotations::decode(&[0, 1, 0]).is_err());
    assert!(Image::decode(&[0, 1, 0, 0]).is_err());
}
