//! Conversions between ROS messages and the library's types. No state, no I/O.

use r2r::sensor_msgs::msg::{Image, PointCloud2, PointField};
use r2r::std_msgs::msg::Header;

use crate::error::DecodeError;
use crate::features::{Descriptor, Features, Keypoint};
use crate::image::{GrayImage, ImageView};
use crate::matching::Match;
use crate::output::{matches as output_matches, overlay, pointcloud};

/// A header stamp (`sec`, `nanosec`) in ns: the key frames are paired and traced by.
pub fn stamp_ns(sec: i32, nanosec: u32) -> i64 {
    sec as i64 * 1_000_000_000 + nanosec as i64
}

/// Validates a `sensor_msgs/Image` as a frame (short data, bad step, unknown encoding and
/// empty images are errors, never panics).
pub fn image_view(msg: &Image) -> Result<ImageView<'_>, DecodeError> {
    ImageView::new(
        &msg.data,
        msg.width as usize,
        msg.height as usize,
        msg.step as usize,
        &msg.encoding,
        msg.is_bigendian != 0,
    )
}

/// The `matches` cloud (layout: [`crate::output::matches`]). `buf` is reused.
pub fn matches_cloud(header: &Header, matches: &[Match], mut buf: Vec<u8>) -> PointCloud2 {
    output_matches::encode(matches, &mut buf);
    let step = output_matches::POINT_STEP;
    unorganized_cloud(header, &output_matches::FIELDS, step, matches.len(), buf)
}

/// The `keypoints` cloud serialized (CDR, as `PublisherUntyped::publish_raw` takes it), with
/// the message and its bytes kept from frame to frame: after the first frame of a layout
/// nothing is allocated, and the points are copied once (into the message's data, then by
/// the serializer into the bytes) instead of being converted into r2r's C message.
pub struct KeypointsCdr {
    msg: crate::cdr::PointCloud2<'static>,
    bytes: Vec<u8>,
    with_descriptors: Option<bool>,
}

impl Default for KeypointsCdr {
    fn default() -> Self {
        use crate::cdr;
        KeypointsCdr {
            msg: cdr::PointCloud2 {
                header: cdr::Header {
                    stamp: cdr::Time { sec: 0, nanosec: 0 },
                    frame_id: String::new(),
                },
                height: 1,
                width: 0,
                fields: Vec::new(),
                is_bigendian: false,
                point_step: 0,
                row_step: 0,
                data: std::borrow::Cow::Owned(Vec::new()),
                is_dense: true,
            },
            bytes: Vec::new(),
            with_descriptors: None,
        }
    }
}

impl KeypointsCdr {
    /// The serialized cloud of `keypoints` (layout: [`crate::output::pointcloud`]).
    pub fn encode(
        &mut self,
        header: &Header,
        keypoints: &[Keypoint],
        descriptors: Option<&[Descriptor]>,
    ) -> &[u8] {
        let d = descriptors.is_some();
        let m = &mut self.msg;
        if self.with_descriptors != Some(d) {
            m.fields = pointcloud::cdr_fields(pointcloud::fields(d));
            m.point_step = pointcloud::point_step(d) as u32;
            self.with_descriptors = Some(d);
        }
        m.header.stamp.sec = header.stamp.sec;
        m.header.stamp.nanosec = header.stamp.nanosec;
        m.header.frame_id.clone_from(&header.frame_id);
        pointcloud::encode(keypoints, descriptors, m.data.to_mut());
        m.width = keypoints.len() as u32;
        m.row_step = m.point_step * m.width;
        crate::cdr::encode_into(&*m, &mut self.bytes);
        &self.bytes
    }
}

/// `header` into a CDR header (its `frame_id` string reused).
fn cdr_header(header: &Header, out: &mut crate::cdr::Header) {
    out.stamp.sec = header.stamp.sec;
    out.stamp.nanosec = header.stamp.nanosec;
    out.frame_id.clone_from(&header.frame_id);
}

/// The `tracks` cloud serialized (CDR, for `publish_raw`; layout [`crate::output::tracks`],
/// not dense: NaN without a camera model), the message and its bytes kept from frame to
/// frame as [`KeypointsCdr`]'s: nothing allocated once they have grown.
pub struct TracksCdr {
    msg: crate::cdr::PointCloud2<'static>,
    bytes: Vec<u8>,
}

impl Default for TracksCdr {
    fn default() -> Self {
        use crate::cdr;
        use crate::output::tracks;
        TracksCdr {
            msg: cdr::PointCloud2 {
                header: cdr::Header::default(),
                height: 1,
                width: 0,
                fields: pointcloud::cdr_fields(&tracks::FIELDS),
                is_bigendian: false,
                point_step: tracks::POINT_STEP as u32,
                row_step: 0,
                data: std::borrow::Cow::Owned(Vec::new()),
                is_dense: false,
            },
            bytes: Vec::new(),
        }
    }
}

impl TracksCdr {
    pub fn encode(&mut self, header: &Header, tracks: &[crate::track::Track]) -> &[u8] {
        let m = &mut self.msg;
        cdr_header(header, &mut m.header);
        crate::output::tracks::encode(tracks, m.data.to_mut());
        m.width = tracks.len() as u32;
        m.row_step = m.point_step * m.width;
        crate::cdr::encode_into(&*m, &mut self.bytes);
        &self.bytes
    }
}

/// VINS's `feature` message serialized: [`crate::output::tracks::FeatureCdr`] (the replay
/// writes the same bytes) under the node's header.
#[derive(Default)]
pub struct FeatureCdr(crate::output::tracks::FeatureCdr);

impl FeatureCdr {
    /// `cameras[c]`: camera c's tracks (one camera, or left and right).
    pub fn encode(
        &mut self,
        header: &Header,
        cameras: &[&[crate::track::Track]],
        format: crate::output::tracks::VinsFormat,
        min_age: u32,
    ) -> &[u8] {
        cdr_header(header, self.0.header_mut());
        self.0.encode(cameras, format, min_age)
    }
}

/// A `height = 1`, little-endian, dense cloud of `n` points of `point_step` bytes in `data`.
fn unorganized_cloud(
    header: &Header,
    fields: &[pointcloud::Field],
    point_step: usize,
    n: usize,
    data: Vec<u8>,
) -> PointCloud2 {
    PointCloud2 {
        header: header.clone(),
        height: 1,
        width: n as u32,
        fields: fields
            .iter()
            .map(|f| PointField {
                name: f.name.to_string(),
                offset: f.offset,
                datatype: f.datatype,
                count: f.count,
            })
            .collect(),
        is_bigendian: false,
        point_step: point_step as u32,
        row_step: (point_step * n) as u32,
        data,
        is_dense: true,
    }
}

/// A `sensor_msgs/Image` serialized (CDR, for `publish_raw`) with its strings and bytes kept
/// from frame to frame: the pixels are copied once, by the serializer, where r2r's typed
/// publication copied them into a new `Vec`, then into its C message, then into the
/// middleware's sample (the 2 MB edge map of a 1080p frame).
///
/// The edge map can also be written by the pipeline straight into the message's bytes
/// ([`ImageCdr::mono8_in_place`], `Pipeline::process_into_edges`): no copy of ours at all.
#[derive(Default)]
pub struct ImageCdr {
    header: crate::cdr::Header,
    encoding: String,
    bytes: Vec<u8>,
    /// The serialized head of an in-place message (all but its pixels).
    head: Vec<u8>,
    /// Where the in-place message lies in `bytes`.
    span: std::ops::Range<usize>,
    /// The tracking picture, drawn into this buffer frame after frame.
    picture: overlay::RgbImage,
}

impl ImageCdr {
    /// `pixels` (rows of `step` bytes) as an Image of `encoding`, little-endian.
    fn encode(
        &mut self,
        header: &Header,
        encoding: &str,
        (width, height, step): (usize, usize, usize),
        pixels: &[u8],
    ) -> &[u8] {
        use crate::cdr;
        cdr_header(header, &mut self.header);
        self.encoding.clear();
        self.encoding.push_str(encoding);
        let msg = cdr::Image {
            header: std::mem::take(&mut self.header),
            height: height as u32,
            width: width as u32,
            encoding: std::mem::take(&mut self.encoding),
            is_bigendian: 0,
            step: step as u32,
            data: std::borrow::Cow::Borrowed(pixels),
        };
        cdr::encode_into(&msg, &mut self.bytes);
        (self.header, self.encoding) = (msg.header, msg.encoding);
        &self.bytes
    }

    /// A `mono8` Image of `width` x `height` whose pixels the caller writes into the slice
    /// returned (the pipeline's edge map, `Pipeline::process_into_edges`), then publishes
    /// [`ImageCdr::in_place`]. The head is serialized here; the pixels' bytes are kept from
    /// frame to frame, not cleared (the caller overwrites them all), and start 16-byte
    /// aligned, so that the edge map's unpack can use its streaming stores.
    pub fn mono8_in_place(&mut self, header: &Header, width: usize, height: usize) -> &mut [u8] {
        let n = width * height;
        // The head: the Image with no pixels, then the sequence's length made the real one
        // (the last field: its length is the head's last 4 bytes, little-endian).
        std::mem::swap(&mut self.head, &mut self.bytes);
        self.encode(header, "mono8", (width, height, width), &[]);
        std::mem::swap(&mut self.head, &mut self.bytes);
        let head = self.head.len();
        self.head[head - 4..].copy_from_slice(&(n as u32).to_le_bytes());
        // Room for the message 16-byte aligned anywhere in the first 16 bytes; grown (and
        // zero-filled) only when too short.
        let need = 15 + head + n;
        if self.bytes.len() < need {
            self.bytes.resize(need, 0);
        }
        let lead = (16 - (self.bytes.as_ptr() as usize + head) % 16) % 16;
        self.span = lead..lead + head + n;
        self.bytes[lead..lead + head].copy_from_slice(&self.head);
        &mut self.bytes[lead + head..lead + head + n]
    }

    /// The message of the last [`ImageCdr::mono8_in_place`], its pixels as written since.
    pub fn in_place(&self) -> &[u8] {
        &self.bytes[self.span.clone()]
    }

    /// A packed gray image (the edge map) as a `mono8` Image.
    pub fn mono8(&mut self, header: &Header, img: &GrayImage) -> &[u8] {
        let size = (img.width, img.height, img.width);
        self.encode(header, "mono8", size, &img.data)
    }

    /// The `debug_image`: the CLI's overlay picture (`output::overlay`) as a bgr8 Image.
    pub fn debug_overlay(
        &mut self,
        header: &Header,
        gray: &GrayImage,
        features: &Features,
    ) -> &[u8] {
        let mut pic = overlay::render(gray, features);
        pic.to_bgr_in_place();
        let size = (pic.width, pic.height, pic.width * 3);
        self.encode(header, "bgr8", size, &pic.data)
    }

    /// The debug image with tracking on: VINS-Fusion's tracking picture
    /// ([`overlay::render_tracks`]: the right camera beside the left in stereo) as `bgr8`.
    pub fn tracking_overlay(
        &mut self,
        header: &Header,
        (left, right): (&GrayImage, Option<&GrayImage>),
        tracks: (&[crate::track::Track], &[crate::track::Track]),
        prev: &std::collections::HashMap<u64, (f32, f32)>,
    ) -> &[u8] {
        let mut pic = std::mem::take(&mut self.picture);
        overlay::render_tracks(&mut pic, left, right, tracks, prev);
        pic.to_bgr_in_place();
        let size = (pic.width, pic.height, pic.width * 3);
        self.encode(header, "bgr8", size, &pic.data);
        self.picture = pic;
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            stamp: r2r::builtin_interfaces::msg::Time {
                sec: 12,
                nanosec: 34,
            },
            frame_id: "cam".into(),
        }
    }

    #[test]
    fn malformed_images_are_errors() {
        let mut m = Image {
            header: header(),
            height: 4,
            width: 4,
            encoding: "mono8".into(),
            is_bigendian: 0,
            step: 4,
            data: vec![0; 16],
        };
        assert!(image_view(&m).is_ok());
        m.data.truncate(15);
        assert!(matches!(
            image_view(&m),
            Err(DecodeError::BufferTooShort { .. })
        ));
        m.data = vec![0; 16];
        m.step = 3;
        assert!(matches!(
            image_view(&m),
            Err(DecodeError::StepTooSmall { .. })
        ));
        m.step = 4;
        m.encoding = "bayer_rggb8".into();
        assert!(matches!(
            image_view(&m),
            Err(DecodeError::UnknownEncoding(_))
        ));
        m.encoding = "mono8".into();
        m.width = 0;
        m.height = 0;
        assert!(matches!(image_view(&m), Err(DecodeError::ZeroSize { .. })));
    }

    fn track(id: u64, x: f32, camera: bool) -> crate::track::Track {
        crate::track::Track {
            id,
            x,
            y: x + 1.0,
            x_n: if camera { x as f64 * 0.01 } else { f64::NAN },
            y_n: 0.25,
            vx: 0.5,
            vy: -0.5,
            px_vx: 1.0,
            px_vy: 2.0,
            age: 3,
        }
    }

    /// The `feature` and `tracks` bytes decode to what `vins_feature` and `output::tracks`
    /// say, frame after frame with the buffers reused (mono, then stereo, then the other
    /// format).
    #[test]
    fn feature_and_tracks_bytes_decode_to_their_messages() {
        use crate::cdr;
        use crate::output::tracks::{self as out, VinsFormat};
        let (mut f, mut t) = (FeatureCdr::default(), TracksCdr::default());
        let left = [
            track(7, 10.0, true),
            track(8, 20.0, false),
            track(9, 30.0, true),
        ];
        let right = [track(7, 12.0, true)];
        for (cams, format) in [
            (&[&left[..]][..], VinsFormat::Fusion),
            (&[&left[..], &right[..]][..], VinsFormat::Fusion),
            (&[&left[..2]][..], VinsFormat::Mono),
        ] {
            let bytes = f.encode(&header(), cams, format, 1).to_vec();
            let m: cdr::PointCloud = cdr::decode(&bytes, "sensor_msgs/PointCloud").unwrap();
            let want = out::vins_feature(cams, format);
            assert_eq!(m.header.frame_id, "cam");
            assert_eq!((m.header.stamp.sec, m.header.stamp.nanosec), (12, 34));
            let pts: Vec<[f32; 3]> = m.points.iter().map(|p| [p.x, p.y, p.z]).collect();
            assert_eq!(pts, want.points);
            let names: Vec<&str> = m.channels.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, format.channels());
            let values: Vec<Vec<f32>> = m.channels.into_iter().map(|c| c.values).collect();
            assert_eq!(values, want.channels);
            let bytes = t.encode(&header(), cams[0]).to_vec();
            let c = cdr::PointCloud2::decode(&bytes).unwrap();
            let mut data = Vec::new();
            out::encode(cams[0], &mut data);
            assert_eq!((c.width as usize, &c.data[..]), (cams[0].len(), &data[..]));
            assert_eq!(
                (c.point_step as usize, c.is_dense),
                (out::POINT_STEP, false)
            );
            assert_eq!(c.fields.len(), out::FIELDS.len());
        }
    }

    #[test]
    fn cloud_matches_layout() {
        let kps = [Keypoint {
            x: 3.0,
            y: 4.0,
            response: 0.5,
            size: 31.0,
            angle: 90.0,
            octave: 1,
        }];
        let mut w = KeypointsCdr::default();
        let bytes = w.encode(&header(), &kps, None).to_vec();
        let c = crate::cdr::PointCloud2::decode(&bytes).unwrap();
        assert_eq!(
            (
                c.header.stamp.sec,
                c.header.stamp.nanosec,
                c.header.frame_id.as_str()
            ),
            (
                header().stamp.sec,
                header().stamp.nanosec,
                header().frame_id.as_str()
            )
        );
        assert_eq!(
            (c.width, c.height, c.point_step, c.row_step, c.is_dense),
            (1, 1, 28, 28, true)
        );
        assert_eq!(c.fields.len(), 7);
        assert_eq!(
            (c.fields[5].name.as_str(), c.fields[6].name.as_str()),
            ("octave", "z")
        );
        assert_eq!(
            pointcloud::decode(&c.data, 28).unwrap(),
            (kps.to_vec(), vec![])
        );
        // The same writer, now with descriptors (the layout changes), then without again.
        let d = [[0x5au8; 32]];
        let bytes = w.encode(&header(), &kps, Some(&d)).to_vec();
        let c = crate::cdr::PointCloud2::decode(&bytes).unwrap();
        assert_eq!(
            (c.width, c.point_step, c.row_step, c.data.len()),
            (1, 60, 60, 60)
        );
        let f = &c.fields[7];
        assert_eq!(
            (f.name.as_str(), f.offset, f.datatype, f.count),
            ("descriptor", 28, 2, 32)
        );
        assert_eq!(
            pointcloud::decode(&c.data, 60).unwrap(),
            (kps.to_vec(), d.to_vec())
        );
        let two = [kps[0], kps[0]];
        let c2 = w.encode(&header(), &two, None).to_vec();
        let c2 = crate::cdr::PointCloud2::decode(&c2).unwrap();
        assert_eq!((c2.width, c2.point_step, c2.fields.len()), (2, 28, 7));
        let g = GrayImage::new(8, 8);
        let features = Features {
            keypoints: kps.to_vec(),
            edges: Some(g.clone()),
            ..Default::default()
        };
        let mut enc = ImageCdr::default();
        let d = crate::cdr::Image::decode(enc.debug_overlay(&header(), &g, &features))
            .unwrap()
            .data
            .len();
        assert_eq!(d, 8 * 8 * 3);
    }

    /// The edge map's and the debug image's bytes decode to their Images, frame after frame
    /// with the buffers reused (a longer frame id, another size); the second frame of a size
    /// allocates nothing (the bytes keep their address).
    #[test]
    fn image_bytes_decode_to_their_images() {
        use crate::cdr;
        let mut enc = ImageCdr::default();
        let mut g = GrayImage::new(5, 3);
        for (i, v) in g.data.iter_mut().enumerate() {
            *v = (i * 17) as u8;
        }
        let mut h = header();
        for round in 0..3 {
            if round == 2 {
                h.frame_id = "a longer frame id".into();
                g = GrayImage::new(7, 2);
                g.data.fill(255);
            }
            let bytes = enc.mono8(&h, &g).to_vec();
            let m = cdr::Image::decode(&bytes).unwrap();
            assert_eq!(
                (m.width, m.height, m.step),
                (g.width as u32, g.height as u32, g.width as u32)
            );
            assert_eq!((m.encoding.as_str(), m.is_bigendian), ("mono8", 0));
            assert_eq!(m.header.frame_id, h.frame_id);
            assert_eq!((m.header.stamp.sec, m.header.stamp.nanosec), (12, 34));
            assert_eq!(&m.data[..], &g.data[..]);
        }
        let at = enc.mono8(&h, &g).as_ptr();
        assert_eq!(enc.mono8(&h, &g).as_ptr(), at, "reused");
        let features = Features::default();
        let d = enc.debug_overlay(&h, &g, &features).to_vec();
        let m = cdr::Image::decode(&d).unwrap();
        assert_eq!(
            (m.encoding.as_str(), m.step, m.data.len()),
            ("bgr8", 21, 42)
        );
        let mut want = overlay::render(&g, &features);
        want.to_bgr_in_place();
        assert_eq!(&m.data[..], &want.data[..]);
    }

    /// The in-place edge message is byte for byte the one `mono8` serializes, whatever came
    /// before in the buffer (another size, a longer frame id, the debug image); its pixels
    /// start 16-byte aligned, and a second frame of a size keeps the address.
    #[test]
    fn in_place_edges_are_the_serialized_image() {
        let mut enc = ImageCdr::default();
        let mut plain = ImageCdr::default();
        let mut h = header();
        for (round, (w, hh)) in [(16, 4), (16, 4), (5, 3), (64, 9), (16, 4)]
            .into_iter()
            .enumerate()
        {
            if round == 3 {
                h.frame_id = "a much longer frame id".into();
            }
            if round == 2 {
                let _ = enc.debug_overlay(&h, &GrayImage::new(9, 9), &Features::default());
            }
            let mut g = GrayImage::new(w, hh);
            for (i, v) in g.data.iter_mut().enumerate() {
                *v = (i * 31 + round) as u8;
            }
            let px = enc.mono8_in_place(&h, w, hh);
            assert_eq!(px.len(), w * hh);
            assert_eq!(
                px.as_ptr() as usize % 16,
                0,
                "round {round}: aligned pixels"
            );
            px.copy_from_slice(&g.data);
            let at = px.as_ptr();
            assert_eq!(enc.in_place(), plain.mono8(&h, &g), "round {round}");
            if round == 1 {
                assert_eq!(enc.mono8_in_place(&h, w, hh).as_ptr(), at, "reused");
            }
        }
    }
}
