//! GPU peers (kornia, cuCIM) on the same frames and GPU: scripts/bench_peers.py run as a
//! subprocess, its timings turned into `peer.<op>` values and report rows. Optional: a
//! library that is not installed is named in a note and its rows are left out.

use super::*;

/// (op key in the script's JSON, row label, our matched config key for the ratio row).
pub(super) const PEER_OPS: [(&str, &str, Option<&str>); 4] = [
    (
        "kornia_canny",
        "kornia.filters.canny (own Gaussian + thresholds)",
        Some("canny"),
    ),
    (
        "kornia_harris",
        "kornia.feature.harris_response (response map only)",
        None,
    ),
    (
        "cucim_canny",
        "cuCIM skimage.feature.canny (sigma 1, 50/150)",
        Some("canny"),
    ),
    (
        "cucim_harris",
        "cuCIM skimage.feature.corner_harris (response map only)",
        None,
    ),
];

/// The libraries the script could not use, as one note ("kornia: ModuleNotFoundError ...").
pub(super) fn missing_note(v: &Value) -> Option<String> {
    let m = v["missing"].as_object()?;
    if m.is_empty() {
        return None;
    }
    let why: Vec<String> = m
        .iter()
        .map(|(k, w)| format!("{k}: {}", w.as_str().unwrap_or("?")))
        .collect();
    Some(format!("GPU peer rows left out for {}", why.join("; ")))
}

impl SizeResult {
    pub(super) fn add_peers(&mut self, v: &Value) {
        let n = v["runs"].as_u64().unwrap_or(0) as usize;
        if let Some(ops) = v["results"].as_object() {
            for (op, r) in ops {
                if let (Some(m), Some(p)) = (r["median_ms"].as_f64(), r["p90_ms"].as_f64()) {
                    let s = Stat {
                        median: m,
                        p90: p,
                        n,
                    };
                    self.values.insert(format!("peer.{op}"), s);
                }
            }
        }
        if let Some(c) = v["counts"].as_object() {
            for (op, x) in c {
                if let Some(x) = x.as_f64() {
                    self.counts.insert(format!("peer.{op}.count"), x);
                }
            }
        }
    }
}

/// The peers' rows (times) and ratio rows (peer / ours, wall), only for ops that ran.
pub(super) fn peer_rows(results: &[SizeResult]) -> (Vec<Row>, Vec<Row>) {
    let ran = |op: &str| {
        let key = format!("peer.{op}");
        results.iter().any(|r| r.values.contains_key(&key))
    };
    let ops: Vec<_> = PEER_OPS.iter().filter(|(op, _, _)| ran(op)).collect();
    if ops.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let mut rows = vec![Row::Header(
        "GPU peers, same frames and GPU (wall: upload of the pageable frame + op + sync; \
         their own semantics, not our output)"
            .into(),
    )];
    let mut ratios = vec![Row::Header("GPU peer / ours GPU (wall)".into())];
    for (op, label, ours) in ops {
        rows.push(Row::Time(label.to_string(), format!("peer.{op}")));
        if op.ends_with("_canny") {
            // Their thresholds and smoothing differ from cv::Canny: the edge count shows
            // how comparable the work is (ours: the opencv_canny.yaml row above).
            rows.push(Row::Count(
                "  edge pixels / frame".into(),
                format!("peer.{op}.count"),
            ));
        }
        if let Some(k) = ours {
            ratios.push(Row::Ratio(
                format!("{label} vs config/opencv_{k}.yaml"),
                format!("peer.{op}"),
                format!("gpu.{k}.wall"),
            ));
        }
    }
    (rows, ratios)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_timings_become_rows_and_ratios_and_missing_libraries_a_note() {
        let v = serde_json::json!({
            "runs": 20,
            "missing": {"cucim": "ModuleNotFoundError: No module named 'cucim'"},
            "results": {
                "kornia_canny": {"median_ms": 2.0, "p90_ms": 2.5},
                "kornia_harris": {"median_ms": 0.8, "p90_ms": 0.9}
            },
            "counts": {"kornia_canny": 12345.0}
        });
        let mut r = SizeResult::default();
        r.add_peers(&v);
        r.add_run(
            "gpu.canny",
            RunStats {
                frames: 20,
                stages: Vec::new(),
                events_total: Some(Stat {
                    median: 0.4,
                    p90: 0.5,
                    n: 20,
                }),
                wall: Stat {
                    median: 0.5,
                    p90: 0.6,
                    n: 20,
                },
                keypoints: 0.0,
                edges: Some(1.0),
            },
        );
        assert_eq!(r.values["peer.kornia_canny"].median, 2.0);
        assert_eq!(r.counts["peer.kornia_canny.count"], 12345.0);
        let (rows, ratios) = peer_rows(std::slice::from_ref(&r));
        assert_eq!(
            rows.len(),
            4,
            "header + the two kornia ops + the canny edge count"
        );
        let sizes = [Size {
            width: 64,
            height: 48,
        }];
        let t = render_table(&sizes, std::slice::from_ref(&r), &ratios);
        assert!(
            t.contains("kornia.filters.canny") && t.contains("4.00x"),
            "{t}"
        );
        assert!(!t.contains("cuCIM"), "{t}");
        assert!(missing_note(&v)
            .unwrap()
            .contains("cucim: ModuleNotFoundError"));
        assert!(peer_rows(&[SizeResult::default()]).0.is_empty());
    }
}
