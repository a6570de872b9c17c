//! The tracker's outputs, defined once for the CLI, the replay and the node:
//!
//! - `<stem>.tracks.csv` ([`csv`]): header `id,x,y,x_n,y_n,vx,vy,px_vx,px_vy,age`, one row per
//!   track in the tracker's order (oldest first, then the new ones); floats in shortest
//!   round-trip form, `NaN` where a value is unknown (no camera model).
//! - The `tracks` PointCloud2 ([`FIELDS`], [`encode`]): one point per track, `height = 1`,
//!   little-endian, `is_dense = false` (the normalised fields are NaN without a camera
//!   model), `point_step = 36`:
//!
//! | field | offset | type    | meaning |
//! |-------|--------|---------|---------|
//! | id    | 0      | FLOAT64 | the track's ID (exact: IDs stay below 2^53) |
//! | x, y  | 8, 12  | FLOAT32 | pixel position |
//! | x_n, y_n | 16, 20 | FLOAT32 | normalised (undistorted) image coordinates; NaN without camera_info |
//! | vx, vy | 24, 28 | FLOAT32 | velocity on the normalised plane, 1/s; 0 for a new track |
//! | age   | 32     | UINT32  | frames the feature has been seen in (1 when new) |
//!
//! - VINS's `feature` message (`sensor_msgs/PointCloud`, [`vins_feature`]): points
//!   `(x_n, y_n, 1)` and per-point channels in the order VINS-Mono's or VINS-Fusion's
//!   estimator reads them ([`VinsFormat`]); with stereo the second camera's points follow
//!   the first's.

use std::fmt::Write as _;

use super::pointcloud::{Field, FLOAT32};
use crate::config::{Frontend, TrackConfig};
use crate::track::{Reset, Track};

/// `sensor_msgs/PointField` UINT32 and FLOAT64.
pub const UINT32: u8 = 6;
pub const FLOAT64: u8 = 8;
pub const POINT_STEP: usize = 36;

pub const CSV_HEADER: &str = "id,x,y,x_n,y_n,vx,vy,px_vx,px_vy,age";

/// The CSV text of one frame's tracks.
pub fn csv(tracks: &[Track]) -> String {
    let mut s = String::with_capacity(80 * (tracks.len() + 1));
    s.push_str(CSV_HEADER);
    s.push('\n');
    for t in tracks {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{}",
            t.id, t.x, t.y, t.x_n, t.y_n, t.vx, t.vy, t.px_vx, t.px_vy, t.age
        );
    }
    s
}

const fn f(name: &'static str, offset: u32, datatype: u8) -> Field {
    Field {
        name,
        offset,
        datatype,
        count: 1,
    }
}

pub const FIELDS: [Field; 8] = [
    f("id", 0, FLOAT64),
    f("x", 8, FLOAT32),
    f("y", 12, FLOAT32),
    f("x_n", 16, FLOAT32),
    f("y_n", 20, FLOAT32),
    f("vx", 24, FLOAT32),
    f("vy", 28, FLOAT32),
    f("age", 32, UINT32),
];

/// The `tracks` cloud's data (cleared first; capacity reused).
pub fn encode(tracks: &[Track], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(tracks.len() * POINT_STEP);
    for t in tracks {
        out.extend_from_slice(&(t.id as f64).to_le_bytes());
        for v in [
            t.x,
            t.y,
            t.x_n as f32,
            t.y_n as f32,
            t.vx as f32,
            t.vy as f32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&t.age.to_le_bytes());
    }
}

/// One decoded `tracks` point: (id, x, y, x_n, y_n, vx, vy, age).
pub type TrackPoint = (u64, f32, f32, f32, f32, f32, f32, u32);

/// Reads back what [`encode`] wrote; `None` when the buffer is not whole points.
pub fn decode(data: &[u8]) -> Option<Vec<TrackPoint>> {
    if data.len() % POINT_STEP != 0 {
        return None;
    }
    Some(
        data.chunks_exact(POINT_STEP)
            .map(|p| {
                let f32_at = |o: usize| f32::from_le_bytes(p[o..o + 4].try_into().unwrap());
                (
                    f64::from_le_bytes(p[..8].try_into().unwrap()) as u64,
                    f32_at(8),
                    f32_at(12),
                    f32_at(16),
                    f32_at(20),
                    f32_at(24),
                    f32_at(28),
                    u32::from_le_bytes(p[32..36].try_into().unwrap()),
                )
            })
            .collect(),
    )
}

/// Which estimator reads the `feature` message (the node's `feature_format` setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VinsFormat {
    /// VINS-Mono's `feature_tracker` message: 5 channels `id_of_point` (`id * cameras +
    /// camera`), `u_of_point`, `v_of_point`, `velocity_x_of_point`, `velocity_y_of_point`.
    Mono,
    /// What VINS-Fusion's `feature_callback` (and its ROS 2 ports) reads: channels `id`,
    /// `camera`, `u`, `v`, `velocity_x`, `velocity_y`, then three zero channels `gx`, `gy`,
    /// `gz`: the callback reads channels 6 to 8 (its ground-truth point) whenever a message
    /// has more than five, so a six-channel message would be read past its end.
    Fusion,
}

impl VinsFormat {
    pub fn parse(s: &str) -> Option<VinsFormat> {
        match s {
            "vins_mono" => Some(VinsFormat::Mono),
            "vins_fusion" => Some(VinsFormat::Fusion),
            _ => None,
        }
    }

    /// The channel names, in order.
    pub fn channels(self) -> &'static [&'static str] {
        match self {
            VinsFormat::Mono => &[
                "id_of_point",
                "u_of_point",
                "v_of_point",
                "velocity_x_of_point",
                "velocity_y_of_point",
            ],
            VinsFormat::Fusion => &[
                "id",
                "camera",
                "u",
                "v",
                "velocity_x",
                "velocity_y",
                "gx",
                "gy",
                "gz",
            ],
        }
    }
}

/// VINS's `feature` message content (`sensor_msgs/PointCloud`), independent of ROS types:
/// `points` are `(x_n, y_n, 1)`, `channels[k]` holds channel `k` of
/// [`VinsFormat::channels`], one value per point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VinsFeature {
    pub points: Vec<[f32; 3]>,
    pub channels: Vec<Vec<f32>>,
}

/// Where the `feature` message's ids wrap: 2^24, the last integer f32 holds with its
/// neighbours apart (VINS-Mono's `id * cameras + camera` stays below it too).
pub const ID_WRAP: u64 = 1 << 24;

/// The `feature` message of one frame; `cameras[c]` are camera c's tracks (one camera, or
/// left and right in stereo). A track without normalised coordinates (no camera model) is
/// left out: the estimator cannot use it.
pub fn vins_feature(cameras: &[&[Track]], format: VinsFormat) -> VinsFeature {
    let mut out = VinsFeature {
        points: Vec::new(),
        channels: Vec::new(),
    };
    vins_feature_into(cameras, format, 1, &mut out);
    out
}

/// [`vins_feature`] of the tracks seen in at least `min_age` frames (VINS-Mono sends only
/// those seen twice) into `out`, its buffers reused (nothing allocated once they have grown).
pub fn vins_feature_into(
    cameras: &[&[Track]],
    format: VinsFormat,
    min_age: u32,
    out: &mut VinsFeature,
) {
    let ncam = cameras.len().max(1) as u64;
    out.points.clear();
    out.channels.resize_with(format.channels().len(), Vec::new);
    for ch in &mut out.channels {
        ch.clear();
    }
    for (c, tracks) in cameras.iter().enumerate() {
        for t in tracks
            .iter()
            .filter(|t| t.x_n.is_finite() && t.y_n.is_finite() && t.age >= min_age)
        {
            out.points.push([t.x_n as f32, t.y_n as f32, 1.0]);
            let (vx, vy) = (t.vx as f32, t.vy as f32);
            // Ids travel as f32: wrapped below 2^24, where every integer is exact (past it
            // neighbouring ids would merge; VINS-Fusion's ROS 1 build asserts on that).
            let id = t.id % (ID_WRAP / ncam);
            let vals: &[f32] = match format {
                VinsFormat::Mono => &[(id * ncam + c as u64) as f32, t.x, t.y, vx, vy],
                VinsFormat::Fusion => &[id as f32, c as f32, t.x, t.y, vx, vy, 0.0, 0.0, 0.0],
            };
            for (ch, &v) in out.channels.iter_mut().zip(vals) {
                ch.push(v);
            }
        }
    }
}

/// Which tracked frames get a `feature` message (`track.feature_every`): every Nth since the
/// tracker started or last restarted, the Nth first; what the node and the replay share.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeatureRate {
    since_start: u64,
}

impl FeatureRate {
    /// One tracked frame (`restarted`: the tracker started over on it); true when its
    /// `feature` message is due.
    pub fn due(&mut self, restarted: bool, every: u32) -> bool {
        if restarted {
            self.since_start = 0;
        }
        self.since_start += 1;
        self.since_start % u64::from(every.max(1)) == 0
    }
}

/// What VINS-Mono's `feature_tracker` node does with a frame (its image callback),
/// [`MonoRate::step`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonoStep {
    /// Not tracked: the first frame (it starts the clock), or the first after a restart.
    Skip,
    /// The stamp jumped more than 1 s ahead or went back: `restart` goes out instead of this
    /// frame (the tracker keeps its tracks, as VINS-Mono's).
    Restart,
    /// Tracked. `full`: a frame its frequency control publishes (F test, mask, new corners);
    /// `send`: its `feature` message goes out (every published frame but the very first).
    Track { full: bool, send: bool },
}

/// VINS-Mono's frequency control and stream check (`img_callback`): `freq` messages per
/// second, counted from a clock that restarts whenever the rate is within 1 % of `freq`.
#[derive(Clone, Copy, Debug)]
pub struct MonoRate {
    started: bool,
    first_time: f64,
    last_time: f64,
    pub_count: u32,
    sent_first: bool,
}

impl Default for MonoRate {
    fn default() -> Self {
        MonoRate {
            started: false,
            first_time: 0.0,
            last_time: 0.0,
            pub_count: 1,
            sent_first: false,
        }
    }
}

impl MonoRate {
    /// The frame stamped `stamp` seconds; `freq` Hz (0 = 100, as VINS-Mono reads it).
    pub fn step(&mut self, stamp: f64, freq: u32) -> MonoStep {
        let freq = if freq == 0 { 100.0 } else { f64::from(freq) };
        if !self.started {
            (self.started, self.first_time, self.last_time) = (true, stamp, stamp);
            return MonoStep::Skip;
        }
        if stamp - self.last_time > 1.0 || stamp < self.last_time {
            (self.started, self.last_time, self.pub_count) = (false, 0.0, 1);
            return MonoStep::Restart;
        }
        self.last_time = stamp;
        // The rate so far, rounded half away from zero as C's round().
        let rate = f64::from(self.pub_count) / (stamp - self.first_time);
        let full = rate.round() <= freq;
        if full {
            if (rate - freq).abs() < 0.01 * freq {
                (self.first_time, self.pub_count) = (stamp, 0);
            }
            self.pub_count += 1;
        }
        let send = full && self.sent_first;
        self.sent_first |= full;
        MonoStep::Track { full, send }
    }
}

/// What the node or the replay does with a frame before tracking it ([`FeatureGate::before`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Before {
    /// Not tracked; `restart`: send `restart` for it.
    Skip { restart: bool },
    /// Tracked; `full` false: flow only (`Tracker::track_flow_only`).
    Track { full: bool },
}

/// After the tracker ran on a frame ([`FeatureGate::after`]): send `restart` (the tracker
/// started over on it), send its `feature` message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct After {
    pub restart: bool,
    pub feature: bool,
}

/// Which frames the tracker gets and which get `feature` and `restart` messages, as
/// `track.frontend` says: VINS-Fusion's (every frame tracked; `feature` every
/// `feature_every` frames since the (re)start; `restart` when the tracker starts over) or
/// VINS-Mono's node ([`MonoRate`]). What the node and the replay share.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeatureGate {
    rate: FeatureRate,
    mono: MonoRate,
    /// The tracker's resets seen so far.
    resets: usize,
    /// VINS-Mono: the tracked frame's `feature` is due.
    send: bool,
}

impl FeatureGate {
    /// The frame stamped `stamp` seconds, before tracking.
    pub fn before(&mut self, stamp: f64, cfg: &TrackConfig) -> Before {
        match cfg.frontend {
            Frontend::VinsFusion => Before::Track { full: true },
            Frontend::VinsMono => match self.mono.step(stamp, cfg.freq) {
                MonoStep::Skip => Before::Skip { restart: false },
                MonoStep::Restart => Before::Skip { restart: true },
                MonoStep::Track { full, send } => {
                    self.send = send;
                    Before::Track { full }
                }
            },
        }
    }

    /// The tracked frame, with the tracker's resets so far (`Tracker::resets`).
    pub fn after(&mut self, resets: &[Reset], cfg: &TrackConfig) -> After {
        let new = &resets[self.resets.min(resets.len())..];
        self.resets = resets.len();
        match cfg.frontend {
            Frontend::VinsFusion => {
                let restart = !new.is_empty();
                After {
                    restart,
                    feature: self.rate.due(restart, cfg.feature_every),
                }
            }
            // A time going back was already sent as VINS-Mono's restart two frames ago.
            Frontend::VinsMono => After {
                restart: new.iter().any(|&r| r != Reset::TimeWentBack),
                feature: std::mem::take(&mut self.send),
            },
        }
    }

    /// The youngest tracks the `feature` message carries: VINS-Mono's, those seen twice.
    pub fn min_age(cfg: &TrackConfig) -> u32 {
        match cfg.frontend {
            Frontend::VinsFusion => 1,
            Frontend::VinsMono => 2,
        }
    }
}

/// VINS's `feature` message (`sensor_msgs/PointCloud`, [`vins_feature`]) serialized as CDR,
/// what the node publishes and the replay writes: the message, its channels and bytes kept
/// from frame to frame (nothing allocated once they have grown).
#[derive(Default)]
pub struct FeatureCdr {
    feature: VinsFeature,
    msg: crate::cdr::PointCloud,
    bytes: Vec<u8>,
}

impl FeatureCdr {
    /// The header the next [`FeatureCdr::encode`] writes (the image's).
    pub fn header_mut(&mut self) -> &mut crate::cdr::Header {
        &mut self.msg.header
    }

    /// `cameras[c]`: camera c's tracks (one camera, or left and right), those seen in at
    /// least `min_age` frames ([`FeatureGate::min_age`]).
    pub fn encode(&mut self, cameras: &[&[Track]], format: VinsFormat, min_age: u32) -> &[u8] {
        use crate::cdr;
        vins_feature_into(cameras, format, min_age, &mut self.feature);
        let m = &mut self.msg;
        m.points.clear();
        m.points
            .extend(self.feature.points.iter().map(|p| cdr::Point32 {
                x: p[0],
                y: p[1],
                z: p[2],
            }));
        let names = format.channels();
        if !m
            .channels
            .iter()
            .map(|c| c.name.as_str())
            .eq(names.iter().copied())
        {
            m.channels = names
                .iter()
                .map(|n| cdr::ChannelFloat32 {
                    name: n.to_string(),
                    values: Vec::new(),
                })
                .collect();
        }
        for (ch, values) in m.channels.iter_mut().zip(&self.feature.channels) {
            ch.values.clear();
            ch.values.extend_from_slice(values);
        }
        cdr::encode_into(&*m, &mut self.bytes);
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_rate_every_nth_since_the_restart() {
        let mut r = FeatureRate::default();
        let got: Vec<bool> = [false, false, false, false, true, false, false]
            .iter()
            .map(|&restart| r.due(restart, 2))
            .collect();
        // Frames 2 and 4 of the start, then frame 2 after the restart on frame 5.
        assert_eq!(got, [false, true, false, true, false, true, false]);
        let mut one = FeatureRate::default();
        assert!((0..5).all(|k| one.due(k == 3, 1)));
    }

    #[test]
    fn mono_rate_as_vins_mono_at_20_hz_with_freq_10() {
        // 20 Hz frames: the first starts the clock; then every second frame is published,
        // the first published one not sent.
        let mut r = MonoRate::default();
        let got: Vec<MonoStep> = (0..7)
            .map(|k| r.step(100.0 + 0.05 * k as f64, 10))
            .collect();
        let tr = |full, send| MonoStep::Track { full, send };
        assert_eq!(
            got,
            [
                MonoStep::Skip,
                tr(false, false),
                tr(true, false),
                tr(false, false),
                tr(true, true),
                tr(false, false),
                tr(true, true)
            ]
        );
        // A 2 s gap: restart instead of that frame, the next one starts the clock, and the
        // first published frame after it is sent (only the very first never is).
        assert_eq!(r.step(102.3, 10), MonoStep::Restart);
        assert_eq!(r.step(102.35, 10), MonoStep::Skip);
        assert_eq!(r.step(102.40, 10), tr(false, false));
        assert_eq!(r.step(102.45, 10), tr(true, true));
        // Time going back restarts too; freq 0 is 100 Hz: every frame published.
        assert_eq!(r.step(50.0, 0), MonoStep::Restart);
        assert_eq!(r.step(50.05, 0), MonoStep::Skip);
        assert_eq!(r.step(50.10, 0), tr(true, true));
        assert_eq!(r.step(50.15, 0), tr(true, true));
    }

    #[test]
    fn feature_gate_per_frontend() {
        let mut cfg = TrackConfig {
            feature_every: 2,
            ..Default::default()
        };
        let mut g = FeatureGate::default();
        let mut resets = vec![];
        let mut got = vec![];
        for k in 0..4 {
            assert_eq!(g.before(k as f64, &cfg), Before::Track { full: true });
            if k == 2 {
                resets.push(Reset::Camera);
            }
            got.push(g.after(&resets, &cfg));
        }
        let a = |restart, feature| After { restart, feature };
        assert_eq!(
            got,
            [
                a(false, false),
                a(false, true),
                a(true, false),
                a(false, true)
            ]
        );
        cfg.frontend = Frontend::VinsMono;
        cfg.feature_every = 1;
        let mut g = FeatureGate::default();
        let mut resets = vec![];
        assert_eq!(g.before(0.0, &cfg), Before::Skip { restart: false });
        assert_eq!(g.before(0.05, &cfg), Before::Track { full: false });
        assert_eq!(g.after(&resets, &cfg), a(false, false));
        assert_eq!(g.before(0.10, &cfg), Before::Track { full: true });
        assert_eq!(
            g.after(&resets, &cfg),
            a(false, false),
            "the first is not sent"
        );
        assert_eq!(g.before(0.15, &cfg), Before::Track { full: false });
        // The tracker's own start-over on a time going back is not sent again.
        resets.push(Reset::TimeWentBack);
        assert_eq!(g.after(&resets, &cfg), a(false, false));
        assert_eq!(g.before(0.20, &cfg), Before::Track { full: true });
        resets.push(Reset::Resolution);
        assert_eq!(g.after(&resets, &cfg), a(true, true));
        assert_eq!(FeatureGate::min_age(&cfg), 2);
    }

    #[test]
    fn the_feature_message_keeps_tracks_of_min_age() {
        let young = Track {
            age: 1,
            ..t(5, 0.2)
        };
        let tracks = [t(3, 0.1), young];
        let mut f = VinsFeature::default();
        vins_feature_into(&[&tracks], VinsFormat::Mono, 2, &mut f);
        assert_eq!(f.channels[0], vec![3.0]);
        vins_feature_into(&[&tracks], VinsFormat::Mono, 1, &mut f);
        assert_eq!(f.channels[0], vec![3.0, 5.0]);
    }

    fn t(id: u64, x_n: f64) -> Track {
        Track {
            id,
            x: 10.5,
            y: 20.25,
            x_n,
            y_n: -0.5,
            vx: 0.1,
            vy: 0.0,
            px_vx: 3.0,
            px_vy: 0.0,
            age: 4,
        }
    }

    #[test]
    fn cloud_roundtrip_and_csv() {
        let tr = [t(7, 0.25), t((1 << 40) + 3, f64::NAN)];
        let mut buf = Vec::new();
        encode(&tr, &mut buf);
        assert_eq!(buf.len(), 2 * POINT_STEP);
        let back = decode(&buf).unwrap();
        assert_eq!(back[0].0, 7);
        assert_eq!(back[1].0, (1 << 40) + 3, "IDs above 2^32 survive");
        assert_eq!((back[0].1, back[0].3, back[0].7), (10.5, 0.25, 4));
        assert!(back[1].3.is_nan());
        let end = FIELDS.last().map(|f| f.offset as usize + 4);
        assert_eq!(end, Some(POINT_STEP));
        let c = csv(&tr);
        assert!(c.starts_with(CSV_HEADER));
        assert!(c.contains("\n7,10.5,20.25,0.25,-0.5,0.1,0,3,0,4\n"), "{c}");
        assert!(c.contains(",NaN,"));
    }

    #[test]
    fn feature_ids_wrap_below_2_pow_24() {
        let a = [t(ID_WRAP - 1, 0.1), t(ID_WRAP, 0.2), t(ID_WRAP + 5, 0.3)];
        let f = vins_feature(&[&a], VinsFormat::Fusion);
        assert_eq!(f.channels[0], vec![(ID_WRAP - 1) as f32, 0.0, 5.0]);
        let m = vins_feature(&[&a, &a], VinsFormat::Mono);
        // Two cameras: id wraps at 2^23, then id * 2 + camera.
        let w = ID_WRAP / 2;
        let ids = [(ID_WRAP - 1) % w, ID_WRAP % w, (ID_WRAP + 5) % w];
        let want: Vec<f32> = (ids.iter().map(|id| (id * 2) as f32))
            .chain(ids.iter().map(|id| (id * 2 + 1) as f32))
            .collect();
        assert_eq!(m.channels[0], want);
        assert!(m.channels[0]
            .iter()
            .all(|&v| (v as u64) < ID_WRAP && v.fract() == 0.0));
    }

    #[test]
    fn vins_feature_layouts() {
        let left = [t(3, 0.25), t(4, f64::NAN)];
        let right = [t(3, 0.3)];
        let v = vins_feature(&[&left, &right], VinsFormat::Mono);
        assert_eq!(v.points, vec![[0.25, -0.5, 1.0], [0.3, -0.5, 1.0]]);
        assert_eq!(v.channels[0], vec![6.0, 7.0], "id * 2 + camera");
        assert_eq!(v.channels[1], vec![10.5, 10.5]);
        assert_eq!(v.channels.len(), 5);
        let f = vins_feature(&[&left, &right], VinsFormat::Fusion);
        assert_eq!(f.channels.len(), 9);
        assert_eq!(
            (f.channels[0].clone(), f.channels[1].clone()),
            (vec![3.0, 3.0], vec![0.0, 1.0])
        );
        assert_eq!(f.channels[5], vec![0.0, 0.0]);
        assert_eq!(VinsFormat::parse("vins_fusion"), Some(VinsFormat::Fusion));
    }
}
