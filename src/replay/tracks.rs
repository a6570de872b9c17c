//! The replay's feature tracker per image topic ([`TrackState`], with `track.enabled`): the
//! tracker, and its three outputs written as the node publishes them: `T/tracks`
//! (`output::tracks` layout), `T/feature` (VINS's `sensor_msgs/PointCloud`, the node's bytes
//! from [`FeatureCdr`], only once the camera is known; VINS-Fusion's layout, or VINS-Mono's
//! with `track.frontend: vins_mono`) and `T/restart` (a `std_msgs/Bool` true when the
//! tracker started over); which frames get them is [`FeatureGate`]'s, as the node's; with
//! `--debug-image`, `T/debug_image` (VINS-Fusion's tracking picture, the node's
//! `debug_image`); the cameras beside the image topics.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::messages::{
    bgr8_message, debug_image_topic, feature_topic, restart_topic, tracks_message, tracks_topic,
};
use super::report::FeatureTrackFrame;
use crate::bag::writer::McapBagWriter;
use crate::camera::CameraModel;
use crate::cdr::{self, Header};
use crate::config::{Frontend, TrackConfig};
use crate::error::Result;
use crate::image::GrayImage;
use crate::output::gate::{Before, FeatureGate};
use crate::output::overlay::{render_tracks, RgbImage};
use crate::output::tracks::{FeatureCdr, VinsFormat};
use crate::pipeline::Pipeline;
use crate::track::{TrackParams, Tracker};
use crate::Config;

/// The tracker's outputs of one image topic and what it needs beside the frames.
pub(super) struct TrackState {
    /// The `tracks`, `feature` and `restart` channels.
    tracks: u16,
    feature: u16,
    restart: u16,
    tracker: Tracker,
    /// The previous frame's (id, age).
    prev: Vec<(u64, u32)>,
    feature_cdr: FeatureCdr,
    /// A stereo step failed (said once).
    right_failed: bool,
    /// Which frames are tracked and which get `feature` and `restart` (`track.frontend`).
    gate: FeatureGate,
    cfg: TrackConfig,
    /// VINS-Fusion's layout, or VINS-Mono's with `frontend: vins_mono`.
    format: VinsFormat,
    /// `T/debug_image` (`--debug-image`): its channel, the picture's buffer and the tracks'
    /// positions in the previous picture, as the node's.
    debug: Option<DebugPicture>,
}

/// `T/debug_image`'s channel, the picture's buffer and the tracks' previous positions by id.
type DebugPicture = (u16, RgbImage, HashMap<u64, (f32, f32)>);

/// The camera beside each image topic: from `camera_info` (the last one read), or the
/// problem with it.
pub(super) type Cameras = HashMap<String, std::result::Result<CameraModel, String>>;

/// `dirname(T)/camera_info` for image topic `T`.
pub fn camera_info_topic(t: &str) -> String {
    match t.trim_end_matches('/').rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/camera_info"),
        None => "camera_info".into(),
    }
}

impl TrackState {
    /// The topic's channels and tracker.
    pub(super) fn new(
        writer: &mut McapBagWriter,
        topic: &str,
        (config, debug_image): (&Config, bool),
        pipeline: &Pipeline,
    ) -> Result<TrackState> {
        let debug = match debug_image {
            true => Some((
                writer.channel(&debug_image_topic(topic), cdr::IMAGE)?,
                RgbImage::default(),
                HashMap::new(),
            )),
            false => None,
        };
        Ok(TrackState {
            debug,
            tracks: writer.channel(&tracks_topic(topic), cdr::POINT_CLOUD2)?,
            feature: writer.channel(&feature_topic(topic), cdr::POINT_CLOUD)?,
            restart: writer.channel(&restart_topic(topic), cdr::BOOL)?,
            tracker: make_tracker(config, pipeline),
            prev: Vec::new(),
            feature_cdr: FeatureCdr::default(),
            right_failed: false,
            gate: FeatureGate::default(),
            cfg: config.track.clone(),
            format: match config.track.frontend {
                Frontend::VinsFusion => VinsFormat::Fusion,
                Frontend::VinsMono => VinsFormat::Mono,
            },
        })
    }

    /// One frame (`at`: its log and publish times) tracked and its outputs written; returns
    /// the frame's tracking measures for the report (none for a frame VINS-Mono's front-end
    /// does not track). With `right` (stereo: the second
    /// camera's frame of the same instant) the tracks are found in it too, written on its
    /// own `tracks` channel, and the `feature` message carries both cameras, as the node's.
    pub(super) fn frame(
        &mut self,
        writer: &mut McapBagWriter,
        left: TrackFrame,
        right: Option<(TrackFrame, u16)>,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<FeatureTrackFrame>> {
        let TrackFrame {
            at,
            header,
            gray,
            camera,
        } = left;
        // As ROS's Time::toSec / the node: seconds plus nanoseconds * 1e-9.
        let stamp = header.stamp.sec as f64 + header.stamp.nanosec as f64 * 1e-9;
        let tracker = &mut self.tracker;
        match self.gate.before(stamp, &self.cfg) {
            Before::Skip { restart } => {
                if restart {
                    let msg = cdr::encode(&cdr::Bool { data: true });
                    writer.write(self.restart, at.0, at.1, &msg)?;
                }
                return Ok(None);
            }
            Before::Track { full: true } => tracker.track(gray, stamp, camera),
            Before::Track { full: false } => {
                tracker.track_flow_only(crate::track::TrackInput::Gray(gray), stamp, camera)
            }
        };
        let msg = tracks_message(header, tracker.tracks(), scratch);
        writer.write(self.tracks, at.0, at.1, &msg)?;
        let mut right_ms = 0.0;
        if let Some((r, channel)) = &right {
            let t0 = Instant::now();
            if let Err(e) = tracker.track_right(r.gray, r.camera) {
                if !self.right_failed {
                    eprintln!("replay: {e}");
                    self.right_failed = true;
                }
            }
            right_ms = t0.elapsed().as_secs_f64() * 1e3;
            let msg = tracks_message(r.header, tracker.right_tracks(), scratch);
            writer.write(*channel, r.at.0, r.at.1, &msg)?;
        }
        if let Some((channel, pic, prev)) = &mut self.debug {
            let right_gray = right.as_ref().map(|(r, _)| r.gray);
            let both = (tracker.tracks(), tracker.right_tracks());
            render_tracks(pic, gray, right_gray, both, prev);
            writer.write(*channel, at.0, at.1, &bgr8_message(header, pic))?;
            prev.clear();
            prev.extend(tracker.tracks().iter().map(|t| (t.id, (t.x, t.y))));
        }
        let tracks = tracker.tracks();
        let after = self.gate.after(tracker.resets(), &self.cfg);
        if after.restart {
            let msg = cdr::encode(&cdr::Bool { data: true });
            writer.write(self.restart, at.0, at.1, &msg)?;
        }
        // No `feature` before the camera is known: VINS cannot use pixels.
        if after.feature && camera.is_some() {
            self.feature_cdr.header_mut().clone_from(header);
            let both = [tracks, tracker.right_tracks()];
            let cameras = if right.is_some() {
                &both[..]
            } else {
                &both[..1]
            };
            let min_age = FeatureGate::min_age(&self.cfg);
            let bytes = self.feature_cdr.encode(cameras, self.format, min_age);
            writer.write(self.feature, at.0, at.1, bytes)?;
        }
        let alive: HashSet<u64> = tracks.iter().map(|t| t.id).collect();
        let ended = self
            .prev
            .iter()
            .filter(|(id, _)| !alive.contains(id))
            .map(|p| p.1)
            .collect();
        self.prev.clear();
        self.prev.extend(tracks.iter().map(|t| (t.id, t.age)));
        let s = tracker.stats();
        Ok(Some(FeatureTrackFrame {
            alive: tracks.len(),
            tried: s.tried,
            flow_back_rejected: s.flow_back_rejected,
            ransac_rejected: s.ransac_rejected,
            mask_dropped: s.mask_dropped,
            added: s.added,
            flow_back_error: s.flow_back_error,
            ended,
            tracker_ms: s.total_ms + right_ms,
        }))
    }
}

/// A frame for [`TrackState::frame`]: its log and publish times, header, gray image and
/// camera (the first camera's, or in stereo the second's, with its `tracks` channel).
pub(super) struct TrackFrame<'a> {
    pub at: (u64, u64),
    pub header: &'a Header,
    pub gray: &'a GrayImage,
    pub camera: Option<&'a CameraModel>,
}

/// The topic's tracker: its LK stage on the GPU, in the pipeline's GPU session, when the
/// pipeline runs on CUDA.
fn make_tracker(cfg: &Config, pipeline: &Pipeline) -> Tracker {
    let (t, why) = Tracker::for_pipeline(pipeline, TrackParams::from_config(&cfg.track));
    if let Some(why) = why {
        eprintln!("replay: tracker on the CPU: {why}");
    }
    t
}
