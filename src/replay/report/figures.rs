//! The report's PNG plots: which ones, from which numbers, with which titles and captions
//! (the drawing is [`plot`]'s).

use std::path::Path;

use super::{FrameStats, PlotRef, Report};
use crate::error::Result;
use crate::eval::HomographyResult;
use crate::report::pct;
use crate::report::plot::{self, BarGroup, BoxStats, Grid, Labels, Scale, Series};

/// Box of one stage: quartiles, whiskers at p1 and p99 (nearest rank).
fn box_stats(values: &[f64]) -> BoxStats {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    BoxStats {
        whisker_lo: pct(&v, 1.0),
        q1: pct(&v, 25.0),
        median: pct(&v, 50.0),
        q3: pct(&v, 75.0),
        whisker_hi: pct(&v, 99.0),
    }
}

/// Points (frame index, value) of the frames where `f` gives a value.
fn over_frames(fr: &[FrameStats], f: impl Fn(&FrameStats) -> Option<f64>) -> Vec<(f64, f64)> {
    fr.iter()
        .enumerate()
        .filter_map(|(i, s)| f(s).map(|v| (i as f64, v)))
        .collect()
}

fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.to_string(),
        points,
    }
}

pub(super) fn plots(r: &Report, dir: &Path) -> Result<Vec<PlotRef>> {
    let mut out: Vec<PlotRef> = Vec::new();
    if r.per_frame.is_empty() {
        return Ok(out);
    }
    latency(r, dir, &mut out)?;
    keypoints(r, dir, &mut out)?;
    coverage(r, dir, &mut out)?;
    tracking(r, dir, &mut out)?;
    feature_tracks(r, dir, &mut out)?;
    homography(r, dir, &mut out)?;
    Ok(out)
}

/// The x axis of the per-frame charts.
const FRAME_INDEX: &str = "frame index (replay order, all topics)";

/// The latency distribution per stage and the pipeline time per frame.
fn latency(r: &Report, dir: &Path, out: &mut Vec<PlotRef>) -> Result<()> {
    let fr = &r.per_frame;
    let idx = FRAME_INDEX;
    let mut add = |file: &str, caption: String| out.push((file.to_string(), caption));

    // Latency distribution per stage, `frame` (the whole call) last.
    let stages: Vec<&String> = r
        .stage_order
        .iter()
        .filter(|s| r.latency_ms.contains_key(*s))
        .collect();
    let per_stage: Vec<BoxStats> = stages
        .iter()
        .map(|st| {
            let v: Vec<f64> = if st.as_str() == "frame" {
                fr.iter().map(|f| f.frame_ms).collect()
            } else {
                fr.iter()
                    .flat_map(|f| f.stages.iter().filter(|(s, _)| s == *st).map(|x| x.1))
                    .collect()
            };
            box_stats(&v)
        })
        .collect();
    let names: Vec<String> = stages.iter().map(|s| s.to_string()).collect();
    plot::boxes(
        &dir.join("latency.png"),
        Labels {
            title: &format!(
                "Latency per stage ({} frames, {} backend)",
                fr.len(),
                r.backend
            ),
            x: "pipeline stage (frame = the whole Pipeline::process call)",
            y: "time per frame (ms)",
        },
        &names,
        &per_stage,
        ["p25 to p75", "median", "p1 to p99"],
    )?;
    add(
        "latency.png",
        "Latency distribution per stage (ms): boxes from p25 to p75, median line, whiskers \
         at p1 and p99"
            .into(),
    );

    plot::lines(
        &dir.join("frame_latency.png"),
        Labels {
            title: &format!(
                "Pipeline time per frame ({:.1} frames/s in the pipeline)",
                r.fps_pipeline
            ),
            x: idx,
            y: "Pipeline::process time (ms)",
        },
        &[series("frame time", over_frames(fr, |s| Some(s.frame_ms)))],
        None,
    )?;
    add(
        "frame_latency.png",
        "Pipeline time per frame (ms) against frame index".into(),
    );
    Ok(())
}

/// Keypoints (and descriptor matches) per frame, per pyramid level, and where they land.
fn keypoints(r: &Report, dir: &Path, out: &mut Vec<PlotRef>) -> Result<()> {
    let fr = &r.per_frame;
    let idx = FRAME_INDEX;
    let mut add = |file: &str, caption: String| out.push((file.to_string(), caption));

    let mut kp = vec![series(
        "keypoints",
        over_frames(fr, |s| Some(s.keypoints as f64)),
    )];
    let matches = over_frames(fr, |s| s.match_track.map(|m| m.matches as f64));
    if !matches.is_empty() {
        kp.push(series("descriptor matches to the previous frame", matches));
    }
    plot::lines(
        &dir.join("keypoints.png"),
        Labels {
            title: "Keypoints per frame",
            x: idx,
            y: "count per frame",
        },
        &kp,
        None,
    )?;
    add(
        "keypoints.png",
        if kp.len() > 1 {
            "Keypoints per frame and descriptor matches to the previous frame".into()
        } else {
            "Keypoints per frame".into()
        },
    );

    let lv = &r.keypoints_per_level_mean;
    if !lv.is_empty() {
        let cats: Vec<String> = (0..lv.len()).map(|l| format!("level {l}")).collect();
        plot::bars(
            &dir.join("levels.png"),
            Labels {
                title: "Mean keypoints per pyramid level",
                x: "pyramid level (0 = full resolution)",
                y: "keypoints per frame (mean)",
            },
            &cats,
            &[BarGroup {
                name: "mean keypoints".into(),
                values: lv.iter().map(|v| Some(*v)).collect(),
            }],
            Scale::Linear,
        )?;
        add("levels.png", "Mean keypoints per pyramid level".into());
    }

    let h = &r.keypoint_heatmap;
    if h.frames > 0 && !h.counts.is_empty() {
        let values = h.per_frame();
        plot::heatmap(
            &dir.join("heatmap.png"),
            Labels {
                title: &format!(
                    "Keypoint density over the image ({0}x{0} px cells, {1} frames)",
                    h.cell, h.frames
                ),
                x: "x (level-0 px)",
                y: "y (level-0 px, from the top)",
            },
            &Grid {
                cols: h.cols,
                rows: h.rows,
                cell: h.cell,
                values: &values,
            },
            "keypoints per cell per frame (mean)",
        )?;
        add(
            "heatmap.png",
            format!(
                "Coverage heat map: mean keypoints per frame in each {0}x{0}-pixel cell",
                h.cell
            ),
        );
    }
    Ok(())
}

/// The image's coverage by keypoints (and the edge density) per frame.
fn coverage(r: &Report, dir: &Path, out: &mut Vec<PlotRef>) -> Result<()> {
    let fr = &r.per_frame;
    let idx = FRAME_INDEX;
    let mut add = |file: &str, caption: String| out.push((file.to_string(), caption));

    let mut cov = vec![series(
        "coverage (cells with a keypoint)",
        over_frames(fr, |s| Some(s.coverage)),
    )];
    if r.edge_density.is_some() {
        cov.push(series(
            "edge density (Canny edge pixels)",
            over_frames(fr, |s| s.edge_density),
        ));
    }
    plot::lines(
        &dir.join("coverage.png"),
        Labels {
            title: "Spatial coverage and edge density per frame",
            x: idx,
            y: "share (0 to 1)",
        },
        &cov,
        Some((0.0, 1.0)),
    )?;
    add(
        "coverage.png",
        if cov.len() > 1 {
            "Spatial coverage and edge density against frame index".into()
        } else {
            "Spatial coverage against frame index".into()
        },
    );
    Ok(())
}

/// Frame-to-frame tracking: keypoints re-found and descriptor-match inliers.
fn tracking(r: &Report, dir: &Path, out: &mut Vec<PlotRef>) -> Result<()> {
    let fr = &r.per_frame;
    let idx = FRAME_INDEX;
    let mut add = |file: &str, caption: String| out.push((file.to_string(), caption));

    let tr = over_frames(fr, |s| {
        s.track
            .filter(|t| t.tried > 0)
            .map(|t| t.refound as f64 / t.tried as f64)
    });
    let inl = over_frames(fr, |s| s.match_track.and_then(|m| m.inlier_share()));
    let mut track = Vec::new();
    if !tr.is_empty() {
        track.push(series("re-found ratio (patch ZNCC)", tr));
    }
    if !inl.is_empty() {
        track.push(series("descriptor-match inlier share", inl));
    }
    if !track.is_empty() {
        plot::lines(
            &dir.join("tracking.png"),
            Labels {
                title: "Frame-to-frame tracking (each frame against the previous one)",
                x: idx,
                y: "share (0 to 1)",
            },
            &track,
            Some((0.0, 1.0)),
        )?;
        add(
            "tracking.png",
            "Tracking against frame index: share of the previous frame's keypoints re-found \
             (patch ZNCC) and inlier share of the descriptor matches"
                .into(),
        );
    }
    Ok(())
}

/// The feature tracker's tracks alive per frame and the lengths of the ended ones.
fn feature_tracks(r: &Report, dir: &Path, out: &mut Vec<PlotRef>) -> Result<()> {
    let fr = &r.per_frame;
    let idx = FRAME_INDEX;
    let mut add = |file: &str, caption: String| out.push((file.to_string(), caption));

    if r.feature_tracks.is_some() {
        let alive = over_frames(fr, |s| s.feature_tracks.as_ref().map(|t| t.alive as f64));
        plot::lines(
            &dir.join("tracks_alive.png"),
            Labels {
                title: "Feature tracks alive per frame",
                x: idx,
                y: "tracks",
            },
            &[series("tracks published", alive)],
            None,
        )?;
        add(
            "tracks_alive.png",
            "Feature tracks alive against frame index".into(),
        );
        let lengths: Vec<u32> = fr
            .iter()
            .filter_map(|s| s.feature_tracks.as_ref())
            .flat_map(|t| t.ended.iter().copied())
            .collect();
        if !lengths.is_empty() {
            let top = lengths.iter().copied().max().unwrap_or(1).clamp(1, 30) as usize;
            let mut counts = vec![0f64; top];
            for l in lengths {
                counts[(l.max(1) as usize).min(top) - 1] += 1.0;
            }
            let cats: Vec<String> = (1..=top)
                .map(|l| {
                    if l == top {
                        format!(">={l}")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            plot::bars(
                &dir.join("track_lengths.png"),
                Labels {
                    title: "Length of the feature tracks that ended",
                    x: "frames the track lived",
                    y: "tracks",
                },
                &cats,
                &[BarGroup {
                    name: "ended tracks".into(),
                    values: counts.into_iter().map(Some).collect(),
                }],
                Scale::Linear,
            )?;
            add(
                "track_lengths.png",
                "Histogram of the lengths of the feature tracks that ended".into(),
            );
        }
    }
    Ok(())
}

/// The homography protocol: repeatability and matching score per image pair.
fn homography(r: &Report, dir: &Path, out: &mut Vec<PlotRef>) -> Result<()> {
    let mut add = |file: &str, caption: String| out.push((file.to_string(), caption));

    if !r.homography.is_empty() {
        let cats: Vec<String> = r.homography.iter().map(|h| h.name.clone()).collect();
        let cv = r.opencv.as_ref();
        let cv_name = cv.map_or("OpenCV ORB".to_string(), |o| {
            format!("OpenCV {} ORB", o.opencv_version)
        });
        let of_cv = |f: fn(&HomographyResult) -> f64| -> Vec<Option<f64>> {
            r.homography
                .iter()
                .map(|h| {
                    cv.and_then(|o| o.pairs.iter().find(|x| x.name == h.name))
                        .map(f)
                })
                .collect()
        };
        let mut groups = vec![BarGroup {
            name: "repeatability, ours".into(),
            values: r.homography.iter().map(|h| Some(h.repeatability)).collect(),
        }];
        if cv.is_some() {
            groups.push(BarGroup {
                name: format!("repeatability, {cv_name}"),
                values: of_cv(|x| x.repeatability),
            });
        }
        groups.push(BarGroup {
            name: "matching score, ours".into(),
            values: r
                .homography
                .iter()
                .map(|h| Some(h.matching_score))
                .collect(),
        });
        if cv.is_some() {
            groups.push(BarGroup {
                name: format!("matching score, {cv_name}"),
                values: of_cv(|x| x.matching_score),
            });
        }
        plot::bars(
            &dir.join("homography.png"),
            Labels {
                title: &format!("Repeatability and matching score: ours vs {cv_name}"),
                x: "image pair (homography)",
                y: "score (0 to 1)",
            },
            &cats,
            &groups,
            Scale::Linear,
        )?;
        add(
            "homography.png",
            if cv.is_some() {
                format!("Repeatability and matching score per image pair, ours beside {cv_name}")
            } else {
                "Repeatability and matching score per image pair (ours; OpenCV's with \
                 `--opencv-eval`)"
                    .into()
            },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_stats_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let b = box_stats(&v);
        assert_eq!(
            (b.whisker_lo, b.q1, b.median, b.q3, b.whisker_hi),
            (1.0, 25.0, 50.0, 75.0, 99.0)
        );
    }
}
