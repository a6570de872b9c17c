//! ROS parameters of the node.
//!
//! Every pipeline setting is a parameter named exactly as its dotted YAML key
//! (`canny.low_threshold`, `pyramid.levels`, ...; the list comes from [`Config::flatten`]),
//! plus a few node settings:
//!
//! | name                   | type         | default        | at run time |
//! |------------------------|--------------|----------------|-------------|
//! | `backend`              | string       | `auto`         | read-only   |
//! | `cuda.device`          | integer      | `0`            | read-only   |
//! | `inputs`               | string array | (one, unnamed) | read-only   |
//! | `transport`            | string array | `[raw]`        | read-only   |
//! | `image_qos.reliability`| string       | `best_effort`  | read-only   |
//! | `image_qos.depth`      | integer      | `1`            | read-only   |
//! | `diagnostics_period`   | double (s)   | `1.0`          | read-only   |
//! | `diagnostics.expected_hz` | double (Hz) | `0` (off)    | read-only   |
//! | `diagnostics.hz_tolerance` | double    | `0.1`          | read-only   |
//! | `diagnostics.timeout`  | double (s)   | `3.0`          | read-only   |
//! | `diagnostics.max_stamp_lag` | double (s) | `5.0`       | read-only   |
//! | `feature_format`       | string       | `vins_fusion`  | read-only   |
//! | `keep_freed_memory`    | bool         | `true`         | read-only   |
//! | `foxglove_annotations` | bool         | `false`        | read-only   |
//! | `debug_image`          | bool         | `false`        | yes         |
//! | `match.previous`       | bool         | `false`        | yes         |
//!
//! `match.previous` publishes `matches` (layout: `output::matches`): each frame's descriptor
//! matches to the previous frame the input processed (library matcher, k=2 with Lowe's
//! ratio 0.8 and cross-check; CUDA when the input's backend is).
//!
//! The parameter services are the node's own ([`services`]: descriptions, ranges, allowed
//! values and read-only flags from the tables validation uses).
//!
//! Pipeline settings can all be changed at run time: an update is validated against the
//! whole config ([`Config::with_values`]) and either applied completely or rejected with the
//! reason; workers pick the new config up before their next frame, so settings that resize
//! buffers (levels, scale) change between frames, never during one.

use std::cell::RefCell;

use r2r::ParameterValue;
use serde_yaml::Value;

pub use super::settings::NodeSettings;
use crate::camera::vins::VinsConfig;
use crate::config::Config;

/// The node setting that turns the `matches` output on.
pub const MATCH_PREVIOUS: &str = "match.previous";

const READ_ONLY: [&str; 15] = [
    "backend",
    "cuda.device",
    "inputs",
    "transport",
    "image_qos.reliability",
    "image_qos.depth",
    "diagnostics_period",
    "diagnostics.expected_hz",
    "diagnostics.hz_tolerance",
    "diagnostics.timeout",
    "diagnostics.max_stamp_lag",
    "feature_format",
    "vins_config",
    "keep_freed_memory",
    "foxglove_annotations",
];

/// What the workers read before each frame.
#[derive(Clone, Debug)]
pub struct Live {
    pub config: Config,
    pub debug_image: bool,
    /// `match.previous`: publish the matches to the previous frame.
    pub match_previous: bool,
    /// Bumped on every accepted change.
    pub generation: u64,
}

/// The node's parameters, shared by r2r's parameter services and the workers.
pub struct NodeParams {
    pub settings: NodeSettings,
    pub live: Live,
    /// The VINS config `vins_config` names, read at start; or why it could not be read.
    pub vins: Option<VinsConfig>,
    pub vins_problem: Option<String>,
    /// Updates checked together by SetParametersAtomically (r2r checks each name, then sets
    /// each): checked as one set, applied as one set.
    pending: RefCell<Vec<(String, Value)>>,
}

/// Converts a YAML scalar of the config tree to a ROS parameter value.
pub fn yaml_to_param(v: &Value) -> ParameterValue {
    match v {
        Value::Bool(b) => ParameterValue::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                ParameterValue::Integer(i)
            } else if let Some(u) = n.as_u64() {
                ParameterValue::Integer(u as i64)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                // f32 fields serialize as e.g. 1.2000000476837158; show them as 1.2.
                let short = f as f32;
                if short as f64 == f {
                    ParameterValue::Double(short.to_string().parse().unwrap_or(f))
                } else {
                    ParameterValue::Double(f)
                }
            }
        }
        Value::String(s) => ParameterValue::String(s.clone()),
        other => ParameterValue::String(serde_yaml::to_string(other).unwrap_or_default()),
    }
}

/// Converts a ROS parameter value to YAML for [`Config::with_values`]; type mismatches
/// are left to the config's own deserialisation, which names the key and the expected type.
pub fn param_to_yaml(v: &ParameterValue) -> Option<Value> {
    Some(match v {
        ParameterValue::Bool(b) => Value::Bool(*b),
        ParameterValue::Integer(i) => Value::Number((*i).into()),
        ParameterValue::Double(f) => Value::Number((*f).into()),
        ParameterValue::String(s) => Value::String(s.clone()),
        _ => return None,
    })
}

fn type_name(v: &ParameterValue) -> &'static str {
    match v {
        ParameterValue::NotSet => "not set",
        ParameterValue::Bool(_) => "bool",
        ParameterValue::Integer(_) => "integer",
        ParameterValue::Double(_) => "double",
        ParameterValue::String(_) => "string",
        ParameterValue::BoolArray(_) => "bool array",
        ParameterValue::ByteArray(_) => "byte array",
        ParameterValue::IntegerArray(_) => "integer array",
        ParameterValue::DoubleArray(_) => "double array",
        ParameterValue::StringArray(_) => "string array",
    }
}

fn is_config_key(config: &Config, key: &str) -> bool {
    config.flatten().iter().any(|(k, _)| k == key)
}

impl NodeParams {
    pub fn new() -> Self {
        NodeParams {
            settings: NodeSettings::default(),
            live: Live {
                config: Config::default(),
                debug_image: false,
                match_previous: false,
                generation: 0,
            },
            vins: None,
            vins_problem: None,
            pending: RefCell::new(Vec::new()),
        }
    }

    /// Applies the start-up values (params file, `-p name:=value`) all at once. Unknown
    /// names are returned (the caller warns; ROS tolerates extra parameters).
    pub fn apply_initial(
        &mut self,
        values: &[(String, ParameterValue)],
    ) -> Result<Vec<String>, String> {
        let mut config_updates = Vec::new();
        let mut unknown = Vec::new();
        let mut settings = self.settings.clone();
        let mut debug_image = self.live.debug_image;
        let mut match_previous = self.live.match_previous;
        for (name, value) in values {
            if is_config_key(&self.live.config, name) {
                let y = param_to_yaml(value).ok_or_else(|| {
                    format!("{name}: a {} is not a valid value", type_name(value))
                })?;
                config_updates.push((name.clone(), y));
            } else if name == "debug_image" {
                debug_image = as_bool(name, value)?;
            } else if name == MATCH_PREVIOUS {
                match_previous = as_bool(name, value)?;
            } else if READ_ONLY.contains(&name.as_str()) {
                set_setting(&mut settings, name, value)?;
            } else {
                unknown.push(name.clone());
            }
        }
        settings.validate()?;
        let mut config = self
            .live
            .config
            .with_values(&config_updates)
            .map_err(|e| e.to_string())?;
        // The VINS config's front-end keys win over the parameters' at start (a params file
        // sets every key; `ros2 param set` changes them later). A file that cannot be read
        // does not stop the node: it tracks on camera_info (or pixels) and says why in
        // /diagnostics.
        let (vins, vins_problem) = match settings.vins_config.as_str() {
            "" => (None, None),
            path => match VinsConfig::load(std::path::Path::new(path)) {
                Ok(v) => {
                    v.apply(&mut config.track);
                    // VINS-Mono's estimator reads VINS-Mono's layout.
                    if v.mono {
                        settings.feature_format = "vins_mono".into();
                    }
                    config.validate().map_err(|e| format!("vins_config: {e}"))?;
                    (Some(v), None)
                }
                Err(e) => (None, Some(e)),
            },
        };
        one_camera_for_vins_mono(&settings, &config)?;
        self.settings = settings;
        self.vins = vins;
        self.vins_problem = vins_problem;
        self.live.config = config;
        self.live.debug_image = debug_image;
        self.live.match_previous = match_previous;
        self.live.generation += 1;
        Ok(unknown)
    }

    /// Every parameter with its current value, in a stable order (node settings first).
    pub fn all(&self) -> Vec<(String, ParameterValue)> {
        let s = &self.settings;
        let mut out = vec![
            (
                "backend".to_string(),
                ParameterValue::String(s.backend.clone()),
            ),
            (
                "cuda.device".to_string(),
                ParameterValue::Integer(s.cuda_device),
            ),
            (
                "inputs".to_string(),
                // rcl cannot hold an empty array from a YAML file; [""] means "one, unnamed".
                ParameterValue::StringArray(if s.inputs.is_empty() {
                    vec![String::new()]
                } else {
                    s.inputs.clone()
                }),
            ),
            (
                "transport".to_string(),
                ParameterValue::StringArray(s.transport.clone()),
            ),
            (
                "image_qos.reliability".to_string(),
                ParameterValue::String(s.reliability.clone()),
            ),
            (
                "image_qos.depth".to_string(),
                ParameterValue::Integer(s.depth),
            ),
            (
                "diagnostics_period".to_string(),
                ParameterValue::Double(s.diagnostics_period),
            ),
            (
                "diagnostics.expected_hz".to_string(),
                ParameterValue::Double(s.diagnostics.expected_hz),
            ),
            (
                "diagnostics.hz_tolerance".to_string(),
                ParameterValue::Double(s.diagnostics.hz_tolerance),
            ),
            (
                "diagnostics.timeout".to_string(),
                ParameterValue::Double(s.diagnostics.timeout),
            ),
            (
                "diagnostics.max_stamp_lag".to_string(),
                ParameterValue::Double(s.diagnostics.max_stamp_lag),
            ),
            (
                "feature_format".to_string(),
                ParameterValue::String(s.feature_format.clone()),
            ),
            (
                "vins_config".to_string(),
                ParameterValue::String(s.vins_config.clone()),
            ),
            (
                "keep_freed_memory".to_string(),
                ParameterValue::Bool(s.keep_freed_memory),
            ),
            (
                "foxglove_annotations".to_string(),
                ParameterValue::Bool(s.foxglove_annotations),
            ),
            (
                "debug_image".to_string(),
                ParameterValue::Bool(self.live.debug_image),
            ),
            (
                MATCH_PREVIOUS.to_string(),
                ParameterValue::Bool(self.live.match_previous),
            ),
        ];
        out.extend(
            self.live
                .config
                .flatten()
                .into_iter()
                .map(|(k, v)| (k, yaml_to_param(&v))),
        );
        out
    }

    /// Validates one run-time change against the current state plus the updates already
    /// checked in this batch; nothing is applied.
    fn check(&self, name: &str, value: &ParameterValue) -> Result<(), String> {
        if is_config_key(&self.live.config, name) {
            let y = param_to_yaml(value)
                .ok_or_else(|| format!("a {} is not a valid value", type_name(value)))?;
            let mut pending = self.pending.borrow_mut();
            pending.retain(|(k, _)| k != name);
            pending.push((name.to_string(), y));
            let checked = self
                .live
                .config
                .with_values(&pending)
                .map_err(|e| e.to_string())
                .and_then(|c| one_camera_for_vins_mono(&self.settings, &c));
            if checked.is_err() {
                pending.clear();
            }
            checked
        } else if name == "debug_image" || name == MATCH_PREVIOUS {
            as_bool(name, value).map(|_| ())
        } else if READ_ONLY.contains(&name) {
            let current = self
                .all()
                .into_iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v);
            if current.as_ref() == Some(value) {
                Ok(())
            } else {
                Err(format!(
                    "{name} is read-only at run time (set it in the params file or with --ros-args -p, then restart)"
                ))
            }
        } else {
            Err(format!("unknown parameter {name:?}"))
        }
    }

    /// Applies one run-time change, validated against the whole config first; on error
    /// nothing changes. If `name` was checked as part of a batch, the whole batch is applied
    /// together now (so interdependent values can change at once).
    pub fn set(&mut self, name: &str, value: &ParameterValue) -> Result<(), String> {
        if is_config_key(&self.live.config, name) {
            let y = param_to_yaml(value)
                .ok_or_else(|| format!("a {} is not a valid value", type_name(value)))?;
            let batch = std::mem::take(&mut *self.pending.borrow_mut());
            let mut updates: Vec<(String, Value)> = if batch.iter().any(|(k, _)| k == name) {
                batch
            } else {
                Vec::new()
            };
            updates.retain(|(k, _)| k != name);
            updates.push((name.to_string(), y));
            let config = self
                .live
                .config
                .with_values(&updates)
                .map_err(|e| e.to_string())?;
            one_camera_for_vins_mono(&self.settings, &config)?;
            if config != self.live.config {
                self.live.config = config;
                self.live.generation += 1;
            }
            Ok(())
        } else if name == "debug_image" || name == MATCH_PREVIOUS {
            let b = as_bool(name, value)?;
            let live = if name == MATCH_PREVIOUS {
                &mut self.live.match_previous
            } else {
                &mut self.live.debug_image
            };
            if b != *live {
                *live = b;
                self.live.generation += 1;
            }
            Ok(())
        } else {
            self.check(name, value)
        }
    }
}

impl Default for NodeParams {
    fn default() -> Self {
        Self::new()
    }
}

/// VINS-Mono's estimator has one camera: `feature_format: vins_mono` with a stereo pair
/// (two inputs and `track.stereo`) would send it two cameras' points, refused here (at start
/// and on a run-time change of either).
fn one_camera_for_vins_mono(s: &NodeSettings, c: &Config) -> Result<(), String> {
    if s.feature_format == "vins_mono" && s.inputs.len() >= 2 && c.track.enabled && c.track.stereo {
        return Err(format!(
            "feature_format: vins_mono has one camera, but track.stereo with {} inputs would send \
             it two (use feature_format: vins_fusion, or track.stereo: false)",
            s.inputs.len()
        ));
    }
    Ok(())
}

fn as_bool(name: &str, v: &ParameterValue) -> Result<bool, String> {
    match v {
        ParameterValue::Bool(b) => Ok(*b),
        o => Err(format!("{name}: expected a bool, got a {}", type_name(o))),
    }
}

fn set_setting(s: &mut NodeSettings, name: &str, v: &ParameterValue) -> Result<(), String> {
    let wrong = |want: &str| format!("{name}: expected {want}, got a {}", type_name(v));
    match (name, v) {
        ("backend", ParameterValue::String(x)) => s.backend = x.clone(),
        ("inputs", ParameterValue::StringArray(x)) => {
            s.inputs = x.iter().filter(|n| !n.is_empty()).cloned().collect()
        }
        ("inputs", ParameterValue::String(x)) => {
            s.inputs = if x.is_empty() {
                vec![]
            } else {
                vec![x.clone()]
            }
        }
        ("transport", ParameterValue::StringArray(x)) => s.transport = x.clone(),
        ("transport", ParameterValue::String(x)) => s.transport = vec![x.clone()],
        ("transport", _) => return Err(wrong("a string or a string array")),
        ("image_qos.reliability", ParameterValue::String(x)) => s.reliability = x.clone(),
        ("image_qos.depth", ParameterValue::Integer(x)) => s.depth = *x,
        ("cuda.device", ParameterValue::Integer(x)) => s.cuda_device = *x,
        ("diagnostics_period", ParameterValue::Double(x)) => s.diagnostics_period = *x,
        (
            "diagnostics.expected_hz"
            | "diagnostics.hz_tolerance"
            | "diagnostics.timeout"
            | "diagnostics.max_stamp_lag",
            ParameterValue::Double(_) | ParameterValue::Integer(_),
        ) => {
            // (NaN for no other type: the pattern admits doubles and integers only.)
            let x = match v {
                ParameterValue::Double(x) => *x,
                ParameterValue::Integer(i) => *i as f64,
                _ => f64::NAN,
            };
            let d = &mut s.diagnostics;
            *match name {
                "diagnostics.expected_hz" => &mut d.expected_hz,
                "diagnostics.hz_tolerance" => &mut d.hz_tolerance,
                "diagnostics.timeout" => &mut d.timeout,
                _ => &mut d.max_stamp_lag,
            } = x;
        }
        ("feature_format", ParameterValue::String(x)) => s.feature_format = x.clone(),
        ("feature_format", _) => return Err(wrong("a string")),
        ("vins_config", ParameterValue::String(x)) => s.vins_config = x.clone(),
        ("vins_config", _) => return Err(wrong("a string (a file path)")),
        ("keep_freed_memory", ParameterValue::Bool(x)) => s.keep_freed_memory = *x,
        ("keep_freed_memory", _) => return Err(wrong("a bool")),
        ("foxglove_annotations", ParameterValue::Bool(x)) => s.foxglove_annotations = *x,
        ("foxglove_annotations", _) => return Err(wrong("a bool")),
        ("diagnostics_period", ParameterValue::Integer(x)) => s.diagnostics_period = *x as f64,
        ("backend" | "image_qos.reliability", _) => return Err(wrong("a string")),
        ("inputs", _) => return Err(wrong("a string array")),
        ("image_qos.depth" | "cuda.device", _) => return Err(wrong("an integer")),
        ("diagnostics_period", _) => return Err(wrong("a double")),
        (
            "diagnostics.expected_hz"
            | "diagnostics.hz_tolerance"
            | "diagnostics.timeout"
            | "diagnostics.max_stamp_lag",
            _,
        ) => return Err(wrong("a double")),
        _ => return Err(format!("unknown parameter {name:?}")),
    }
    Ok(())
}

pub mod services;

#[cfg(test)]
mod tests;
