//! The ranges of every config field: [`Config::validate`] names the first key out of range.

use super::*;

/// Most helper threads `cuda.crew_threads` may ask for.
const MAX_CREW_THREADS: u32 = 64;
/// The longest spin of `cuda.prewake_us` (10 ms: more than a frame's hand-over ever takes).
pub const MAX_PREWAKE_US: i32 = 10_000;
/// The earliest `cuda.warm_ahead_us` (100 ms: more than a 10 Hz camera's gap).
const MAX_WARM_AHEAD_US: i32 = 100_000;

fn check(ok: bool, key: &str, why: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!("{key}: {}", why())))
    }
}

impl Config {
    /// Checks every range; a config that passes is safe for every backend.
    pub fn validate(&self) -> Result<()> {
        self.validate_detection()?;
        self.validate_keypoints()?;
        self.validate_canny_and_cuda()?;
        self.validate_track()
    }

    /// `pyramid.*` and `detector.*`.
    fn validate_detection(&self) -> Result<()> {
        let p = &self.pyramid;
        check(
            (1..=MAX_LEVELS as u32).contains(&p.levels),
            "pyramid.levels",
            || format!("{} is not in 1..={MAX_LEVELS}", p.levels),
        )?;
        check(
            p.scale_factor.is_finite() && p.scale_factor > 1.0 && p.scale_factor <= 4.0,
            "pyramid.scale_factor",
            || format!("{} is not in (1, 4]", p.scale_factor),
        )?;
        let d = &self.detector;
        check(
            (1..=255).contains(&d.fast_threshold),
            "detector.fast_threshold",
            || format!("{} is not in 1..=255", d.fast_threshold),
        )?;
        check(
            (1..=d.fast_threshold).contains(&d.min_fast_threshold),
            "detector.min_fast_threshold",
            || {
                format!(
                    "{} is not in 1..=detector.fast_threshold ({})",
                    d.min_fast_threshold, d.fast_threshold
                )
            },
        )?;
        check((3..=256).contains(&d.border), "detector.border", || {
            format!("{} is not in 3..=256", d.border)
        })?;
        check(
            d.harris_k.is_finite() && d.harris_k > 0.0 && d.harris_k < 0.25,
            "detector.harris_k",
            || format!("{} is not in (0, 0.25)", d.harris_k),
        )?;
        check(
            (3..=31).contains(&d.harris_block_size) && d.harris_block_size % 2 == 1,
            "detector.harris_block_size",
            || format!("{} is not odd in 3..=31", d.harris_block_size),
        )?;
        check(
            (1..=31).contains(&d.dense_block_size),
            "detector.dense_block_size",
            || format!("{} is not in 1..=31", d.dense_block_size),
        )?;
        check(
            matches!(d.dense_ksize, 3 | 5 | 7),
            "detector.dense_ksize",
            || format!("{} is not 3, 5 or 7", d.dense_ksize),
        )?;
        check(
            d.dense_quality.is_finite() && d.dense_quality > 0.0 && d.dense_quality <= 1.0,
            "detector.dense_quality",
            || format!("{} is not in (0, 1]", d.dense_quality),
        )?;
        check(
            !d.low_threshold_retry || self.select.spread != Spread::None,
            "detector.low_threshold_retry",
            || "needs select.spread grid or quadtree (the retry works per cell)".into(),
        )
    }

    /// `select.*`, `orient.*` and `describe.*`.
    fn validate_keypoints(&self) -> Result<()> {
        let d = &self.detector;
        let s = &self.select;
        check(s.max_keypoints <= 1_000_000, "select.max_keypoints", || {
            format!("{} is above 1000000", s.max_keypoints)
        })?;
        check(
            (8..=1024).contains(&s.cell_size),
            "select.cell_size",
            || format!("{} is not in 8..=1024", s.cell_size),
        )?;
        let o = &self.orient;
        check(
            (3..=127).contains(&o.patch_size) && o.patch_size % 2 == 1,
            "orient.patch_size",
            || format!("{} is not odd in 3..=127", o.patch_size),
        )?;
        check(
            !o.enabled || d.border > o.patch_size / 2,
            "orient.enabled",
            || {
                format!(
                    "the orientation patch (orient.patch_size {}, radius {}) needs \
                     detector.border >= {}",
                    o.patch_size,
                    o.patch_size / 2,
                    o.patch_size / 2 + 1
                )
            },
        )?;
        check(
            !self.describe.enabled || o.patch_size == 31,
            "describe.enabled",
            || {
                format!(
                    "ORB's learned test pattern is for a 31-pixel patch; orient.patch_size is {}",
                    o.patch_size
                )
            },
        )
    }

    /// `canny.*` and `cuda.*`.
    fn validate_canny_and_cuda(&self) -> Result<()> {
        let c = &self.canny;
        check(
            c.low_threshold.is_finite() && c.low_threshold >= 0.0,
            "canny.low_threshold",
            || format!("{} is not a finite value >= 0", c.low_threshold),
        )?;
        check(
            c.high_threshold.is_finite() && c.high_threshold >= 0.0,
            "canny.high_threshold",
            || format!("{} is not a finite value >= 0", c.high_threshold),
        )?;
        check(
            c.blur_ksize == 0 || (c.blur_ksize % 2 == 1 && (3..=31).contains(&c.blur_ksize)),
            "canny.blur_ksize",
            || format!("{} is not 0 or odd in 3..=31", c.blur_ksize),
        )?;
        check(
            c.blur_sigma.is_finite() && c.blur_sigma >= 0.0,
            "canny.blur_sigma",
            || format!("{} is not a finite value >= 0", c.blur_sigma),
        )?;
        check(
            (-1..=MAX_PREWAKE_US).contains(&self.cuda.prewake_us),
            "cuda.prewake_us",
            || {
                format!(
                    "{} is not in -1..={MAX_PREWAKE_US} (-1 = auto)",
                    self.cuda.prewake_us
                )
            },
        )?;
        check(
            (-1..=MAX_WARM_AHEAD_US).contains(&self.cuda.warm_ahead_us),
            "cuda.warm_ahead_us",
            || {
                format!(
                    "{} is not in -1..={MAX_WARM_AHEAD_US} (-1 = auto)",
                    self.cuda.warm_ahead_us
                )
            },
        )?;
        check(
            self.cuda.crew_threads <= MAX_CREW_THREADS,
            "cuda.crew_threads",
            || {
                format!(
                    "{} is not in 0..={MAX_CREW_THREADS} (0 = auto)",
                    self.cuda.crew_threads
                )
            },
        )
    }

    fn validate_track(&self) -> Result<()> {
        let t = &self.track;
        check(
            (1..=10_000).contains(&t.max_features),
            "track.max_features",
            || format!("{} is not in 1..=10000", t.max_features),
        )?;
        check(
            t.min_distance.is_finite() && (0.0..=1000.0).contains(&t.min_distance),
            "track.min_distance",
            || format!("{} is not in [0, 1000] pixels", t.min_distance),
        )?;
        check(
            t.window % 2 == 1 && (5..=63).contains(&t.window),
            "track.window",
            || format!("{} is not odd in 5..=63", t.window),
        )?;
        check(t.levels <= 8, "track.levels", || {
            format!("{} is not in 0..=8", t.levels)
        })?;
        check(
            t.ransac_threshold.is_finite() && (0.0..=100.0).contains(&t.ransac_threshold),
            "track.ransac_threshold",
            || format!("{} is not in [0, 100] pixels (0 = off)", t.ransac_threshold),
        )?;
        check(
            t.quality.is_finite() && t.quality > 0.0 && t.quality <= 1.0,
            "track.quality",
            || format!("{} is not in (0, 1]", t.quality),
        )?;
        check(
            (1..=255).contains(&t.fast_threshold),
            "track.fast_threshold",
            || format!("{} is not in 1..=255", t.fast_threshold),
        )?;
        check(
            (1..=100).contains(&t.feature_every),
            "track.feature_every",
            || format!("{} is not in 1..=100", t.feature_every),
        )?;
        check(t.freq <= 1000, "track.freq", || {
            format!("{} is not in 0..=1000 (0 = 100 Hz, as VINS-Mono)", t.freq)
        })?;
        if t.frontend == super::Frontend::VinsMono {
            check(t.feature_every == 1, "track.feature_every", || {
                "is not 1 with frontend: vins_mono (its rate is track.freq)".into()
            })?;
            check(!t.stereo, "track.stereo", || {
                "is on with frontend: vins_mono (VINS-Mono has one camera)".into()
            })?;
        }
        Ok(())
    }
}
