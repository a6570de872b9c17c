//! One input's camera for the tracker ([`Cameras`]): the VINS config's, or its `camera_info`
//! messages kept by stamp (a frame gets the one of its stamp, else the newest), the model a
//! frame of a given size can use ([`usable_camera`]) and where it came from ([`CameraUse`],
//! /diagnostics' `camera_model`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use r2r::sensor_msgs::msg::CameraInfo;
use r2r::QosProfile;

use super::convert;
use crate::camera::CameraModel;

/// How many `camera_info` messages an input keeps for matching frames by stamp.
const CAMERA_INFOS_KEPT: usize = 16;

/// What one input knows of its camera: the VINS config's (fixed; `camera_info` is then not
/// read), or its last [`CAMERA_INFOS_KEPT`] `camera_info` messages by stamp.
#[derive(Debug, Default)]
pub(super) struct Cameras {
    vins: Option<CameraModel>,
    /// (stamp in ns, the message's model or what is wrong with it), oldest first.
    infos: VecDeque<(i64, Result<CameraModel, String>)>,
}

pub(super) type CameraSlot = Arc<Mutex<Cameras>>;

/// Where a frame's camera model came from (/diagnostics' `camera_model`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) enum CameraSource {
    #[default]
    None,
    /// `vins_config`'s camera file.
    Vins,
    /// The `camera_info` of the frame's stamp.
    InfoSameStamp,
    /// No `camera_info` of the frame's stamp kept: the newest one.
    InfoLatest,
}

/// The camera model a frame was tracked with and where it came from.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct CameraUse {
    pub(super) source: CameraSource,
    /// The model's distortion name, width, height and focal lengths (when a model is used).
    pub(super) model: Option<(crate::camera::Distortion, u32, u32, f64, f64)>,
}

impl CameraUse {
    /// For /diagnostics: e.g. `plumb_bob 752x480 fx 458.7 fy 457.3 from camera_info (same stamp)`.
    pub(super) fn describe(&self) -> String {
        let from = match self.source {
            CameraSource::None => return "none (tracks in pixels)".into(),
            CameraSource::Vins => "vins_config",
            CameraSource::InfoSameStamp => "camera_info (the frame's stamp)",
            CameraSource::InfoLatest => "camera_info (the newest: none of the frame's stamp)",
        };
        match self.model {
            Some((d, w, h, fx, fy)) => {
                format!("{} {w}x{h} fx {fx:.1} fy {fy:.1} from {from}", d.name())
            }
            None => format!("none: {from} unusable"),
        }
    }
}

impl Cameras {
    /// `camera`'s messages from `topic`.
    pub(super) fn subscribe(
        node: &mut r2r::Node,
        topic: &str,
        camera: &CameraSlot,
    ) -> Result<(), String> {
        // Two subscriptions into the same slot: a best-effort one, which also hears best-effort
        // publishers (camera drivers, `ros2 bag play` so set up: a reliable subscription never
        // connects to them), and a reliable one, which gets a reliable publisher's messages
        // without loss (a best-effort reader can miss one sent right after discovery; a driver
        // that publishes camera_info once would then never be heard). Messages are kept by
        // stamp (`Cameras`), so one heard twice is kept once.
        for qos in [
            QosProfile::default().keep_last(10).best_effort(),
            QosProfile::default().keep_last(10).reliable(),
        ] {
            let mut sub = node
                .subscribe::<CameraInfo>(topic, qos)
                .map_err(|e| format!("subscribe {topic}: {e}"))?;
            let camera = camera.clone();
            tokio::spawn(async move {
                while let Some(info) = sub.next().await {
                    camera.lock().unwrap().receive(&info);
                }
            });
        }
        Ok(())
    }

    /// The VINS config's camera (fixed) or nothing yet.
    pub(super) fn new(vins: Option<CameraModel>) -> Self {
        Cameras {
            vins,
            infos: VecDeque::with_capacity(CAMERA_INFOS_KEPT),
        }
    }

    /// A `sensor_msgs/CameraInfo` received: kept by stamp (ignored with a VINS camera). A
    /// message of a stamp already kept replaces it.
    pub(super) fn receive(&mut self, info: &CameraInfo) {
        if self.vins.is_some() {
            return;
        }
        let model = CameraModel::from_camera_info(
            info.width,
            info.height,
            &info.distortion_model,
            &info.k,
            &info.d,
        );
        let stamp = convert::stamp_ns(info.header.stamp.sec, info.header.stamp.nanosec);
        self.infos.retain(|(t, _)| *t != stamp);
        if self.infos.len() == CAMERA_INFOS_KEPT {
            self.infos.pop_front();
        }
        self.infos.push_back((stamp, model));
    }

    /// The model for a frame of `stamp_ns`: the VINS camera; else the `camera_info` of that
    /// stamp when one was kept (a camera that changes its model, e.g. a zoom, is matched
    /// frame by frame), else the newest one.
    fn for_stamp(&self, stamp_ns: i64) -> (Option<&Result<CameraModel, String>>, CameraSource) {
        if self.vins.is_some() {
            return (None, CameraSource::Vins);
        }
        match self.infos.iter().rev().find(|(t, _)| *t == stamp_ns) {
            Some((_, m)) => (Some(m), CameraSource::InfoSameStamp),
            None => match self.infos.back() {
                Some((_, m)) => (Some(m), CameraSource::InfoLatest),
                None => (None, CameraSource::None),
            },
        }
    }
}

/// The camera model of a slot for a `width x height` frame of `stamp_ns` when it fits,
/// else why not; and where it came from.
pub(super) fn usable_camera(
    slot: &CameraSlot,
    width: usize,
    height: usize,
    stamp_ns: i64,
) -> (Option<CameraModel>, Option<String>, CameraUse) {
    let cameras = slot.lock().unwrap();
    let (info, source) = cameras.for_stamp(stamp_ns);
    let model = match (&cameras.vins, info) {
        (Some(m), _) | (None, Some(Ok(m))) => m,
        (None, Some(Err(e))) => {
            let why = format!("camera_info rejected ({e}): tracks in pixels only");
            let used = CameraUse {
                source,
                model: None,
            };
            return (None, Some(why), used);
        }
        (None, None) => {
            let why = "no camera_info received: tracks in pixels only".to_string();
            return (None, Some(why), CameraUse::default());
        }
    };
    let used = CameraUse {
        source,
        model: Some((
            model.model,
            model.width,
            model.height,
            model.k[(0, 0)],
            model.k[(1, 1)],
        )),
    };
    if (model.width as usize, model.height as usize) == (width, height) {
        return (Some(model.clone()), None, used);
    }
    let what = if source == CameraSource::Vins {
        "vins_config's camera"
    } else {
        "camera_info"
    };
    let why = format!(
        "{what} is {}x{}, the images {width}x{height}: tracks in pixels only",
        model.width, model.height
    );
    (
        None,
        Some(why),
        CameraUse {
            model: None,
            ..used
        },
    )
}
