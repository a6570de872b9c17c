//! The config tree by dotted keys (`canny.low_threshold`): flattened for the ROS parameters,
//! and updated from `--set key=value` and parameter events, always validated whole.

use super::*;

impl Config {
    /// Every setting as `(dotted.key, value)`, in tree order (drives ROS parameters).
    pub fn flatten(&self) -> Vec<(String, serde_yaml::Value)> {
        fn walk(prefix: &str, v: &serde_yaml::Value, out: &mut Vec<(String, serde_yaml::Value)>) {
            match v {
                serde_yaml::Value::Mapping(m) => {
                    for (k, v) in m {
                        let k = k.as_str().unwrap_or_default();
                        let key = if prefix.is_empty() {
                            k.to_string()
                        } else {
                            format!("{prefix}.{k}")
                        };
                        walk(&key, v, out);
                    }
                }
                other => out.push((prefix.to_string(), other.clone())),
            }
        }
        let mut out = Vec::new();
        walk(
            "",
            &serde_yaml::to_value(self).expect("config serializes"),
            &mut out,
        );
        out
    }

    /// Returns a copy with `key` (dotted) set to `value` (YAML scalar syntax), validated.
    /// The original is untouched on error, so a bad update is never applied half-way.
    pub fn with_value(&self, key: &str, value: &str) -> Result<Config> {
        let parsed: serde_yaml::Value =
            serde_yaml::from_str(value).map_err(|e| Error::Config(format!("{key}: {e}")))?;
        self.with_values(&[(key.to_string(), parsed)])
    }

    /// Applies one `KEY=VALUE` setting as the CLI's `--set` and the fuzz harness spell it
    /// (spaces around the key and the value are ignored).
    pub fn with_set(&self, setting: &str) -> Result<Config> {
        let (k, v) = setting
            .split_once('=')
            .ok_or_else(|| Error::Config(format!("--set {setting:?}: expected KEY=VALUE")))?;
        self.with_value(k.trim(), v.trim())
    }

    /// Applies several dotted updates at once, validated as a whole.
    pub fn with_values(&self, updates: &[(String, serde_yaml::Value)]) -> Result<Config> {
        let mut tree = serde_yaml::to_value(self).expect("config serializes");
        for (key, value) in updates {
            let mut node = &mut tree;
            for part in key.split('.') {
                node = node
                    .as_mapping_mut()
                    .and_then(|m| m.get_mut(part))
                    .ok_or_else(|| Error::Config(format!("unknown key {key:?}")))?;
            }
            if node.is_mapping() {
                return Err(Error::Config(format!("{key:?} is a section, not a value")));
            }
            *node = value.clone();
        }
        // Through text, not `from_value`: only the text deserializer puts the key's path in
        // its errors ("pyramid.levels: invalid type: ..."). The line/column it adds refer to
        // this generated text, so they are dropped.
        let text = serde_yaml::to_string(&tree).map_err(|e| Error::Config(e.to_string()))?;
        let cfg: Config = serde_yaml::from_str(&text).map_err(|e| {
            let mut msg = e.to_string();
            if let Some(l) = e.location() {
                let at = format!(" at line {} column {}", l.line(), l.column());
                if let Some(head) = msg.strip_suffix(&at) {
                    msg = head.to_string();
                }
            }
            Error::Config(msg)
        })?;
        cfg.validate()?;
        Ok(cfg)
    }
}
