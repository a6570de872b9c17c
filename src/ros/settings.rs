//! The node's settings fixed at start (backend, CUDA device, inputs, image QoS, diagnostics
//! period, VINS's layout, the allocator's retention): their values and their validation, and
//! the process-wide ones applied ([`NodeSettings::select_cuda_device`],
//! [`NodeSettings::apply_memory_policy`]). The parameters that carry them are in
//! `params.rs`.

use crate::config::schema::Domain;
use crate::pipeline::BackendChoice;

/// A node setting as `describe_parameters` gives it: name, domain (None: any string or
/// string array, checked in [`NodeSettings::validate`]), whether it is fixed at start, and
/// what it does.
pub struct NodeSpec {
    pub name: &'static str,
    pub domain: Option<Domain>,
    pub read_only: bool,
    pub about: &'static str,
}

const fn node(name: &'static str, domain: Option<Domain>, about: &'static str) -> NodeSpec {
    NodeSpec {
        name,
        domain,
        read_only: true,
        about,
    }
}

const fn float(min: f64, max: f64) -> Option<Domain> {
    Some(Domain::Float {
        min,
        max,
        min_open: false,
        max_open: false,
    })
}

const fn int(min: i64, max: i64) -> Option<Domain> {
    Some(Domain::Int {
        min,
        max,
        odd: false,
        or_zero: false,
    })
}

/// Every node setting (the pipeline's keys are `crate::config::schema::SPECS`): the one
/// table [`NodeSettings::validate`] checks the ranges and names of, and `describe_parameters`
/// answers from.
pub const NODE_SPECS: &[NodeSpec] = &[
    node(
        "backend",
        Some(Domain::OneOf(&["auto", "cpu", "cuda"])),
        "auto: CUDA when usable, else the CPU (the log says why); cpu; cuda",
    ),
    node(
        "cuda.device",
        int(0, 1023),
        "the CUDA device ordinal the pipelines open (several GPUs: one node per GPU)",
    ),
    node(
        "inputs",
        None,
        "camera names: input k subscribes <name>/image and publishes <name>/keypoints, ...; [\"\"] or unset = one camera with un-prefixed topics",
    ),
    node(
        "transport",
        None,
        "raw (<input>/image, sensor_msgs/Image) or compressed (<input>/image/compressed, JPEG/PNG CompressedImage); one value for every input or one per input",
    ),
    node(
        "image_qos.reliability",
        Some(Domain::OneOf(&["best_effort", "reliable"])),
        "the image subscription's reliability (best_effort: sensor data)",
    ),
    node(
        "image_qos.depth",
        int(1, 1000),
        "the image subscription's keep-last depth",
    ),
    node(
        "diagnostics_period",
        Some(Domain::Float {
            min: 0.05,
            max: f64::INFINITY,
            min_open: false,
            max_open: false,
        }),
        "seconds between /diagnostics messages",
    ),
    node(
        "diagnostics.expected_hz",
        float(0.0, 100_000.0),
        "the camera's rate: WARN when the rate over 5 periods is outside expected_hz * (1 +- hz_tolerance); 0 = not checked",
    ),
    node(
        "diagnostics.hz_tolerance",
        float(0.0, 1.0),
        "the fraction the rate may stray from diagnostics.expected_hz",
    ),
    node(
        "diagnostics.timeout",
        float(0.0, 86_400.0),
        "seconds without a frame: ERROR once frames came (a dead camera), WARN while none came since start; 0 = not checked",
    ),
    node(
        "diagnostics.max_stamp_lag",
        float(0.0, 86_400.0),
        "WARN when frame stamps are further than this many seconds from the node's clock (ROS time: use_sim_time honoured); 0 = not checked",
    ),
    node(
        "feature_format",
        Some(Domain::OneOf(&["vins_fusion", "vins_mono"])),
        "the layout of `feature` (with track.enabled): VINS-Fusion's or VINS-Mono's estimator",
    ),
    node(
        "vins_config",
        None,
        "a VINS-Fusion or VINS-Mono config file: its cameras and front-end keys set the tracker at start (empty = none)",
    ),
    node(
        "foxglove_annotations",
        Some(Domain::Bool),
        "publish keypoints/annotations (foxglove_msgs/ImageAnnotations: the keypoints coloured by level, their angles, a count; the replay's) while someone subscribes; needs foxglove_msgs when the node was built",
    ),
    node(
        "keep_freed_memory",
        Some(Domain::Bool),
        "glibc's malloc keeps freed frame buffers for the next frames (the RSS stays at its peak)",
    ),
    NodeSpec {
        name: "debug_image",
        domain: Some(Domain::Bool),
        read_only: false,
        about: "publish debug_image (bgr8; VINS-Fusion's tracking picture with track.enabled) while someone subscribes",
    },
    NodeSpec {
        name: "match.previous",
        domain: Some(Domain::Bool),
        read_only: false,
        about: "publish matches: each frame's descriptor matches to the input's previous frame",
    },
    node(
        "use_sim_time",
        Some(Domain::Bool),
        "ROS time from /clock (a bag played with --clock): the diagnostics' stamp check uses it",
    ),
];

/// What an input's /diagnostics status checks (diagnostic_updater's FrequencyStatus and
/// TimeStampStatus conventions), in seconds and Hz.
#[derive(Clone, Debug, PartialEq)]
pub struct DiagnosticsRules {
    /// `diagnostics.expected_hz`: the camera's rate; WARN when a period's rate is outside
    /// `expected_hz * (1 +- hz_tolerance)`. 0 = not checked.
    pub expected_hz: f64,
    /// `diagnostics.hz_tolerance`: the fraction the rate may stray from `expected_hz`.
    pub hz_tolerance: f64,
    /// `diagnostics.timeout`: ERROR once no frame came for this long after frames came (a
    /// dead camera), WARN while none came since start. 0 = not checked.
    pub timeout: f64,
    /// `diagnostics.max_stamp_lag`: WARN when a period's frame stamps are more than this
    /// behind (or ahead of) the node's clock (ROS time: simulated with `use_sim_time`).
    /// 0 = not checked.
    pub max_stamp_lag: f64,
}

impl Default for DiagnosticsRules {
    fn default() -> Self {
        DiagnosticsRules {
            expected_hz: 0.0,
            hz_tolerance: 0.1,
            timeout: 3.0,
            max_stamp_lag: 5.0,
        }
    }
}

/// Node settings fixed at start.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSettings {
    pub backend: String,
    /// CUDA device ordinal the pipelines open (several GPUs: one node per GPU).
    pub cuda_device: i64,
    /// Camera names; empty = one camera with un-prefixed topics.
    pub inputs: Vec<String>,
    /// How the inputs' images come: `raw` (`<input>/image`) or `compressed`
    /// (`<input>/image/compressed`); one value for every input, or one per input.
    pub transport: Vec<String>,
    pub reliability: String,
    pub depth: i64,
    pub diagnostics_period: f64,
    /// What /diagnostics checks each input against (`diagnostics.*`).
    pub diagnostics: DiagnosticsRules,
    /// Layout of the `feature` topic (with `track.enabled`): `vins_fusion` or `vins_mono`.
    pub feature_format: String,
    /// A VINS-Fusion config file (what `vins_node` is started with): its front-end keys set
    /// the tracker at start (over the parameters' values) and its camodocal camera files the
    /// inputs' cameras (input k: `camk_calib`), instead of `camera_info`
    /// ([`crate::camera::vins::VinsConfig`]); empty = none.
    pub vins_config: String,
    /// glibc's malloc keeps freed frame buffers for the next frames instead of returning
    /// them to the kernel ([`NodeSettings::apply_memory_policy`]).
    pub keep_freed_memory: bool,
    /// `foxglove_annotations`: each input publishes `keypoints/annotations`
    /// (`foxglove_msgs/msg/ImageAnnotations`, [`crate::output::annotations`]) while someone
    /// subscribes.
    pub foxglove_annotations: bool,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            backend: "auto".into(),
            cuda_device: 0,
            inputs: Vec::new(),
            transport: vec!["raw".into()],
            reliability: "best_effort".into(),
            depth: 1,
            diagnostics_period: 1.0,
            diagnostics: DiagnosticsRules::default(),
            feature_format: "vins_fusion".into(),
            vins_config: String::new(),
            keep_freed_memory: true,
            foxglove_annotations: false,
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

    /// With `keep_freed_memory` (glibc only; elsewhere nothing to do): blocks up to 32 MiB
    /// come from malloc's heaps instead of their own mmap, and freed memory is not trimmed
    /// back to the kernel (under 1 GiB at the heap's top). The frames the middleware hands
    /// over (2 MB mono8, 6 MB bgr8 at 1080p) are allocated on the spinning thread and freed
    /// on the workers; with glibc's adaptive defaults (likely: each mapped and faulted in
    /// afresh) the node took a burst's second to fourth frame ~3 ms after the first, with
    /// four cameras triggered together (docs/performance.md, change 71). The cost: the node's RSS
    /// stays at its peak instead of shrinking between bursts. Returns whether it applied.
    pub fn apply_memory_policy(&self) -> bool {
        if !self.keep_freed_memory {
            return false;
        }
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: mallopt only sets two of glibc's malloc parameters (thread-safe: it
            // takes every arena's lock); 32 MiB is the largest mmap threshold glibc accepts
            // on 64-bit hosts (HEAP_MAX_SIZE / 2), and a rejected value returns 0, left as is.
            let (mmap, trim) = unsafe {
                (
                    libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20),
                    libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30),
                )
            };
            mmap == 1 && trim == 1
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        false
    }

    /// Input `index`'s transport (validated: `transport` has one value or one per input).
    pub(super) fn transport_of(&self, index: usize) -> super::compressed::Transport {
        let name = match self.transport.as_slice() {
            [one] => one,
            all => all.get(index).map_or("raw", |s| s.as_str()),
        };
        super::compressed::Transport::parse(name).unwrap_or(super::compressed::Transport::Raw)
    }

    /// The settings `NODE_SPECS` gives a domain to, as `(name, value)`.
    fn values(&self) -> Vec<(&'static str, serde_yaml::Value)> {
        let d = &self.diagnostics;
        vec![
            ("backend", self.backend.as_str().into()),
            ("cuda.device", self.cuda_device.into()),
            ("image_qos.reliability", self.reliability.as_str().into()),
            ("image_qos.depth", self.depth.into()),
            ("diagnostics_period", self.diagnostics_period.into()),
            ("diagnostics.expected_hz", d.expected_hz.into()),
            ("diagnostics.hz_tolerance", d.hz_tolerance.into()),
            ("diagnostics.timeout", d.timeout.into()),
            ("diagnostics.max_stamp_lag", d.max_stamp_lag.into()),
            ("feature_format", self.feature_format.as_str().into()),
        ]
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        for (name, v) in self.values() {
            let spec = NODE_SPECS.iter().find(|s| s.name == name);
            if let Some(domain) = spec.and_then(|s| s.domain) {
                crate::config::schema::check_value(name, &v, &domain, "")?;
            }
        }
        if let Some(bad) = self
            .transport
            .iter()
            .find(|t| super::compressed::Transport::parse(t).is_none())
        {
            return Err(format!("transport: {bad:?} is not raw or compressed"));
        }
        let inputs = self.inputs.len().max(1);
        if self.transport.len() != 1 && self.transport.len() != inputs {
            return Err(format!(
                "transport: {} values for {inputs} input(s): give one for all, or one per input",
                self.transport.len()
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
