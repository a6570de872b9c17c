//! `bench --tracks`' stereo rows: VINS-Fusion's stereo mode (`Tracker::track_stereo`: the
//! left frame tracked as in the mono rows, then its tracks found in the right frame and
//! checked back) on pairs cut from the same pans, the right camera's crop [`DISPARITY`] px
//! further right. Ours (GPU, CPU reference) per pair: the whole stereo frame and, of it,
//! the right step (`Tracker::track_right`); beside OpenCV's VINS stereo front-end
//! (scripts/bench_vins_opencv.py `--stereo`) on the same pairs.

use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::measure::Pacer;
use super::report::{fmt_ms, mean_count, size_settings};
use crate::image::GrayImage;
use crate::report::Dist;
use crate::track::Tracker;

/// The stereo pairs' disparity in pixels (as tests/shared's pairs).
pub(super) const DISPARITY: usize = 8;

/// One stereo row: one tracker at one size and setting.
#[derive(Debug, Serialize)]
pub(super) struct StereoRow {
    pub(super) size: String,
    pub(super) max_features: usize,
    /// `cuda`, `cpu`, `opencv-1`, `opencv-N (..)`.
    pub(super) tracker: String,
    /// Left and right tracks per timed pair, mean.
    pub(super) left_mean: f64,
    pub(super) right_mean: f64,
    /// Wall time per pair, ms (left frame + right step).
    pub(super) ms: Dist,
    /// Of it, the right step, ms (ours only).
    pub(super) right_ms: Option<Dist>,
}

/// What [`time_stereo`] measured per timed pair: whole ms, right-step ms, left and right
/// tracks.
pub(super) type TimedStereo = (Vec<f64>, Vec<f64>, Vec<usize>, Vec<usize>);

/// Tracks every pair sequence (a fresh start for each) until `frames` pairs are timed,
/// after `warmup` untimed ones, each pair started by `pace`; the first pair of each sequence
/// is not timed.
pub(super) fn time_stereo(
    t: &mut Tracker,
    pairs: &[(&Vec<GrayImage>, &Vec<GrayImage>)],
    (warmup, frames): (usize, usize),
    pace: &mut Pacer,
) -> Result<TimedStereo, String> {
    let (mut ms, mut right_ms, mut nl, mut nr) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if pairs.is_empty() {
        return Ok((ms, right_ms, nl, nr));
    }
    let mut seen = 0;
    'outer: loop {
        for (left, right) in pairs {
            t.clear();
            for (k, (l, r)) in left.iter().zip(right.iter()).enumerate() {
                pace.wait();
                let t0 = Instant::now();
                let n = t.track(l, k as f64 / 30.0, None).len();
                let t1 = Instant::now();
                t.track_right(r, None)?;
                let (whole, step) = (t0.elapsed(), t1.elapsed());
                if k == 0 {
                    continue;
                }
                seen += 1;
                if seen > warmup {
                    ms.push(whole.as_secs_f64() * 1e3);
                    right_ms.push(step.as_secs_f64() * 1e3);
                    nl.push(n);
                    nr.push(t.right_tracks().len());
                }
                if ms.len() >= frames {
                    break 'outer;
                }
            }
        }
    }
    Ok((ms, right_ms, nl, nr))
}

/// Our row from [`time_stereo`]'s measures.
pub(super) fn our_row(
    size: String,
    max_features: usize,
    tracker: &str,
    (ms, right_ms, nl, nr): TimedStereo,
) -> StereoRow {
    StereoRow {
        size,
        max_features,
        tracker: tracker.into(),
        left_mean: mean_count(&nl),
        right_mean: mean_count(&nr),
        ms: Dist::of(ms),
        right_ms: Some(Dist::of(right_ms)),
    }
}

/// OpenCV's row from bench_vins_opencv.py `--stereo --json`.
pub(super) fn opencv_row(
    v: &Value,
    size: String,
    max_features: usize,
    label: String,
) -> Option<StereoRow> {
    Some(StereoRow {
        size,
        max_features,
        tracker: label,
        left_mean: v["tracks_mean"].as_f64()?,
        right_mean: v["right_mean"].as_f64()?,
        ms: Dist {
            n: v["n"].as_u64()? as usize,
            p50: v["median_ms"].as_f64()?,
            p90: v["p90_ms"].as_f64()?,
            ..Dist::default()
        },
        right_ms: None,
    })
}

/// The markdown table: one line per size and setting, the trackers side by side.
pub(super) fn table(rows: &[StereoRow]) -> String {
    let mut s = String::from(
        "| size | features | tracks left / right | ours, GPU: pair p50 / p90 ms | of which the right step | ours, CPU (`cpu.threads` threads) | OpenCV 1 thread | OpenCV all threads | OpenCV all threads / ours GPU |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (size, feats) in size_settings(rows.iter().map(|r| (r.size.as_str(), r.max_features))) {
        let find = |t: &str| {
            rows.iter()
                .find(|r| r.size == size && r.max_features == feats && r.tracker.starts_with(t))
        };
        let p50 = |t: &str| find(t).map_or("—".to_string(), |r| fmt_ms(r.ms.p50));
        let (gpu, all) = (find("cuda"), find("opencv-N"));
        let ours = gpu.or(find("cpu"));
        let tracks = ours.map_or("—".into(), |r| {
            format!("{:.0} / {:.0}", r.left_mean, r.right_mean)
        });
        let (pair, step) = match gpu {
            Some(g) => (
                format!("{} / {}", fmt_ms(g.ms.p50), fmt_ms(g.ms.p90)),
                g.right_ms.as_ref().map_or("—".into(), |d| {
                    format!("{} / {}", fmt_ms(d.p50), fmt_ms(d.p90))
                }),
            ),
            None => ("—".into(), "—".into()),
        };
        let ratio = match (gpu, all) {
            (Some(g), Some(o)) if g.ms.p50 > 0.0 => format!("{:.1}x", o.ms.p50 / g.ms.p50),
            _ => "—".into(),
        };
        s.push_str(&format!(
            "| {size} | {feats} | {tracks} | {pair} | {step} | {} | {} | {} | {ratio} |\n",
            p50("cpu"),
            p50("opencv-1"),
            p50("opencv-N"),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::TrackParams;

    /// A textured frame whose content moves with `dx` (x + dx of a fixed pattern).
    fn frame(dx: usize) -> GrayImage {
        let (w, h) = (160, 120);
        let mut img = GrayImage::new(w, h);
        for y in 0..h {
            for x in 0..w {
                let (u, v) = ((x + dx) as f64, y as f64);
                let val = 128.0
                    + 60.0 * (u * 0.21).sin() * (v * 0.17).cos()
                    + 40.0 * (u * 0.05 + v * 0.09).sin();
                img.data[y * w + x] = val.clamp(0.0, 255.0) as u8;
            }
        }
        img
    }

    #[test]
    fn stereo_pairs_are_timed_and_the_table_shows_both_cameras() {
        let left: Vec<_> = (0..4).map(frame).collect();
        let right: Vec<_> = (0..4).map(|k| frame(k + DISPARITY)).collect();
        let mut t = Tracker::new(TrackParams::default());
        let m = time_stereo(&mut t, &[(&left, &right)], (1, 2), &mut Pacer::new(None)).unwrap();
        assert_eq!(m.0.len(), 2, "pairs 1 and 2 are timed after one untimed");
        assert!(m.0.iter().zip(&m.1).all(|(whole, step)| step <= whole));
        assert!(m.3.iter().all(|&n| n > 0), "right tracks found: {:?}", m.3);
        let mut rows = vec![our_row("160x120".into(), 150, "cuda", m)];
        rows.push(StereoRow {
            tracker: "opencv-N (16)".into(),
            right_ms: None,
            ms: Dist {
                n: 3,
                p50: rows[0].ms.p50 * 20.0,
                ..Dist::default()
            },
            ..our_row("160x120".into(), 150, "x", (vec![], vec![], vec![], vec![]))
        });
        let table = table(&rows);
        let line = table.lines().nth(2).unwrap();
        assert!(line.starts_with("| 160x120 | 150 | "), "{line}");
        assert!(line.ends_with("| 20.0x |"), "{line}");
        // A right frame of another size is an error, not a panic.
        let small = vec![GrayImage::new(80, 60); 2];
        assert!(time_stereo(&mut t, &[(&left, &small)], (0, 1), &mut Pacer::new(None)).is_err());
    }
}
