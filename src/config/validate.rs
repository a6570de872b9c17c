//! [`Config::validate`]: every key against its domain in [`super::schema::SPECS`] (the one
//! table of ranges and allowed values, which the node's parameter descriptions also read),
//! then the rules between keys, here.

use super::*;

fn check(ok: bool, key: &str, why: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!("{key}: {}", why())))
    }
}

impl Config {
    /// Checks every range, then the rules between keys; a config that passes is safe for
    /// every backend.
    pub fn validate(&self) -> Result<()> {
        super::schema::check(&self.flatten()).map_err(Error::Config)?;
        let d = &self.detector;
        check(
            d.min_fast_threshold <= d.fast_threshold,
            "detector.min_fast_threshold",
            || {
                format!(
                    "{} is not in 1..=detector.fast_threshold ({})",
                    d.min_fast_threshold, d.fast_threshold
                )
            },
        )?;
        check(
            !d.low_threshold_retry || self.select.spread != Spread::None,
            "detector.low_threshold_retry",
            || "needs select.spread grid or quadtree (the retry works per cell)".into(),
        )?;
        let o = &self.orient;
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
        )?;
        let t = &self.track;
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
