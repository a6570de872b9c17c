//! The tracker in the node (`track.enabled`): per input, the latest `camera_info` (checked
//! by `camera::CameraModel::from_camera_info`), the [`Tracker`], and its three outputs:
//! `tracks` (PointCloud2, `output::tracks` layout), `feature` (`sensor_msgs/PointCloud` in
//! the layout `feature_format` names) and `restart` (`std_msgs/Bool`, true when the tracker
//! started over: time went backwards, the resolution or the camera changed).
//!
//! Without a usable `camera_info` the tracks are published in pixels (normalised fields
//! NaN), `feature` carries no points, and /diagnostics says why at WARN level.

use std::sync::{Arc, Mutex};

use r2r::geometry_msgs::msg::Point32;
use r2r::sensor_msgs::msg::{CameraInfo, ChannelFloat32, PointCloud, PointCloud2};
use r2r::std_msgs::msg::{Bool, Header};

use super::convert;
use crate::camera::CameraModel;
use crate::config::TrackConfig;
use crate::image::ImageView;
use crate::output::tracks::{vins_feature, VinsFormat};
use crate::track::{TrackParams, Tracker};

/// What the input's `camera_info` subscription last saw.
#[derive(Clone, Debug, Default)]
pub(super) enum CameraState {
    #[default]
    Missing,
    Ready(CameraModel),
    Invalid(String),
}

pub(super) type CameraSlot = Arc<Mutex<CameraState>>;

/// `sensor_msgs/CameraInfo` to a camera model, or what is wrong with it.
pub(super) fn camera_from_info(info: &CameraInfo) -> CameraState {
    match CameraModel::from_camera_info(
        info.width,
        info.height,
        &info.distortion_model,
        &info.k,
        &info.d,
    ) {
        Ok(m) => CameraState::Ready(m),
        Err(e) => CameraState::Invalid(e),
    }
}

pub(super) struct TrackOutputs {
    pub(super) tracker: Tracker,
    pub(super) camera: CameraSlot,
    pub(super) pub_tracks: r2r::Publisher<PointCloud2>,
    pub(super) pub_feature: r2r::Publisher<PointCloud>,
    pub(super) pub_restart: r2r::Publisher<Bool>,
    pub(super) format: VinsFormat,
    pub(super) buf: Vec<u8>,
    pub(super) resets: usize,
    /// Run the LK stage on the GPU (the input's pipeline is on CUDA); decided on the first
    /// tracked frame.
    pub(super) cuda: bool,
    pub(super) started: bool,
}

impl TrackOutputs {
    /// Tracks one frame and publishes; returns the camera problem for diagnostics, if any.
    pub(super) fn step(
        &mut self,
        header: &Header,
        view: &ImageView,
        cfg: &TrackConfig,
    ) -> Option<String> {
        let params = TrackParams::from_config(cfg);
        if !self.started {
            self.started = true;
            if self.cuda {
                let (t, why) = Tracker::with_cuda(params);
                self.tracker = t;
                if let Some(why) = why {
                    return Some(format!("tracker on the CPU: {why}"));
                }
            }
        }
        if *self.tracker.params() != params {
            self.tracker.set_params(params);
        }
        let state = self.camera.lock().unwrap().clone();
        let (camera, problem) = match state {
            CameraState::Ready(m)
                if (m.width as usize, m.height as usize) == (view.width(), view.height()) =>
            {
                (Some(m), None)
            }
            CameraState::Ready(m) => (
                None,
                Some(format!(
                    "camera_info is {}x{}, the images {}x{}: tracks in pixels only",
                    m.width,
                    m.height,
                    view.width(),
                    view.height()
                )),
            ),
            CameraState::Missing => (
                None,
                Some("no camera_info received: tracks in pixels only".into()),
            ),
            CameraState::Invalid(e) => (
                None,
                Some(format!("camera_info rejected ({e}): tracks in pixels only")),
            ),
        };
        let stamp = header.stamp.sec as f64 + header.stamp.nanosec as f64 * 1e-9;
        let tracks = self.tracker.track_view(view, stamp, camera.as_ref());
        let cloud = convert::tracks_cloud(header, tracks, std::mem::take(&mut self.buf));
        let _ = self.pub_tracks.publish(&cloud);
        self.buf = cloud.data;
        let f = vins_feature(&[tracks], self.format);
        let msg = PointCloud {
            header: header.clone(),
            points: f
                .points
                .iter()
                .map(|p| Point32 {
                    x: p[0],
                    y: p[1],
                    z: p[2],
                })
                .collect(),
            channels: self
                .format
                .channels()
                .iter()
                .zip(f.channels)
                .map(|(name, values)| ChannelFloat32 {
                    name: name.to_string(),
                    values,
                })
                .collect(),
        };
        let _ = self.pub_feature.publish(&msg);
        let resets = self.tracker.resets().len();
        if resets > self.resets {
            self.resets = resets;
            let _ = self.pub_restart.publish(&Bool { data: true });
        }
        problem
    }
}
