//! The ROS 2 node (`--features ros`): a thin shell around [`crate::Pipeline`] built on r2r.
//! Topics, parameters, QoS and diagnostics are described in docs/ros.md.
//!
//! - [`node`]: runtime (subscriptions, the inputs' slots and workers, shutdown);
//! - `worker`: one input's thread (newest frame -> pipeline -> publishers);
//! - `cameras`: an input's camera model (VINS config or `camera_info` by stamp);
//! - `clock`: the time frame stamps are checked against (`use_sim_time`);
//! - `compressed`: `CompressedImage` input (`transport: compressed`), decoded on the worker;
//! - `diagnostics`: counters per input, /diagnostics statuses, log rate limits;
//! - `tracks`: the feature tracker's outputs (`tracks`, VINS's `feature` and `restart`) and
//!   the `camera_info` it undistorts with;
//! - `publish`: which outputs someone reads (the others are not built);
//! - `warm_ahead`: when one input's next frame is due, for the GPU's warm-up before it;
//! - [`params`]: the ROS parameters (the config's dotted keys + node settings);
//! - [`convert`]: `sensor_msgs` <-> library types;
//! - [`trace`]: per-frame instants on the host's monotonic clock (`GF_TRACE_DIR`), written
//!   by the node, the relay and the load so that a round trip splits into its parts;
//! - [`load`]: `gpu_features_load`, the load generator and loopback soak driver, and
//!   `gpu_features_relay`, the no-op node that gives its benchmark's transport floor.
//!
//! The binary also has a reference mode that needs no ROS graph, used by the integration
//! test to get "what the library gives" for the exact bytes it publishes:
//! `gpu_features_node --reference MANIFEST.yaml` (see [`reference`]).
//!
//! May import: `camera`, `cdr`, `config`, `cpu`, `cuda`, `error`, `features`, `image`,
//! `matching`, `output`, `pipeline`, `process`, `report`, `track` (the node and the load
//! generator are shells around the library).

mod cameras;
mod clock;
mod compressed;
pub mod convert;
mod diagnostics;
#[cfg(feature = "tools")]
pub mod load;
mod matches;
pub mod node;
pub mod params;
pub mod params_file;
mod publish;
mod settings;
pub mod take;
pub mod trace;
mod tracks;
mod warm_ahead;
mod worker;

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::output::pointcloud;
use crate::pipeline::Pipeline;
use params::NodeParams;

/// Entry point of `gpu_features_node`; returns the process exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--reference") {
        let Some(manifest) = args.get(2) else {
            eprintln!("usage: gpu_features_node --reference MANIFEST.yaml");
            return 2;
        };
        return match reference(Path::new(manifest)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("gpu_features_node --reference: {e}");
                1
            }
        };
    }
    if args.iter().any(|a| a == "-h" || a == "--help") && !args.iter().any(|a| a == "--ros-args") {
        println!(
            "gpu_features_node [--ros-args [-r from:=to] [-p name:=value] [--params-file FILE]]\n\
             Subscribes `image` (or `<input>/image` per entry of the `inputs` parameter) and\n\
             publishes `keypoints` (PointCloud2), `edges` (mono8), `debug_image` (bgr8, when the\n\
             `debug_image` parameter is true and someone subscribes) and /diagnostics.\n\
             See docs/ros.md."
        );
        return 0;
    }
    match node::run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gpu_features_node: {e}");
            1
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    /// ROS params file, read as the node reads it (section of `node_name`).
    #[serde(default)]
    params_file: Option<PathBuf>,
    #[serde(default = "default_node_name")]
    node_name: String,
    /// Overrides on top of the file, by parameter name (as `-p name:=value`).
    #[serde(default)]
    params: serde_yaml::Mapping,
    /// Image files to decode (PNG/JPEG/PGM) into raw frames first, as the CLI loads them.
    #[serde(default)]
    images: Vec<ExportImage>,
    #[serde(default)]
    frames: Vec<RefFrame>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportImage {
    image: PathBuf,
    /// Writes `<out>.raw` (packed rows) and `<out>.meta` (`width height encoding`).
    out: PathBuf,
}

fn with_ext(p: &Path, ext: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

fn default_node_name() -> String {
    node::NODE_NAME.to_string()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefFrame {
    /// Raw bytes of `sensor_msgs/Image.data`.
    raw: PathBuf,
    width: usize,
    height: usize,
    step: usize,
    encoding: String,
    #[serde(default)]
    big_endian: bool,
    /// Writes `<out>.cloud` (PointCloud2 data bytes) and `<out>.edges` (mono8 bytes, when
    /// Canny is on), or `<out>.error` with the decode error.
    out: PathBuf,
}

/// Reference mode: processes raw frames exactly as the node would (same parameter parsing,
/// same validation, same output encoding) with no ROS graph involved.
fn reference(manifest: &Path) -> Result<(), String> {
    let text =
        std::fs::read_to_string(manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let m: Manifest =
        serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let mut values = match &m.params_file {
        Some(f) => params_file::load_params_file(f, &m.node_name)?,
        None => Vec::new(),
    };
    for (k, v) in &m.params {
        let k = k.as_str().ok_or("params: keys must be strings")?;
        values.push((k.to_string(), params::yaml_to_param(v)));
    }
    let mut p = NodeParams::new();
    p.apply_initial(&values)?;
    p.settings.select_cuda_device();
    let mut pipeline = Pipeline::new(p.live.config.clone(), p.settings.backend_choice()?)
        .map_err(|e| e.to_string())?;
    for e in &m.images {
        let frame = crate::image::load_view_owned(&e.image).map_err(|e| e.to_string())?;
        std::fs::write(with_ext(&e.out, ".raw"), &frame.data).map_err(|e| e.to_string())?;
        let meta = format!(
            "{} {} {}\n",
            frame.width,
            frame.height,
            frame.encoding.name()
        );
        std::fs::write(with_ext(&e.out, ".meta"), meta).map_err(|e| e.to_string())?;
    }
    let mut buf = Vec::new();
    for f in &m.frames {
        let data = std::fs::read(&f.raw).map_err(|e| format!("{}: {e}", f.raw.display()))?;
        let out_file = |ext: &str| with_ext(&f.out, ext);
        let view = match crate::image::ImageView::new(
            &data,
            f.width,
            f.height,
            f.step,
            &f.encoding,
            f.big_endian,
        ) {
            Ok(v) => v,
            Err(e) => {
                std::fs::write(out_file(".error"), e.to_string()).map_err(|e| e.to_string())?;
                continue;
            }
        };
        let features = pipeline.process(&view).map_err(|e| e.to_string())?;
        pointcloud::encode(
            &features.keypoints,
            features.descriptors_for(&p.live.config),
            &mut buf,
        );
        std::fs::write(out_file(".cloud"), &buf).map_err(|e| e.to_string())?;
        if let Some(edges) = &features.edges {
            std::fs::write(out_file(".edges"), &edges.data).map_err(|e| e.to_string())?;
        }
        println!(
            "{} {}x{} {}: {} keypoints, backend {}",
            f.raw.display(),
            f.width,
            f.height,
            f.encoding,
            features.keypoints.len(),
            pipeline.backend().name()
        );
    }
    Ok(())
}
