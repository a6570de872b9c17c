//! The node's settings fixed at start (backend, CUDA device, inputs, image QoS, diagnostics
//! period): their values and their validation. The parameters that carry them are in
//! `params.rs`.

use crate::pipeline::BackendChoice;

/// Node settings fixed at start.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSettings {
    pub backend: String,
    /// CUDA device ordinal the pipelines open (several GPUs: one node per GPU).
    pub cuda_device: i64,
    /// Camera names; empty = one camera with un-prefixed topics.
    pub inputs: Vec<String>,
    pub reliability: String,
    pub depth: i64,
    pub diagnostics_period: f64,
    /// Layout of the `feature` topic (with `track.enabled`): `vins_fusion` or `vins_mono`.
    pub feature_format: String,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            backend: "auto".into(),
            cuda_device: 0,
            inputs: Vec::new(),
            reliability: "best_effort".into(),
            depth: 1,
            diagnostics_period: 1.0,
            feature_format: "vins_fusion".into(),
        }
    }
}

impl NodeSettings {
    pub fn backend_choice(&self) -> Result<BackendChoice, String> {
        self.backend.parse()
    }

    /// Points the CUDA backend at `cuda.device`; call before creating the pipelines.
    pub fn select_cuda_device(&self) {
        #[cfg(feature = "cuda")]
        crate::cuda::set_device(self.cuda_device as usize);
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        self.backend_choice().map_err(|e| format!("backend: {e}"))?;
        if !(0..=1023).contains(&self.cuda_device) {
            return Err(format!(
                "cuda.device: {} is not a CUDA device ordinal (0..=1023)",
                self.cuda_device
            ));
        }
        if !matches!(self.reliability.as_str(), "best_effort" | "reliable") {
            return Err(format!(
                "image_qos.reliability: {:?} is not best_effort or reliable",
                self.reliability
            ));
        }
        if !(1..=1000).contains(&self.depth) {
            return Err(format!(
                "image_qos.depth: {} is not in 1..=1000",
                self.depth
            ));
        }
        if crate::output::tracks::VinsFormat::parse(&self.feature_format).is_none() {
            return Err(format!(
                "feature_format: {:?} is not vins_fusion or vins_mono",
                self.feature_format
            ));
        }
        if !(self.diagnostics_period.is_finite() && self.diagnostics_period >= 0.05) {
            return Err(format!(
                "diagnostics_period: {} is not a number of seconds >= 0.05",
                self.diagnostics_period
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for name in &self.inputs {
            let ok = !name.is_empty()
                && !name.starts_with('/')
                && !name.ends_with('/')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/');
            if !ok {
                return Err(format!(
                    "inputs: {name:?} is not a relative topic namespace ([A-Za-z0-9_/], no leading or trailing /)"
                ));
            }
            if !seen.insert(name) {
                return Err(format!("inputs: {name:?} is listed twice"));
            }
        }
        Ok(())
    }
}
