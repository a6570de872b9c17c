//! `report.md`: the [`Report`] as Markdown tables and text, with links to the plots.

use std::fmt::Write as _;

use super::Report;
use crate::eval::{HomographyResult, TRACK_MIN_ZNCC, TRACK_RADIUS};

impl Report {
    /// The repeatability / matching-score section: ours beside OpenCV ORB's, then every row.
    fn homography_markdown(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "## Repeatability and matching score (homography pairs)\n\nMikolajczyk \
             protocol: overlap error < 40% after normalising the image-1 region to a 30 px \
             radius, one-to-one correspondences, scores over the common part; matching \
             score = correct nearest-neighbour descriptor matches / min(n1, n2). Ours: our \
             keypoints with our ORB descriptors, matched by `gpu_features::matching`. See \
             `docs/evaluation.md`.\n"
        );
        let opencv = self.opencv.as_ref();
        let cv_name = opencv.map_or("OpenCV ORB".to_string(), |o| {
            format!("OpenCV {} ORB", o.opencv_version)
        });
        let find = |list: Option<&Vec<HomographyResult>>, name: &str| {
            list.and_then(|l| l.iter().find(|x| x.name == name))
                .cloned()
        };
        let num = |r: &Option<HomographyResult>, f: fn(&HomographyResult) -> f64| {
            r.as_ref()
                .map_or("-".to_string(), |r| format!("{:.3}", f(r)))
        };
        let _ = writeln!(
            s,
            "| pair | repeatability, ours | repeatability, {cv_name} | matching score, ours | \
             matching score, {cv_name} | matching score, our keypoints + OpenCV's descriptor \
             |\n|---|---|---|---|---|---|"
        );
        for r in &self.homography {
            let cv = find(opencv.map(|o| &o.pairs), &r.name);
            let mixed = find(opencv.map(|o| &o.ours_with_orb_descriptor), &r.name);
            let _ = writeln!(
                s,
                "| {} | {:.3} | {} | {:.3} | {} | {} |",
                r.name,
                r.repeatability,
                num(&cv, |x| x.repeatability),
                r.matching_score,
                num(&cv, |x| x.matching_score),
                num(&mixed, |x| x.matching_score),
            );
        }
        if opencv.is_none() {
            let _ = writeln!(
                s,
                "\nOpenCV ORB columns: run `scripts/eval_homography.py` and pass its JSON with \
                 `--opencv-eval`."
            );
        }
        let _ = writeln!(
            s,
            "\nAll rows:\n\n| pair | detector + descriptor | n1 | n2 | common | \
             correspondences | repeatability | correct matches | matching score |\n\
             |---|---|---|---|---|---|---|---|---|"
        );
        let row = |s: &mut String, who: &str, r: &HomographyResult| {
            let _ = writeln!(
                s,
                "| {} | {who} | {} | {} | {}/{} | {} | {:.3} | {} | {:.3} |",
                r.name,
                r.n1,
                r.n2,
                r.n1_common,
                r.n2_common,
                r.correspondences,
                r.repeatability,
                r.correct_matches,
                r.matching_score
            );
        };
        for r in &self.homography {
            row(s, "gpu_features + our ORB descriptor (ours)", r);
            if let Some(o) = opencv {
                for x in o
                    .ours_with_our_descriptor
                    .iter()
                    .filter(|x| x.name == r.name)
                {
                    row(
                        s,
                        "gpu_features + our ORB descriptor, scored by the script",
                        x,
                    );
                }
                for x in o
                    .ours_with_orb_descriptor
                    .iter()
                    .filter(|x| x.name == r.name)
                {
                    row(s, "gpu_features + OpenCV ORB descriptor", x);
                }
                for x in o.pairs.iter().filter(|x| x.name == r.name) {
                    row(s, &cv_name, x);
                }
            }
        }
        s.push('\n');
    }

    /// The title and what was replayed, how fast, and what was skipped.
    fn run_markdown(&self, s: &mut String) {
        let _ = writeln!(s, "# gpu_features replay report\n");
        let _ = writeln!(
            s,
            "- bag: `{}` ({})\n- backend: {}\n- frames: {} ({} skipped)\n- wall time: {:.2} s",
            self.bag, self.storage, self.backend, self.frames, self.skipped, self.wall_s
        );
        for (t, n) in &self.per_topic {
            let _ = writeln!(s, "- topic `{t}`: {n} frames");
        }
        let _ = writeln!(
            s,
            "- throughput: {:.1} frames/s in the pipeline, {:.1} frames/s overall \
             (bag reading, decoding and writing included)\n",
            self.fps_pipeline, self.fps_overall
        );
        if !self.skip_reasons.is_empty() {
            let _ = writeln!(s, "Skipped frames:\n");
            for (r, n) in &self.skip_reasons {
                let _ = writeln!(s, "- {n} x {r}");
            }
            s.push('\n');
        }
    }

    /// The latency per stage.
    fn latency_markdown(&self, s: &mut String) {
        let _ = writeln!(s, "## Latency per stage (ms)\n");
        let _ = writeln!(
            s,
            "| stage | mean | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|"
        );
        for st in &self.stage_order {
            if let Some(d) = self.latency_ms.get(st) {
                let _ = writeln!(
                    s,
                    "| {st} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    d.mean, d.p50, d.p90, d.p99, d.max
                );
            }
        }
        let _ = writeln!(
            s,
            "\n`frame` is the wall time of one `Pipeline::process` call. Percentiles are \
             nearest-rank.\n"
        );
    }

    /// Keypoints per frame and level, their coverage, the edge density.
    fn keypoints_markdown(&self, s: &mut String) {
        let k = &self.keypoints_per_frame;
        let _ = writeln!(s, "## Keypoints\n");
        let _ = writeln!(
            s,
            "Per frame: mean {:.1}, min {:.0}, p50 {:.0}, max {:.0}.\n",
            k.mean, k.min, k.p50, k.max
        );
        let _ = writeln!(s, "| level | mean keypoints |\n|---|---|");
        for (l, m) in self.keypoints_per_level_mean.iter().enumerate() {
            let _ = writeln!(s, "| {l} | {m:.1} |");
        }
        let c = &self.coverage;
        let _ = writeln!(
            s,
            "\nSpatial coverage (share of {px}x{px}-pixel cells of level 0 holding at least one \
             keypoint): mean {:.3}, min {:.3}, p50 {:.3}.\n",
            c.mean,
            c.min,
            c.p50,
            px = self.coverage_cell_px
        );
        if let Some(e) = &self.edge_density {
            let _ = writeln!(
                s,
                "## Edges\n\nEdge density (share of Canny edge pixels): mean {:.4}, min {:.4}, \
                 p50 {:.4}, max {:.4}.\n",
                e.mean, e.min, e.p50, e.max
            );
        }
    }

    /// Frame-to-frame tracking of the keypoints: by patch, by descriptor.
    fn tracking_markdown(&self, s: &mut String) {
        if self.tracking.is_some() || self.descriptor_tracking.is_some() {
            let _ = writeln!(s, "## Frame-to-frame tracking\n");
        }
        if let Some(t) = &self.tracking {
            let _ = writeln!(
                s,
                "Over {} consecutive frame pairs: {} of {} keypoints re-found ({:.3}); by \
                 position and octave alone {:.3}. Per pair: p50 {:.3}, min {:.3}.\n",
                t.frame_pairs,
                t.refound,
                t.tried,
                t.ratio,
                t.ratio_position,
                t.per_pair.p50,
                t.per_pair.min
            );
            let _ = writeln!(
                s,
                "Method: a keypoint of frame t is re-found when frame t+1 (same topic) has a \
                 keypoint within {TRACK_RADIUS} px in x and y, on a pyramid level at most one \
                 away, whose 15x15-sample gray patch (sample spacing round(1.2^octave) px) has \
                 a zero-mean normalised cross-correlation of at least {TRACK_MIN_ZNCC} with the \
                 keypoint's patch in frame t. Keypoints whose patch leaves the image are not \
                 counted. See `src/eval/`.\n"
            );
        }
        if let Some(d) = &self.descriptor_tracking {
            let m = &d.matches_per_pair;
            let i = &d.inlier_share_per_pair;
            let _ = writeln!(
                s,
                "Descriptor matching over {} consecutive frame pairs ({} matcher): {} matches \
                 of {} keypoints, {} of them inliers (inlier share {:.3}).\n",
                d.frame_pairs, d.matcher, d.matches, d.query_keypoints, d.inliers, d.inlier_share
            );
            let _ = writeln!(
                s,
                "| per frame pair | mean | median | min | max |\n|---|---|---|---|---|\n\
                 | descriptor matches | {:.1} | {:.0} | {:.0} | {:.0} |\n\
                 | inlier share | {:.3} | {:.3} | {:.3} | {:.3} |\n",
                m.mean, m.p50, m.min, m.max, i.mean, i.p50, i.min, i.max
            );
            let tests = [
                d.ratio.map(|r| format!("Lowe ratio {r}")),
                d.cross_check.then(|| "cross-check".to_string()),
                d.max_distance.map(|x| format!("distance <= {x}")),
            ];
            let tests: Vec<String> = tests.into_iter().flatten().collect();
            let _ = writeln!(
                s,
                "Method: the ORB descriptors of frame t are matched to those of frame t+1 \
                 (same topic) by brute-force Hamming distance ({}); a match is an inlier when \
                 its two keypoints lie within {TRACK_RADIUS} px of each other in x and y, on \
                 pyramid levels at most one apart; inlier share = inliers / matches (the median \
                 is over the pairs with at least one match). See `src/eval/`.\n",
                if tests.is_empty() {
                    "every nearest neighbour".to_string()
                } else {
                    tests.join(", ")
                }
            );
        }
    }

    /// The feature tracker's tracks (`track.*`).
    fn feature_tracks_markdown(&self, s: &mut String) {
        if let Some(t) = &self.feature_tracks {
            let _ = writeln!(s, "## Feature tracks\n");
            let _ = writeln!(
                s,
                "The tracker (`track.*`, docs/tracking.md) over {} frames; of the tracks carried \
                 into a frame the flow (status, flow back, border) kept {:.1} %, the \
                 fundamental-matrix test {:.1} % of those, and the mask dropped {:.1} % of \
                 the rest.\n",
                t.frames,
                100.0 * t.flow_kept_share,
                100.0 * t.ransac_inlier_share,
                100.0 * t.mask_dropped_share
            );
            let _ = writeln!(s, "| | mean | p50 | p90 | max |\n|---|---|---|---|---|");
            for (name, d) in [
                ("tracks per frame", &t.alive_per_frame),
                ("length of ended tracks (frames)", &t.ended_length),
                ("forward-backward error (px)", &t.flow_back_error_px),
            ] {
                let _ = writeln!(
                    s,
                    "| {name} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    d.mean, d.p50, d.p90, d.max
                );
            }
            s.push('\n');
        }
    }

    pub fn markdown(&self, plots: &[(String, String)]) -> String {
        let mut s = String::new();
        self.run_markdown(&mut s);
        self.latency_markdown(&mut s);
        self.keypoints_markdown(&mut s);
        self.tracking_markdown(&mut s);
        self.feature_tracks_markdown(&mut s);
        if !self.homography.is_empty() {
            self.homography_markdown(&mut s);
        }
        if !plots.is_empty() {
            let _ = writeln!(s, "## Plots\n");
            for (file, caption) in plots {
                let _ = writeln!(s, "{caption}\n\n![{caption}]({file})\n");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::report::tests::{frame, input};
    use crate::replay::report::OpencvEval;

    #[test]
    fn matching_scores_side_by_side() {
        let res = |name: &str, rep: f64, ms: f64| HomographyResult {
            name: name.into(),
            n1: 10,
            n2: 10,
            n1_common: 10,
            n2_common: 10,
            correspondences: (rep * 10.0) as usize,
            repeatability: rep,
            correct_matches: (ms * 10.0) as usize,
            matching_score: ms,
        };
        let mut inp = input(vec![frame(None)], None);
        inp.homography = vec![res("p", 0.6, 0.5), res("q", 0.7, 0.4)];
        let md = Report::build(&inp).markdown(&[]);
        assert!(md.contains("| p | 0.600 | - | 0.500 | - | - |"), "{md}");
        assert!(md.contains("run `scripts/eval_homography.py`"), "{md}");
        inp.opencv = Some(OpencvEval {
            opencv_version: "5.0.0".into(),
            pairs: vec![res("p", 0.61, 0.52)],
            ours_with_orb_descriptor: vec![res("p", 0.6, 0.51)],
            ours_with_our_descriptor: vec![res("p", 0.6, 0.5)],
        });
        let md = Report::build(&inp).markdown(&[]);
        assert!(md.contains("matching score, OpenCV 5.0.0 ORB"), "{md}");
        // Ours beside OpenCV's on one row; a pair the script did not run keeps dashes.
        assert!(
            md.contains("| p | 0.600 | 0.610 | 0.500 | 0.520 | 0.510 |"),
            "{md}"
        );
        assert!(md.contains("| q | 0.700 | - | 0.400 | - | - |"), "{md}");
        assert!(
            md.contains("| p | OpenCV 5.0.0 ORB | 10 | 10 | 10/10 | 6 | 0.610 | 5 | 0.520 |"),
            "{md}"
        );
        assert!(
            md.contains("our ORB descriptor, scored by the script"),
            "{md}"
        );
        // The script's JSON without the newer key still loads.
        let old: OpencvEval = serde_json::from_str(
            r#"{"opencv_version": "4.9", "pairs": [], "ours_with_orb_descriptor": []}"#,
        )
        .unwrap();
        assert!(old.ours_with_our_descriptor.is_empty());
    }
}
