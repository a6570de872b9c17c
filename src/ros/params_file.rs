//! ROS params files read as rcl reads them (`<node>: ros__parameters: {...}`, nested maps
//! flattened to dotted names), for the node's reference mode, which runs without rcl.

use r2r::ParameterValue;
use serde_yaml::Value;

use super::params::yaml_to_param;

/// Reads a ROS params file (`<node>: ros__parameters: {...}`, nested maps flattened to
/// dotted names as rcl does) and returns the values meant for `node_name` (sections `/**`,
/// `node_name`, `/node_name` or `/<ns>/node_name`, in file order).
pub fn load_params_file(
    path: &std::path::Path,
    node_name: &str,
) -> Result<Vec<(String, ParameterValue)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc: Value = serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    let Value::Mapping(top) = doc else {
        return Err(format!("{}: not a mapping", path.display()));
    };
    for (k, v) in top {
        let k = k.as_str().unwrap_or_default();
        let matches = k == "/**"
            || k == node_name
            || k.trim_start_matches('/') == node_name
            || k.ends_with(&format!("/{node_name}"));
        if !matches {
            continue;
        }
        if let Some(p) = v.get("ros__parameters") {
            flatten_into("", p, &mut out)?;
        }
    }
    Ok(out)
}

fn flatten_into(
    prefix: &str,
    v: &Value,
    out: &mut Vec<(String, ParameterValue)>,
) -> Result<(), String> {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                let k = k.as_str().unwrap_or_default();
                let key = if prefix.is_empty() {
                    k.to_string()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_into(&key, v, out)?;
            }
        }
        Value::Sequence(items) => {
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect();
            let value = if let Some(s) = strings {
                ParameterValue::StringArray(s)
            } else if let Some(i) = items.iter().map(Value::as_i64).collect::<Option<Vec<_>>>() {
                ParameterValue::IntegerArray(i)
            } else if let Some(f) = items.iter().map(Value::as_f64).collect::<Option<Vec<_>>>() {
                ParameterValue::DoubleArray(f)
            } else if let Some(b) = items.iter().map(Value::as_bool).collect::<Option<Vec<_>>>() {
                ParameterValue::BoolArray(b)
            } else {
                return Err(format!("{prefix}: mixed-type arrays are not parameters"));
            };
            out.push((prefix.to_string(), value));
        }
        scalar => out.push((prefix.to_string(), yaml_to_param(scalar))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ros::params::NodeParams;

    #[test]
    fn params_file_is_read_like_rcl() {
        let dir = std::env::temp_dir().join(format!("gf-params-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("p.yaml");
        std::fs::write(
            &f,
            "/**:\n  ros__parameters:\n    backend: cpu\nother:\n  ros__parameters:\n    backend: cuda\ngpu_features:\n  ros__parameters:\n    inputs: [left, right]\n    canny:\n      low_threshold: 20.0\n",
        )
        .unwrap();
        let v = load_params_file(&f, "gpu_features").unwrap();
        let mut p = NodeParams::new();
        p.apply_initial(&v).unwrap();
        assert_eq!(p.settings.backend, "cpu");
        assert_eq!(p.settings.inputs, vec!["left", "right"]);
        assert_eq!(p.live.config.canny.low_threshold, 20.0);
        std::fs::remove_dir_all(dir).ok();
    }
}
