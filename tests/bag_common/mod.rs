//! Helpers shared by the bag tests: real frames (a camera pan over the graf1 photo from
//! tests/data), bag writers, and the check that an output bag carries the library's results.
#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpu_features::bag::writer::{write_metadata_yaml, Db3Writer, McapBagWriter};
use gpu_features::bag::StorageKind;
use gpu_features::cdr::{self, Header, Time};
use gpu_features::output::pointcloud;
use gpu_features::replay;
use gpu_features::{BackendChoice, Config, ImageView, Pipeline};

pub const T0: u64 = 1_700_000_000_250_000_000;
pub const PERIOD: u64 = 33_333_333;

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A fresh scratch directory under target/.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One RGB frame.
#[derive(Clone)]
pub struct Frame {
    pub rgb: Vec<u8>,
    pub width: usize,
    pub height: usize,
}

impl Frame {
    pub fn bgr(&self) -> Vec<u8> {
        self.rgb
            .chunks_exact(3)
            .flat_map(|p| [p[2], p[1], p[0]])
            .collect()
    }
    /// The frame in gray as the library decodes it (`cpu::decode::gray_from_rgb`).
    pub fn gray(&self) -> gpu_features::GrayImage {
        let px = self.rgb.chunks_exact(3);
        let px = px.map(|p| gpu_features::cpu::decode::gray_from_rgb(p[0], p[1], p[2]));
        gpu_features::GrayImage::from_vec(self.width, self.height, px.collect()).unwrap()
    }
    pub fn png(&self) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        ::image::write_buffer_with_format(
            &mut out,
            &self.rgb,
            self.width as u32,
            self.height as u32,
            ::image::ExtendedColorType::Rgb8,
            ::image::ImageFormat::Png,
        )
        .unwrap();
        out.into_inner()
    }
}

/// `n` frames of a camera pan (w x h windows moving 5 px right, 3 px down per frame) over a
/// real photo.
pub fn pan(photo: &str, n: usize, w: usize, h: usize) -> Vec<Frame> {
    let img = gpu_features::image::load_view_owned(&data(photo)).unwrap();
    assert_eq!(img.encoding, gpu_features::Encoding::Rgb8);
    (0..n)
        .map(|i| {
            let (x0, y0) = ((5 * i).min(img.width - w), (3 * i).min(img.height - h));
            let mut rgb = Vec::with_capacity(w * h * 3);
            for y in y0..y0 + h {
                let row = &img.data[(y * img.width + x0) * 3..(y * img.width + x0 + w) * 3];
                rgb.extend_from_slice(row);
            }
            Frame {
                rgb,
                width: w,
                height: h,
            }
        })
        .collect()
}

pub fn header(i: usize) -> Header {
    Header {
        stamp: Time::from_nanos(T0 + i as u64 * PERIOD),
        frame_id: "camera".into(),
    }
}

pub fn log_time(i: usize) -> u64 {
    T0 + i as u64 * PERIOD + 1_000_000
}

pub fn image_msg(i: usize, f: &Frame) -> Vec<u8> {
    cdr::Image {
        header: header(i),
        height: f.height as u32,
        width: f.width as u32,
        encoding: "bgr8".into(),
        is_bigendian: 0,
        step: (f.width * 3) as u32,
        data: Cow::Owned(f.bgr()),
    }
    .encode()
}

pub fn compressed_msg(i: usize, f: &Frame) -> Vec<u8> {
    cdr::CompressedImage {
        header: header(i),
        format: "rgb8; png compressed rgb8".into(),
        data: Cow::Owned(f.png()),
    }
    .encode()
}

pub fn string_msg(s: &str) -> Vec<u8> {
    // A std_msgs/msg/String: one string field.
    cdr::encode(s)
}

pub const RAW: &str = "/cam/image_raw";
pub const COMPRESSED: &str = "/cam/image_raw/compressed";
pub const CHATTER: &str = "/chatter";

/// An MCAP file with a bgr8 Image topic, a png CompressedImage topic (when `compressed`)
/// and a String topic.
pub fn write_mcap(path: &Path, frames: &[Frame], compressed: bool) {
    let mut w = McapBagWriter::create(path).unwrap();
    let raw = w.channel(RAW, cdr::IMAGE).unwrap();
    let comp = compressed.then(|| w.channel(COMPRESSED, cdr::COMPRESSED_IMAGE).unwrap());
    let chat = w
        .channel_with_schema(CHATTER, "std_msgs/msg/String", "string data\n")
        .unwrap();
    for (i, f) in frames.iter().enumerate() {
        let t = log_time(i);
        w.write(raw, t, t, &image_msg(i, f)).unwrap();
        if let Some(c) = comp {
            w.write(c, t, t, &compressed_msg(i, f)).unwrap();
        }
        w.write(chat, t, t, &string_msg(&format!("frame {i}")))
            .unwrap();
    }
    w.finish().unwrap();
}

/// A rosbag2 sqlite3 bag directory (metadata.yaml + one .db3).
pub fn write_db3_dir(dir: &Path, frames: &[Frame], compressed: bool) {
    std::fs::create_dir_all(dir).unwrap();
    let name = "bag_0.db3";
    let mut w = Db3Writer::create(&dir.join(name)).unwrap();
    let raw = w.topic(RAW, cdr::IMAGE).unwrap();
    let comp = compressed.then(|| w.topic(COMPRESSED, cdr::COMPRESSED_IMAGE).unwrap());
    let chat = w.topic(CHATTER, "std_msgs/msg/String").unwrap();
    for (i, f) in frames.iter().enumerate() {
        let t = log_time(i);
        w.write(raw, t, &image_msg(i, f)).unwrap();
        if let Some(c) = comp {
            w.write(c, t, &compressed_msg(i, f)).unwrap();
        }
        w.write(chat, t, &string_msg("x")).unwrap();
    }
    w.finish().unwrap();
    let n = frames.len() as u64;
    let mut topics = vec![
        (RAW.to_string(), cdr::IMAGE.to_string(), n),
        (CHATTER.to_string(), "std_msgs/msg/String".to_string(), n),
    ];
    if compressed {
        topics.push((COMPRESSED.into(), cdr::COMPRESSED_IMAGE.into(), n));
    }
    write_metadata_yaml(
        dir,
        StorageKind::Sqlite3,
        &[name],
        &topics,
        log_time(0),
        log_time(frames.len() - 1),
    )
    .unwrap();
}

pub fn options(bag: &Path, out: &Path) -> replay::ReplayOptions {
    let mut o = replay::ReplayOptions::new(bag, out);
    o.backend = BackendChoice::Cpu;
    o.progress = false;
    o
}

/// One message of the output bag.
pub struct OutMsg {
    pub schema: String,
    pub schema_encoding: String,
    pub message_encoding: String,
    pub log_time: u64,
    pub publish_time: u64,
    pub data: Vec<u8>,
}

pub fn read_out(path: &Path) -> BTreeMap<String, Vec<OutMsg>> {
    let buf = std::fs::read(path).unwrap();
    let mut out: BTreeMap<String, Vec<OutMsg>> = BTreeMap::new();
    for m in mcap::MessageStream::new(&buf).unwrap() {
        let m = m.unwrap();
        let s = m.channel.schema.as_ref().unwrap();
        out.entry(m.channel.topic.clone())
            .or_default()
            .push(OutMsg {
                schema: s.name.clone(),
                schema_encoding: s.encoding.clone(),
                message_encoding: m.channel.message_encoding.clone(),
                log_time: m.log_time,
                publish_time: m.publish_time,
                data: m.data.into_owned(),
            });
    }
    out
}

/// Checks the output bag for input topic `topic`: `n` frames, the input's stamps and log
/// times, ROS schemas, and keypoints / edges equal to the library's (CPU) on the same image
/// data, decoded from the output bag's copy of the input. Returns the keypoint counts.
pub fn check_topic(
    out: &BTreeMap<String, Vec<OutMsg>>,
    topic: &str,
    n: usize,
    stamps: &[u64],
    log_times: &[u64],
    config: &Config,
) -> Vec<usize> {
    let imgs = &out[topic];
    let kps = &out[&replay::keypoints_topic(topic)];
    let edges = &out[&replay::edges_topic(topic)];
    let anns = &out[&replay::annotations_topic(topic)];
    assert_eq!(imgs.len(), n, "{topic} images");
    assert_eq!(kps.len(), n, "{topic} keypoints");
    assert_eq!(edges.len(), n, "{topic} edges");
    assert_eq!(anns.len(), n, "{topic} annotations");
    for m in kps.iter().chain(edges).chain(anns).chain(imgs) {
        assert_eq!(m.schema_encoding, "ros2msg");
        assert_eq!(m.message_encoding, "cdr");
    }
    assert_eq!(kps[0].schema, "sensor_msgs/msg/PointCloud2");
    assert_eq!(edges[0].schema, "sensor_msgs/msg/Image");
    assert_eq!(anns[0].schema, "foxglove_msgs/msg/ImageAnnotations");
    let mut pipeline = Pipeline::new(config.clone(), BackendChoice::Cpu).unwrap();
    let mut counts = Vec::new();
    for i in 0..n {
        assert_eq!(imgs[i].log_time, log_times[i]);
        assert_eq!(kps[i].log_time, log_times[i]);
        assert_eq!(kps[i].publish_time, imgs[i].publish_time);
        assert_eq!(edges[i].log_time, log_times[i]);
        let frame = replay::decode_frame(&imgs[i].schema, &imgs[i].data)
            .unwrap()
            .ok()
            .unwrap();
        assert_eq!(
            frame.header().stamp.as_nanos(),
            stamps[i],
            "frame {i} stamp"
        );
        let view: ImageView = frame.view().unwrap();
        let want = pipeline.process(&view).unwrap();

        let pc = cdr::PointCloud2::decode(&kps[i].data).unwrap();
        assert_eq!(pc.header, *frame.header());
        assert_eq!(pc.height, 1);
        assert_eq!(pc.width as usize, want.keypoints.len());
        let described = want.descriptors_for(config);
        let step = pointcloud::point_step(described.is_some());
        assert_eq!(pc.point_step as usize, step);
        assert_eq!(pc.row_step as usize, pc.data.len());
        assert!(pc.is_dense && !pc.is_bigendian);
        let names: Vec<&str> = pc.fields.iter().map(|f| f.name.as_str()).collect();
        let want_names: Vec<&str> = pointcloud::fields(described.is_some())
            .iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, want_names);
        let mut bytes = Vec::new();
        pointcloud::encode(&want.keypoints, described, &mut bytes);
        assert_eq!(&*pc.data, &bytes[..], "frame {i}: keypoint bytes differ");
        let (got_kps, got_desc) = pointcloud::decode(&pc.data, step).unwrap();
        assert_eq!(got_kps, want.keypoints);
        assert_eq!(got_desc, described.unwrap_or_default());

        let e = cdr::Image::decode(&edges[i].data).unwrap();
        let we = want.edges.as_ref().unwrap();
        assert_eq!((e.width as usize, e.height as usize), (we.width, we.height));
        assert_eq!(e.encoding, "mono8");
        assert_eq!(&*e.data, &we.data[..], "frame {i}: edges differ");
        assert_eq!(e.header, *frame.header());

        let a = cdr::ImageAnnotations::decode(&anns[i].data).unwrap();
        assert_eq!(a.points[0].points.len(), want.keypoints.len());
        assert_eq!(a.points[0].timestamp, frame.header().stamp);
        counts.push(want.keypoints.len());
    }
    counts
}

/// No finished or half-written output in `dir`.
pub fn assert_no_output(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                !name.contains("out.mcap") && !name.starts_with("report"),
                "{} left {name}",
                dir.display()
            );
        }
    }
}
