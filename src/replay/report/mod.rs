//! The replay's evaluation report: `report.json` (everything, machine-readable), `report.md`
//! (tables + the PNG plots), the plots themselves, and `report.html` (the same content in
//! one self-contained file, plots embedded).
//!
//! * `stats`: the per-frame measures and their aggregation ([`Report::build`]).
//! * `markdown`: `report.md` ([`Report::markdown`]).
//! * `figures`: the PNG plots the Markdown links (drawn by [`plot`](crate::report::plot)).
//! * this module: the input, `report.json` ([`Report`]) and [`write()`], which puts it all on
//!   disk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::eval::HomographyResult;
use crate::matching::MatchParams;
use crate::report::Dist;

mod figures;
mod markdown;
mod stats;

use self::figures::plots;
pub use self::stats::{
    DescriptorTracking, FeatureTrackFrame, FeatureTracks, FrameStats, Heatmap, Tracking,
    COVERAGE_CELL,
};

/// Everything the report is made from.
#[derive(Clone, Debug)]
pub struct ReportInput {
    pub bag: PathBuf,
    pub storage: &'static str,
    pub backend: &'static str,
    pub config: Config,
    pub frames: Vec<FrameStats>,
    pub per_topic: BTreeMap<String, usize>,
    pub skipped: usize,
    pub skip_reasons: BTreeMap<String, usize>,
    pub wall_s: f64,
    pub processing_s: f64,
    pub homography: Vec<HomographyResult>,
    pub opencv: Option<OpencvEval>,
    /// The descriptor matcher of the tracking measure, when the config computes descriptors.
    pub matcher: Option<MatcherInfo>,
    /// Where the keypoints fell, over all frames.
    pub heatmap: Heatmap,
}

/// Which matcher the replay's descriptor tracking used.
#[derive(Clone, Copy, Debug)]
pub struct MatcherInfo {
    /// `cpu` or `cuda`.
    pub backend: &'static str,
    pub params: MatchParams,
}

/// What `scripts/eval_homography.py` writes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OpencvEval {
    pub opencv_version: String,
    /// OpenCV ORB keypoints + ORB descriptors.
    pub pairs: Vec<HomographyResult>,
    /// Our keypoints (from `--gpu-features`) with OpenCV's `ORB.compute` descriptors, scored
    /// by the script.
    pub ours_with_orb_descriptor: Vec<HomographyResult>,
    /// Our keypoints with our own descriptors (the `descriptor` column of `detect`'s CSV),
    /// scored by the script: must equal the Rust side's numbers (a cross-check of the two
    /// implementations of the protocol).
    pub ours_with_our_descriptor: Vec<HomographyResult>,
}

pub fn load_opencv_eval(path: &Path) -> Result<OpencvEval> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::ImageFile {
        path: path.to_path_buf(),
        msg: format!("not an eval_homography.py result: {e}"),
    })
}

/// `report.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub bag: String,
    pub storage: String,
    pub backend: String,
    pub frames: usize,
    pub per_topic: BTreeMap<String, usize>,
    pub skipped: usize,
    pub skip_reasons: BTreeMap<String, usize>,
    pub wall_s: f64,
    /// Frames / total `Pipeline::process` time.
    pub fps_pipeline: f64,
    /// Frames / wall time of the whole replay (reading, decoding, writing included).
    pub fps_overall: f64,
    /// Per stage (and `frame` = the whole `process` call), ms.
    pub latency_ms: BTreeMap<String, Dist>,
    pub stage_order: Vec<String>,
    pub keypoints_per_frame: Dist,
    pub keypoints_per_level_mean: Vec<f64>,
    pub coverage_cell_px: usize,
    pub coverage: Dist,
    /// Keypoints per `coverage_cell_px` cell over all frames (the heat map plot).
    #[serde(default)]
    pub keypoint_heatmap: Heatmap,
    pub edge_density: Option<Dist>,
    pub tracking: Option<Tracking>,
    pub descriptor_tracking: Option<DescriptorTracking>,
    /// The feature tracker (`track.enabled`).
    #[serde(default)]
    pub feature_tracks: Option<FeatureTracks>,
    pub homography: Vec<HomographyResult>,
    pub opencv: Option<OpencvEval>,
    pub config: Config,
    pub per_frame: Vec<FrameStats>,
}

/// Files the report wrote.
pub struct Written {
    pub markdown: PathBuf,
    pub json: PathBuf,
    /// report.html: report.md as one self-contained page, plots embedded.
    pub html: PathBuf,
    pub plots: Vec<PathBuf>,
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// A plot the report links: file name in the report's directory and its caption.
pub type PlotRef = (String, String);

/// Writes report.json, the plots, report.md and report.html into `dir`.
pub fn write(inp: &ReportInput, dir: &Path) -> Result<Written> {
    let report = Report::build(inp);
    let json = dir.join("report.json");
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| Error::Bag(format!("report.json: {e}")))?;
    write_atomic(&json, text.as_bytes())?;
    let plot_list = plots(&report, dir)?;
    let markdown = report.markdown(&plot_list);
    let md = dir.join("report.md");
    write_atomic(&md, markdown.as_bytes())?;
    let html = dir.join("report.html");
    let page = crate::report::html::page("gpu_features replay report", &markdown, dir)?;
    write_atomic(&html, page.as_bytes())?;
    Ok(Written {
        markdown: md,
        json,
        html,
        plots: plot_list.iter().map(|(f, _)| dir.join(f)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::MatchTrackStats;
    use crate::features::Features;
    use crate::report::plot;

    pub(super) fn input(frames: Vec<FrameStats>, matcher: Option<MatcherInfo>) -> ReportInput {
        ReportInput {
            bag: "b.mcap".into(),
            storage: "mcap",
            backend: "cpu",
            config: Config::default(),
            frames,
            per_topic: BTreeMap::new(),
            skipped: 0,
            skip_reasons: BTreeMap::new(),
            wall_s: 1.0,
            processing_s: 0.5,
            homography: Vec::new(),
            opencv: None,
            matcher,
            heatmap: Heatmap::new(32),
        }
    }

    pub(super) fn frame(m: Option<MatchTrackStats>) -> FrameStats {
        FrameStats::new("/t", 0, 0, &Features::default(), (64, 64), 32, 1.0, None)
            .with_match_track(m)
    }

    fn mt(matches: usize, inliers: usize) -> Option<MatchTrackStats> {
        Some(MatchTrackStats {
            query: 100,
            train: 100,
            matches,
            inliers,
        })
    }

    #[test]
    fn descriptor_tracking_summary() {
        let info = MatcherInfo {
            backend: "cpu",
            params: MatchParams::default(),
        };
        // First frame: no previous one. Then 3 pairs, one without matches.
        let frames = vec![
            frame(None),
            frame(mt(80, 72)),
            frame(mt(0, 0)),
            frame(mt(20, 2)),
        ];
        let r = Report::build(&input(frames.clone(), Some(info)));
        let d = r.descriptor_tracking.as_ref().unwrap();
        assert_eq!((d.frame_pairs, d.matches, d.inliers), (3, 100, 74));
        assert_eq!(d.query_keypoints, 300);
        assert_eq!(d.inlier_share, 0.74);
        assert_eq!(d.matcher, "cpu");
        assert_eq!((d.ratio, d.cross_check), (Some(0.8), true));
        // Matches per pair: 80, 0, 20. Shares over the pairs with matches: 0.9 and 0.1.
        assert_eq!(
            (d.matches_per_pair.mean, d.matches_per_pair.p50),
            (100.0 / 3.0, 20.0)
        );
        assert_eq!(d.inlier_share_per_pair.n, 2);
        assert!((d.inlier_share_per_pair.mean - 0.5).abs() < 1e-12);
        assert_eq!(d.inlier_share_per_pair.p50, 0.1);
        let md = r.markdown(&[]);
        assert!(md.contains("## Frame-to-frame tracking"), "{md}");
        assert!(
            md.contains("100 matches of 300 keypoints, 74 of them inliers (inlier share 0.740)"),
            "{md}"
        );
        assert!(
            md.contains("| inlier share | 0.500 | 0.100 | 0.100 | 0.900 |"),
            "{md}"
        );
        assert!(md.contains("Lowe ratio 0.8, cross-check"), "{md}");
        // The per-frame series travels in report.json.
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["per_frame"][1]["match_track"]["inliers"], 72);
        assert!(j["per_frame"][0]["match_track"].is_null());
        // No descriptors (describe off): no matcher, no section.
        let r = Report::build(&input(vec![frame(None), frame(None)], None));
        assert!(r.descriptor_tracking.is_none());
        assert!(!r.markdown(&[]).contains("Frame-to-frame"));
    }

    #[test]
    fn writes_every_plot_and_the_html() {
        let dir = std::env::temp_dir().join(format!("gpu_features_report_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let res = |name: &str, rep: f64, ms: f64| HomographyResult {
            name: name.into(),
            n1: 10,
            n2: 10,
            n1_common: 10,
            n2_common: 10,
            correspondences: 5,
            repeatability: rep,
            correct_matches: 4,
            matching_score: ms,
        };
        let mut inp = input(vec![frame(None), frame(mt(80, 72)), frame(mt(20, 2))], None);
        inp.heatmap.add(&[], (64, 64));
        inp.homography = vec![res("p", 0.6, 0.5)];
        inp.opencv = Some(OpencvEval {
            opencv_version: "5.0.0".into(),
            pairs: vec![res("p", 0.61, 0.52)],
            ..Default::default()
        });
        let w = write(&inp, &dir).unwrap();
        let names: Vec<String> = w
            .plots
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for f in [
            "latency.png",
            "heatmap.png",
            "homography.png",
            "tracking.png",
        ] {
            assert!(names.iter().any(|n| n == f), "{f}: {names:?}");
        }
        for p in &w.plots {
            let img = ::image::open(p).unwrap().to_rgb8();
            assert_eq!(img.dimensions(), (plot::W, plot::H));
            assert!(
                plot::ink_pixels(&img, 0..plot::W, 0..plot::H) > 5_000,
                "{p:?}"
            );
        }
        let md = std::fs::read_to_string(&w.markdown).unwrap();
        assert!(md.contains("![Repeatability and matching score per image pair, ours beside OpenCV 5.0.0 ORB](homography.png)"), "{md}");
        let html = std::fs::read_to_string(&w.html).unwrap();
        assert_eq!(
            html.matches("data:image/png;base64,").count(),
            w.plots.len()
        );
        assert!(
            html.contains("<td>p</td><td>0.600</td><td>0.610</td>"),
            "{html:.3000}"
        );
    }
}
