//! A VINS config file, read so that our tracker runs as that VINS would:
//! - VINS-Fusion's (what `vins_node` is started with): its camodocal camera files
//!   (`cam0_calib`, `cam1_calib`, relative to the config's folder, [`super::camodocal`]), its
//!   image and IMU topics, and the front-end keys `max_cnt`, `min_dist`, `flow_back`,
//!   `F_threshold`, `multiple_thread` (-> the `feature` rate), `num_of_cam` (-> stereo);
//! - VINS-Mono's (its `feature_tracker` and estimator share one file, which is also the
//!   camera file: `model_type` at the top, no `cam0_calib`): `image_topic`, `imu_topic`,
//!   `max_cnt`, `min_dist`, `freq`, `F_threshold`, `equalize`; `fisheye: 1` (a mask image from
//!   VINS-Mono's package) is refused.
//!
//! Errors name the file and the key. [`VinsConfig::apply`] sets the tracker's settings as
//! that VINS's front-end runs: VINS-Fusion's `FeatureTracker` (its mask order, camodocal's
//! lifting, no F test: VINS-Fusion reads `F_threshold` but leaves `rejectWithF` out), or
//! VINS-Mono's node (`track.frontend: vins_mono`, its `freq`, CLAHE with `equalize`, the F
//! test, no flow back).

use std::path::{Path, PathBuf};

use super::{camodocal, CameraModel};
use crate::config::{Frontend, Lifting, MaskOrder, TrackConfig, TrackDetector};

/// What our front-end takes from a VINS-Fusion config.
#[derive(Clone, Debug)]
pub struct VinsConfig {
    pub path: PathBuf,
    /// `num_of_cam` (1 or 2).
    pub cameras: Vec<CameraModel>,
    /// `image0_topic`, `image1_topic` (the second may be unused with one camera).
    pub image_topics: Vec<String>,
    pub imu_topic: Option<String>,
    pub max_cnt: u32,
    pub min_dist: f64,
    pub flow_back: bool,
    pub f_threshold: Option<f64>,
    /// `multiple_thread`: VINS's own image path then hands every second frame on.
    pub multiple_thread: bool,
    /// VINS-Mono's config (the file is its own camera file).
    pub mono: bool,
    /// VINS-Mono: `freq` (0 when missing: 100 Hz, as VINS-Mono) and `equalize`.
    pub freq: u32,
    pub equalize: bool,
}

impl VinsConfig {
    /// Reads `path` and the camera files it names.
    pub fn load(path: &Path) -> Result<VinsConfig, String> {
        let here = |e: String| format!("{}: {e}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| here(e.to_string()))?;
        let root = camodocal::parse_opencv_yaml(&text).map_err(here)?;
        let num = |key: &str| -> Result<Option<f64>, String> {
            match root.get(key) {
                None => Ok(None),
                Some(v) => match v.as_f64() {
                    Some(x) if x.is_finite() => Ok(Some(x)),
                    _ => Err(here(format!("`{key}` is not a finite number ({v:?})"))),
                },
            }
        };
        let text_key = |key: &str| root.get(key).and_then(|v| v.as_str()).map(str::to_string);
        // VINS-Mono's file is its camera file: `model_type` at the top, no `cam0_calib`.
        let mono = root.get("cam0_calib").is_none() && root.get("model_type").is_some();
        if mono && num("fisheye")?.unwrap_or(0.0) != 0.0 {
            return Err(here(
                "`fisheye: 1` (VINS-Mono's fisheye mask image) is not supported".into(),
            ));
        }
        let ncam = num("num_of_cam")?.unwrap_or(1.0);
        if ncam != 1.0 && ncam != 2.0 {
            return Err(here(format!("`num_of_cam` is {ncam}, not 1 or 2")));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut cameras = Vec::new();
        if mono {
            cameras.push(camodocal::from_yaml(&text).map_err(here)?);
        }
        for c in 0..if mono { 0 } else { ncam as usize } {
            let key = format!("cam{c}_calib");
            let name = text_key(&key).ok_or_else(|| here(format!("no `{key}`")))?;
            let file = dir.join(&name);
            let t = std::fs::read_to_string(&file)
                .map_err(|e| here(format!("`{key}`: {}: {e}", file.display())))?;
            let cam = camodocal::from_yaml(&t)
                .map_err(|e| here(format!("`{key}`: {}: {e}", file.display())))?;
            cameras.push(cam);
        }
        let topic_keys: &[&str] = if mono {
            &["image_topic"]
        } else {
            &["image0_topic", "image1_topic"]
        };
        let image_topics = topic_keys.iter().filter_map(|k| text_key(k)).collect();
        let positive = |key: &str, v: Option<f64>| -> Result<Option<f64>, String> {
            match v {
                Some(x) if x <= 0.0 => Err(here(format!("`{key}` is {x}, not positive"))),
                v => Ok(v),
            }
        };
        Ok(VinsConfig {
            path: path.to_path_buf(),
            cameras,
            image_topics,
            imu_topic: text_key("imu_topic"),
            max_cnt: positive("max_cnt", num("max_cnt")?)?.unwrap_or(150.0) as u32,
            min_dist: positive("min_dist", num("min_dist")?)?.unwrap_or(30.0),
            flow_back: num("flow_back")?.unwrap_or(0.0) != 0.0,
            f_threshold: num("F_threshold")?,
            multiple_thread: num("multiple_thread")?.unwrap_or(0.0) != 0.0,
            mono,
            freq: match num("freq")? {
                Some(f) if !(0.0..=1000.0).contains(&f) => {
                    return Err(here(format!("`freq` is {f}, not in 0..=1000")))
                }
                f => f.unwrap_or(0.0).round() as u32,
            },
            equalize: num("equalize")?.unwrap_or(0.0) != 0.0,
        })
    }

    /// The camera of image topic `topic`: `image{c}_topic` is camera c; another topic gets
    /// the first camera.
    pub fn camera_for(&self, topic: &str) -> &CameraModel {
        let c = self
            .image_topics
            .iter()
            .position(|t| t == topic)
            .filter(|&c| c < self.cameras.len())
            .unwrap_or(0);
        &self.cameras[c]
    }

    /// The tracker as VINS-Fusion's `FeatureTracker` with this config, or as VINS-Mono's
    /// `feature_tracker` node with a VINS-Mono config.
    pub fn apply(&self, track: &mut TrackConfig) {
        if self.mono {
            self.apply_mono(track);
            return;
        }
        self.apply_shared(track);
        track.min_distance = self.min_dist;
        track.flow_back = self.flow_back;
        track.ransac_threshold = 0.0;
        // `num_of_cam: 2`: VINS-Fusion's stereo mode (the node's first two inputs, the
        // replay's two image topics).
        track.stereo = self.cameras.len() == 2;
        // `multiple_thread: 1`: VINS's own image path hands its estimator every second
        // frame; its `feature` path keeps every message, so we send what it would keep.
        track.feature_every = if self.multiple_thread { 2 } else { 1 };
        track.frontend = Frontend::VinsFusion;
        track.equalize = false;
    }

    /// VINS-Mono's node: its frequency control, CLAHE with `equalize`, the F test on the
    /// published frames (`F_threshold`, 1 px when missing), no flow back, `min_dist` as the
    /// whole pixels VINS-Mono reads it as.
    fn apply_mono(&self, track: &mut TrackConfig) {
        self.apply_shared(track);
        track.frontend = Frontend::VinsMono;
        track.freq = self.freq;
        track.equalize = self.equalize;
        track.min_distance = self.min_dist.round();
        track.flow_back = false;
        track.ransac_threshold = self.f_threshold.unwrap_or(1.0);
        track.stereo = false;
        track.feature_every = 1;
    }

    /// What both VINS front-ends run with: tracking on, `max_cnt`, LK window 21 on 3
    /// levels, goodFeaturesToTrack at quality 0.01, VINS's mask order, camodocal's lifting.
    fn apply_shared(&self, track: &mut TrackConfig) {
        track.enabled = true;
        track.max_features = self.max_cnt;
        track.window = 21;
        track.levels = 3;
        track.detector = TrackDetector::Gftt;
        track.quality = 0.01;
        track.mask_order = MaskOrder::Vins;
        track.lifting = Lifting::Camodocal;
    }
}

/// Where a VINS config copy for an external tracker points VINS's image topics: a topic
/// nobody publishes.
pub const UNUSED_IMAGE_TOPICS: [&str; 2] =
    ["/gpu_features/unused/image0", "/gpu_features/unused/image1"];

/// A VINS config's text with `image0_topic` and `image1_topic` pointed at
/// [`UNUSED_IMAGE_TOPICS`], every other line kept as it is (VINS-Fusion always subscribes
/// its image topics and feeds its own tracks to the same buffer as the `feature` topic's).
pub fn for_external_tracker(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let key = ["image0_topic", "image1_topic"]
            .iter()
            .position(|k| line.starts_with(k) && line[k.len()..].trim_start().starts_with(':'));
        match key {
            Some(i) => {
                out.push_str(&format!(
                    "{}: \"{}\"",
                    ["image0_topic", "image1_topic"][i],
                    UNUSED_IMAGE_TOPICS[i]
                ));
                out.push_str("   # gpu_features publishes /feature_tracker/feature\n");
            }
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    const CAM: &str = "%YAML:1.0\n---\nmodel_type: PINHOLE\ncamera_name: camera\nimage_width: 752\nimage_height: 480\ndistortion_parameters:\n   k1: -0.28\n   k2: 0.07\n   p1: 0.0002\n   p2: 0.00002\nprojection_parameters:\n   fx: 458.6\n   fy: 457.3\n   cx: 367.2\n   cy: 248.4\n";
    const CONFIG: &str = "%YAML:1.0\nimu: 1\nnum_of_cam: 1\nimu_topic: \"/imu0\"\nimage0_topic: \"/cam0/image_raw\"\nimage1_topic: \"/cam1/image_raw\"\ncam0_calib: \"cam0.yaml\"\nbody_T_cam0: !!opencv-matrix\n   rows: 4\n   cols: 4\n   dt: d\n   data: [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]\nmultiple_thread: 1\nmax_cnt: 120\nmin_dist: 25\nF_threshold: 1.0\nflow_back: 1\n";

    #[test]
    fn reads_a_vins_fusion_config_and_its_camera() {
        let dir = std::env::temp_dir().join(format!("gf-vins-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, "cam0.yaml", CAM);
        let p = write(&dir, "config.yaml", CONFIG);
        let v = VinsConfig::load(&p).unwrap();
        assert_eq!(v.cameras.len(), 1);
        assert_eq!(v.cameras[0].k[(0, 0)], 458.6);
        assert_eq!(v.cameras[0].lifting, Lifting::Camodocal);
        assert_eq!(
            (v.max_cnt, v.min_dist, v.flow_back, v.multiple_thread),
            (120, 25.0, true, true)
        );
        assert_eq!(v.imu_topic.as_deref(), Some("/imu0"));
        assert_eq!(v.camera_for("/cam0/image_raw").width, 752);
        let mut t = TrackConfig::default();
        v.apply(&mut t);
        assert_eq!(
            (t.max_features, t.min_distance, t.ransac_threshold),
            (120, 25.0, 0.0)
        );

        // Errors name the file and the key.
        let bad = write(
            &dir,
            "bad.yaml",
            &CONFIG.replace("cam0.yaml", "nowhere.yaml"),
        );
        let e = VinsConfig::load(&bad).unwrap_err();
        assert!(
            e.contains("bad.yaml") && e.contains("cam0_calib") && e.contains("nowhere.yaml"),
            "{e}"
        );
        write(&dir, "zero.yaml", &CAM.replace("fx: 458.6", "fx: 0.0"));
        let bad = write(&dir, "bad2.yaml", &CONFIG.replace("cam0.yaml", "zero.yaml"));
        let e = VinsConfig::load(&bad).unwrap_err();
        assert!(e.contains("zero.yaml") && e.contains("focal length"), "{e}");
        let bad = write(
            &dir,
            "bad3.yaml",
            &CONFIG.replace("max_cnt: 120", "max_cnt: .nan"),
        );
        assert!(VinsConfig::load(&bad).unwrap_err().contains("max_cnt"));
        let bad = write(
            &dir,
            "bad4.yaml",
            &CONFIG.replace("num_of_cam: 1", "num_of_cam: 3"),
        );
        assert!(VinsConfig::load(&bad).unwrap_err().contains("num_of_cam"));
        // The copy for an external tracker: the image topics pointed nowhere, all else kept.
        let copy = for_external_tracker(CONFIG);
        let p = write(&dir, "copy.yaml", &copy);
        let c = VinsConfig::load(&p).unwrap();
        assert_eq!(
            c.image_topics,
            UNUSED_IMAGE_TOPICS.map(String::from).to_vec()
        );
        let other = |t: &str| {
            t.lines()
                .filter(|l| !l.starts_with("image"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(other(&copy), other(CONFIG));
        let e = VinsConfig::load(&dir.join("missing.yaml")).unwrap_err();
        assert!(e.contains("missing.yaml"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reads_a_vins_mono_config_which_is_its_camera_file() {
        let dir = std::env::temp_dir().join(format!("gf-vins-mono-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mono = format!(
            "{CAM}imu_topic: \"/imu0\"\nimage_topic: \"/cam0/image_raw\"\nmax_cnt: 150\n\
             min_dist: 30\nfreq: 10\nF_threshold: 1.0\nequalize: 1\nfisheye: 0\n"
        );
        let p = write(&dir, "euroc_config.yaml", &mono);
        let v = VinsConfig::load(&p).unwrap();
        assert!(v.mono);
        assert_eq!(v.cameras.len(), 1);
        assert_eq!(v.cameras[0].k[(0, 0)], 458.6);
        assert_eq!(v.image_topics, vec!["/cam0/image_raw".to_string()]);
        assert_eq!((v.freq, v.equalize), (10, true));
        let mut t = TrackConfig {
            flow_back: true,
            feature_every: 2,
            ..Default::default()
        };
        v.apply(&mut t);
        assert_eq!(t.frontend, Frontend::VinsMono);
        assert_eq!((t.freq, t.equalize, t.flow_back), (10, true, false));
        assert_eq!(
            (t.ransac_threshold, t.feature_every, t.stereo),
            (1.0, 1, false)
        );
        let c = crate::Config {
            track: t,
            ..Default::default()
        };
        c.validate().unwrap();
        // Missing keys: freq 0 (100 Hz, as VINS-Mono), no equalize, F test 1 px.
        let bare = write(&dir, "bare.yaml", CAM);
        let v = VinsConfig::load(&bare).unwrap();
        let mut t = TrackConfig::default();
        v.apply(&mut t);
        assert_eq!((t.freq, t.equalize, t.ransac_threshold), (0, false, 1.0));
        // A fisheye mask and a negative rate are refused, naming the file and the key.
        let fish = write(&dir, "fish.yaml", &mono.replace("fisheye: 0", "fisheye: 1"));
        let e = VinsConfig::load(&fish).unwrap_err();
        assert!(e.contains("fish.yaml") && e.contains("fisheye"), "{e}");
        let neg = write(&dir, "neg.yaml", &mono.replace("freq: 10", "freq: -5"));
        let e = VinsConfig::load(&neg).unwrap_err();
        assert!(e.contains("neg.yaml") && e.contains("freq"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
