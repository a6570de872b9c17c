//! `replay` as VINS-Fusion's front-end: with `track.stereo` two image topics paired by stamp
//! and tracked as VINS-Fusion's stereo mode, whatever order the bag holds the two cameras'
//! frames in (a first-camera frame without a partner tracked alone; the `feature` bytes
//! equal the library tracker's on the same frames); `track.feature_every` counting from
//! the tracker's restarts.

mod bag_common;

use bag_common::*;
use gpu_features::camera::CameraModel;
use gpu_features::output::tracks::{FeatureCdr, VinsFormat};
use gpu_features::replay;
use gpu_features::track::{TrackParams, Tracker};
use gpu_features::Config;
use gpu_features::{bag, cdr};

const LEFT: &str = "/cam0/image_raw";
const RIGHT: &str = "/cam1/image_raw";
const K: [f64; 9] = [300.0, 0.0, 160.0, 0.0, 300.0, 120.0, 0.0, 0.0, 1.0];
const D: [f64; 5] = [-0.2, 0.05, 0.001, -0.0005, 0.0];

/// The second camera: the first's view 7 px to the right (a disparity), same pan.
fn right_frames(n: usize) -> Vec<Frame> {
    let img = gpu_features::image::load_view_owned(&data("graf1.png")).unwrap();
    let (w, h) = (320, 240);
    (0..n)
        .map(|i| {
            let (x0, y0) = (5 * i + 7, 3 * i);
            let mut rgb = Vec::with_capacity(w * h * 3);
            for y in y0..y0 + h {
                rgb.extend_from_slice(
                    &img.data[(y * img.width + x0) * 3..(y * img.width + x0 + w) * 3],
                );
            }
            Frame {
                rgb,
                width: w,
                height: h,
            }
        })
        .collect()
}

fn info(i: usize) -> Vec<u8> {
    cdr::encode(&cdr::CameraInfo {
        header: header(i),
        height: 240,
        width: 320,
        distortion_model: "plumb_bob".into(),
        d: D.to_vec(),
        k: K,
        ..Default::default()
    })
}

#[test]
fn stereo_pairs_by_stamp_in_any_order_and_equals_the_library() {
    let dir = scratch("replay_stereo");
    let n = 6;
    let left = pan("graf1.png", n, 320, 240);
    let right = right_frames(n);
    // Per frame: which cameras, in which order (frame 3 has no second-camera frame).
    let order: [&[usize]; 6] = [&[0, 1], &[1, 0], &[0, 1], &[0], &[1, 0], &[0, 1]];
    let bag_path = dir.join("in.mcap");
    {
        let mut w = bag::writer::McapBagWriter::create(&bag_path).unwrap();
        let ch = [
            w.channel(LEFT, cdr::IMAGE).unwrap(),
            w.channel(RIGHT, cdr::IMAGE).unwrap(),
        ];
        let ci = [
            w.channel("/cam0/camera_info", cdr::CAMERA_INFO).unwrap(),
            w.channel("/cam1/camera_info", cdr::CAMERA_INFO).unwrap(),
        ];
        for c in ci {
            w.write(c, log_time(0) - 1, log_time(0) - 1, &info(0))
                .unwrap();
        }
        for (i, cams) in order.iter().enumerate() {
            for &c in cams.iter() {
                let f = if c == 0 { &left[i] } else { &right[i] };
                w.write(ch[c], log_time(i), log_time(i), &image_msg(i, f))
                    .unwrap();
            }
        }
        w.finish().unwrap();
    }
    let out = dir.join("out");
    let mut o = options(&bag_path, &out);
    o.topics = vec![LEFT.into(), RIGHT.into()];
    o.config = Config::default()
        .with_set("track.enabled=true")
        .unwrap()
        .with_set("track.stereo=true")
        .unwrap();
    let s = replay::run(&o).unwrap();
    let msgs = read_out(&s.out_bag);
    let feats = &msgs[&replay::feature_topic(LEFT)];
    assert_eq!(feats.len(), n, "one feature message per first-camera frame");
    assert!(
        !msgs.contains_key(&replay::feature_topic(RIGHT)),
        "the second camera's points ride in the first's message"
    );
    assert_eq!(
        msgs[&replay::tracks_topic(RIGHT)].len(),
        n - 1,
        "right tracks per pair"
    );

    let cam = CameraModel::from_camera_info(320, 240, "plumb_bob", &K, &D).unwrap();
    let mut lib = Tracker::new(TrackParams::from_config(&o.config.track));
    let mut enc = FeatureCdr::default();
    for (i, cams) in order.iter().enumerate() {
        let h = header(i);
        let stamp = h.stamp.sec as f64 + h.stamp.nanosec as f64 * 1e-9;
        let tracks = lib.track(&left[i].gray(), stamp, Some(&cam)).to_vec();
        *enc.header_mut() = h;
        let want = if cams.len() == 2 {
            lib.track_right(&right[i].gray(), Some(&cam)).unwrap();
            let r = lib.right_tracks().to_vec();
            assert!(r.len() > 20, "frame {i}: {} right tracks", r.len());
            enc.encode(&[&tracks, &r], VinsFormat::Fusion, 1).to_vec()
        } else {
            enc.encode(&[&tracks], VinsFormat::Fusion, 1).to_vec()
        };
        assert_eq!(feats[i].data, want, "frame {i}");
        let pc: cdr::PointCloud = cdr::decode(&want, cdr::POINT_CLOUD).unwrap();
        let second = pc.channels[1].values.iter().filter(|&&c| c == 1.0).count();
        assert_eq!(
            second > 0,
            cams.len() == 2,
            "frame {i}: {second} second-camera points"
        );
    }
}

#[test]
fn stereo_needs_two_topics() {
    let dir = scratch("replay_stereo_one");
    let frames = pan("graf1.png", 2, 320, 240);
    let bag_path = dir.join("in.mcap");
    write_mcap(&bag_path, &frames, false);
    let mut o = options(&bag_path, &dir.join("out"));
    o.topics = vec![RAW.into()];
    o.config = Config::default().with_set("track.stereo=true").unwrap();
    o.config.track.enabled = true;
    let e = replay::run(&o).unwrap_err().to_string();
    assert!(e.contains("track.stereo pairs two image topics"), "{e}");
}

/// A bag of one camera on `RAW` with its `camera_info` first: frame `n` stamped as frame
/// `at[n].0` and logged at frame `at[n].1`'s time.
fn camera_bag(path: &std::path::Path, frames: &[Frame], at: &[(usize, usize)]) {
    let mut w = bag::writer::McapBagWriter::create(path).unwrap();
    let raw = w.channel(RAW, cdr::IMAGE).unwrap();
    let ci = w.channel("/cam/camera_info", cdr::CAMERA_INFO).unwrap();
    w.write(ci, log_time(0) - 1, log_time(0) - 1, &info(0))
        .unwrap();
    for (f, &(stamp, log)) in frames.iter().zip(at) {
        w.write(raw, log_time(log), log_time(log), &image_msg(stamp, f))
            .unwrap();
    }
    w.finish().unwrap();
}

/// `track.feature_every: 2`: the 2nd, 4th, ... frame since the start or a restart (here
/// the time going back on frame 3) has its `feature` message, the same bytes as with 1.
#[test]
fn feature_every_counts_from_the_restart() {
    let dir = scratch("replay_feature_every");
    let frames = pan("graf1.png", 6, 320, 240);
    let stamps = [0usize, 1, 2, 1, 2, 3];
    let bag_path = dir.join("in.mcap");
    // Stamps go back on frame 3; the log times keep going forward.
    let at: Vec<(usize, usize)> = stamps.iter().enumerate().map(|(n, &i)| (i, n)).collect();
    camera_bag(&bag_path, &frames, &at);
    let run = |every: u32| {
        let out = dir.join(format!("out{every}"));
        let mut o = options(&bag_path, &out);
        o.config = Config::default()
            .with_set("track.enabled=true")
            .unwrap()
            .with_set(&format!("track.feature_every={every}"))
            .unwrap();
        let msgs = read_out(&replay::run(&o).unwrap().out_bag);
        let restarts = msgs.get(&replay::restart_topic(RAW)).map_or(0, Vec::len);
        let feats: Vec<Vec<u8>> = msgs[&replay::feature_topic(RAW)]
            .iter()
            .map(|m| m.data.clone())
            .collect();
        (feats, restarts)
    };
    let (all, restarts) = run(1);
    assert_eq!((all.len(), restarts), (6, 1));
    let (half, _) = run(2);
    assert_eq!(half, vec![all[1].clone(), all[4].clone()]);
}

/// `track.frontend: vins_mono` (config/vins_mono.yaml, 30 Hz frames, freq 10): the first
/// frame only starts the clock, every third frame after it gets VINS-Mono's mask, new
/// corners and a `feature` message in VINS-Mono's layout (the first not sent) with only the
/// tracks seen twice; a 1.3 s gap sends `restart` instead of its frame. The replay's bytes
/// are the library tracker's driven by `FeatureGate`, frame for frame.
#[test]
fn vins_mono_frontend_gates_frames_as_vins_mono() {
    use gpu_features::output::gate::{Before, FeatureGate};
    let dir = scratch("replay_vins_mono");
    let stamps = [0usize, 1, 2, 3, 4, 5, 6, 7, 8, 9, 49, 50, 51, 52, 53, 54];
    let frames = pan("graf1.png", stamps.len(), 320, 240);
    let bag_path = dir.join("in.mcap");
    let at: Vec<(usize, usize)> = stamps.iter().map(|&i| (i, i)).collect();
    camera_bag(&bag_path, &frames, &at);
    let out = dir.join("out");
    let mut o = options(&bag_path, &out);
    o.config = Config::from_yaml(include_str!("../config/vins_mono.yaml")).unwrap();
    let msgs = read_out(&replay::run(&o).unwrap().out_bag);
    let feats = &msgs[&replay::feature_topic(RAW)];
    let restarts = msgs.get(&replay::restart_topic(RAW)).map_or(0, Vec::len);
    assert_eq!(restarts, 1, "the gap");
    // Published: stamps 3, 6, 9 and, after the gap, 53; the first (3) is not sent.
    let sent: Vec<u64> = feats.iter().map(|m| m.log_time).collect();
    assert_eq!(sent, [6, 9, 53].map(log_time));
    let tracked = msgs[&replay::tracks_topic(RAW)].len();
    assert_eq!(
        tracked,
        stamps.len() - 3,
        "the first frame, the gap and the one after it"
    );

    let cam = CameraModel::from_camera_info(320, 240, "plumb_bob", &K, &D).unwrap();
    let track_cfg = &o.config.track;
    let mut lib = Tracker::new(TrackParams::from_config(track_cfg));
    let (mut gate, mut enc, mut want) = (FeatureGate::default(), FeatureCdr::default(), vec![]);
    let mut left_out = 0;
    for (n, &i) in stamps.iter().enumerate() {
        let h = header(i);
        let stamp = h.stamp.sec as f64 + h.stamp.nanosec as f64 * 1e-9;
        let gray = frames[n].gray();
        match gate.before(stamp, track_cfg) {
            Before::Skip { .. } => continue,
            Before::Track { full: true } => lib.track(&gray, stamp, Some(&cam)),
            Before::Track { full: false } => lib.track_flow_only(
                gpu_features::track::TrackInput::Gray(&gray),
                stamp,
                Some(&cam),
            ),
        };
        if gate.after(lib.resets(), track_cfg).feature {
            *enc.header_mut() = h;
            let bytes = enc.encode(&[lib.tracks()], VinsFormat::Mono, 2).to_vec();
            let pc: cdr::PointCloud = cdr::decode(&bytes, cdr::POINT_CLOUD).unwrap();
            assert_eq!(pc.channels.len(), 5, "VINS-Mono's layout");
            left_out += lib.tracks().len() - pc.points.len();
            want.push(bytes);
        }
    }
    assert!(left_out > 0, "new tracks are left out of the messages");
    let got: Vec<Vec<u8>> = feats.iter().map(|m| m.data.clone()).collect();
    assert_eq!(got, want);
}
