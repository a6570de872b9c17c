//! The tracker's outputs, defined once for the CLI, the replay and the node:
//!
//! - `<stem>.tracks.csv` ([`csv`]): header `id,x,y,x_n,y_n,vx,vy,px_vx,px_vy,age`, one row per
//!   track in the tracker's order (oldest first, then the new ones); floats in shortest
//!   round-trip form, `NaN` where a value is unknown (no camera model).
//! - The `tracks` PointCloud2 ([`FIELDS`], [`encode`]): one point per track, `height = 1`,
//!   little-endian, `is_dense = false` (the normalised fields are NaN without a camera
//!   model), `point_step = 40`:
//!
//! | field | offset | type    | meaning |
//! |-------|--------|---------|---------|
//! | id    | 0      | FLOAT64 | the track's ID (exact: IDs stay below 2^53) |
//! | x, y  | 8, 12  | FLOAT32 | pixel position |
//! | x_n, y_n | 16, 20 | FLOAT32 | normalised (undistorted) image coordinates; NaN without camera_info |
//! | vx, vy | 24, 28 | FLOAT32 | velocity on the normalised plane, 1/s; 0 for a new track |
//! | age   | 32     | UINT32  | frames the feature has been seen in (1 when new) |
//! | z     | 36     | FLOAT32 | 0: the image plane, for RViz2's PointCloud2 display (x, y, z) |
//!
//! - VINS's `feature` message (`sensor_msgs/PointCloud`, [`vins_feature`]): points
//!   `(x_n, y_n, 1)` and per-point channels in the order VINS-Mono's or VINS-Fusion's
//!   estimator reads them ([`VinsFormat`]); with stereo the second camera's points follow
//!   the first's.

use std::fmt::Write as _;

use super::pointcloud::{Field, FLOAT32};
use crate::track::Track;

/// `sensor_msgs/PointField` UINT32 and FLOAT64.
pub const UINT32: u8 = 6;
pub const FLOAT64: u8 = 8;
pub const POINT_STEP: usize = 40;

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

pub const FIELDS: [Field; 9] = [
    f("id", 0, FLOAT64),
    f("x", 8, FLOAT32),
    f("y", 12, FLOAT32),
    f("x_n", 16, FLOAT32),
    f("y_n", 20, FLOAT32),
    f("vx", 24, FLOAT32),
    f("vy", 28, FLOAT32),
    f("age", 32, UINT32),
    f("z", 36, FLOAT32),
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
        out.extend_from_slice(&0f32.to_le_bytes());
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
    /// least `min_age` frames (`output::gate::FeatureGate::min_age`).
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
