//! Distribution summaries: the count, mean, extremes and nearest-rank percentiles of a set
//! of measurements, as every table of the replay report, `bench --streams`, the soak and the
//! node's load generator print them.

use serde::{Deserialize, Serialize};

/// Distribution summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// Nearest-rank percentile of sorted values.
pub fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Dist {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Dist {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_by(f64::total_cmp);
        Dist {
            n: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v[0],
            p50: pct(&v, 50.0),
            p90: pct(&v, 90.0),
            p99: pct(&v, 99.0),
            max: v[v.len() - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let d = Dist::of((1..=100).map(|v| v as f64));
        assert_eq!((d.p50, d.p90, d.p99, d.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(d.mean, 50.5);
        let d = Dist::of([3.0]);
        assert_eq!((d.p50, d.p99), (3.0, 3.0));
        assert_eq!(Dist::of([]), Dist::default());
    }
}
