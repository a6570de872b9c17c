//! The tracker's settings ([`TrackParams`], from the config's `track` section), its output
//! ([`Track`]) and what it reports about a frame ([`FrameStats`], [`Reset`]).

/// Where new corners come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopUp {
    /// `cv::goodFeaturesToTrack` (Shi-Tomasi, quality 0.01): VINS's choice.
    Gftt,
    /// FAST-9 with non-maximum suppression at this threshold, ranked by ORB's Harris score.
    Fast(u8),
}

/// The tracker's settings (the config's `track` section).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrackParams {
    pub max_features: usize,
    pub min_distance: f64,
    pub window: usize,
    pub levels: usize,
    pub flow_back: bool,
    /// Pixels; 0 switches the fundamental-matrix test off.
    pub ransac_threshold: f64,
    pub top_up: TopUp,
    pub quality: f64,
    pub mask_order: crate::config::MaskOrder,
    pub lifting: crate::config::Lifting,
    /// VINS-Mono's front-end (a new track's velocity is 0 on its second frame too; the
    /// frames without a `feature` message are only tracked: `Tracker::track_flow_only`).
    pub frontend: crate::config::Frontend,
    /// CLAHE before tracking (`cpu::clahe`, clip 3, 8x8 tiles: VINS-Mono's `equalize`).
    pub equalize: bool,
}

impl TrackParams {
    /// The config's `track` section (validated by `Config::validate`).
    pub fn from_config(c: &crate::config::TrackConfig) -> TrackParams {
        TrackParams {
            max_features: c.max_features as usize,
            min_distance: c.min_distance,
            window: c.window as usize,
            levels: c.levels as usize,
            flow_back: c.flow_back,
            ransac_threshold: c.ransac_threshold,
            top_up: match c.detector {
                crate::config::TrackDetector::Gftt => TopUp::Gftt,
                crate::config::TrackDetector::Fast => TopUp::Fast(c.fast_threshold.min(255) as u8),
            },
            quality: c.quality,
            mask_order: c.mask_order,
            lifting: c.lifting,
            frontend: c.frontend,
            equalize: c.equalize,
        }
    }
}

impl Default for TrackParams {
    /// The config's defaults (`TrackConfig::default`): VINS-Fusion's EuRoC settings, 150
    /// features 30 px apart, flow back on, F test 1 px, goodFeaturesToTrack.
    fn default() -> Self {
        TrackParams::from_config(&crate::config::TrackConfig::default())
    }
}

/// One tracked feature in one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Track {
    pub id: u64,
    /// Pixel position.
    pub x: f32,
    pub y: f32,
    /// Normalised image coordinates (undistorted, `z = 1`); NaN without a camera model or
    /// where the model has no inverse.
    pub x_n: f64,
    pub y_n: f64,
    /// Velocity on the normalised plane, per second (VINS's `pts_velocity`); 0 for a new
    /// track or the first frame; NaN without a camera model.
    pub vx: f64,
    pub vy: f64,
    /// Pixel velocity, px per second (0 for a new track).
    pub px_vx: f64,
    pub px_vy: f64,
    /// Frames this feature has been seen in (1 when new).
    pub age: u32,
}

/// Why the tracker started over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    TimeWentBack,
    Resolution,
    Camera,
}

/// Counters of the last frame, for reports and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameStats {
    /// Tracks carried from the previous frame.
    pub tried: usize,
    /// Of those, kept by the forward flow (status and border).
    pub flow_ok: usize,
    /// Of those, rejected by the flow-back check.
    pub flow_back_rejected: usize,
    /// Rejected by the fundamental-matrix test.
    pub ransac_rejected: usize,
    /// Dropped by the mask (too close to an older track).
    pub mask_dropped: usize,
    /// New corners added.
    pub added: usize,
    /// Mean forward-backward distance (px) of the points the check ran on.
    pub flow_back_error: f64,
    /// Wall time of the frame's stages, ms: the new pyramid (built, or queued on the GPU),
    /// LK forward and back (with the wait for it), the new corners (goodFeaturesToTrack or
    /// FAST, with the mask drawn and the wait), and the whole `track` call.
    pub pyramid_ms: f64,
    pub flow_ms: f64,
    /// The host time of [`super::Tracker::begin`] when the frame was begun early (its
    /// pyramid and LK launch, counted in `pyramid_ms` and `flow_ms` too), ms; NaN when it
    /// was not.
    pub begin_ms: f64,
    /// On the GPU: the LK launch's own time (CUDA events), ms; NaN on the CPU.
    pub lk_kernel_ms: f64,
    pub detect_ms: f64,
    /// On the GPU, the new corners' host time in parts, ms (queue, wait, keys, spacing:
    /// `cuda::gftt::CornerParts`), then their candidates' count; zeros when none were
    /// selected on the GPU this frame.
    pub corner_parts_ms: [f64; 4],
    pub corner_candidates: usize,
    pub total_ms: f64,
}
