//! Every config key's domain in one table ([`SPECS`]): the ranges and allowed values
//! [`super::Config::validate`] checks (`validate.rs` keeps only the rules between keys), and what
//! the node's `describe_parameters` answers (ranges, allowed values, read-only flags); each
//! key's description is its comment in config/default.yaml, so the file users read and
//! `ros2 param describe` say the same.

use serde_yaml::Value;

/// Most helper threads `cuda.crew_threads` may ask for.
const MAX_CREW_THREADS: i64 = 64;
/// The longest spin of `cuda.prewake_us` (10 ms: more than a frame's hand-over ever takes).
const MAX_PREWAKE_US: i64 = 10_000;
/// The earliest `cuda.warm_ahead_us` (100 ms: more than a 10 Hz camera's gap).
const MAX_WARM_AHEAD_US: i64 = 100_000;

/// The values a key takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    Bool,
    /// `min..=max`; `odd`: odd values only; `or_zero`: 0 allowed besides (a switch off).
    Int {
        min: i64,
        max: i64,
        odd: bool,
        or_zero: bool,
    },
    /// Between `min` and `max` (finite), each end open or closed; `max` may be infinite.
    Float {
        min: f64,
        max: f64,
        min_open: bool,
        max_open: bool,
    },
    /// One of these strings.
    OneOf(&'static [&'static str]),
}

/// One key: its dotted name, domain, and a note (what a special value means, or a rule
/// between keys; empty when none).
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub key: &'static str,
    pub domain: Domain,
    pub note: &'static str,
}

const fn int(min: i64, max: i64) -> Domain {
    Domain::Int {
        min,
        max,
        odd: false,
        or_zero: false,
    }
}

const fn odd(min: i64, max: i64) -> Domain {
    Domain::Int {
        min,
        max,
        odd: true,
        or_zero: false,
    }
}

const fn closed(min: f64, max: f64) -> Domain {
    Domain::Float {
        min,
        max,
        min_open: false,
        max_open: false,
    }
}

const fn left_open(min: f64, max: f64) -> Domain {
    Domain::Float {
        min,
        max,
        min_open: true,
        max_open: false,
    }
}

const fn spec(key: &'static str, domain: Domain) -> Spec {
    Spec {
        key,
        domain,
        note: "",
    }
}

const fn noted(key: &'static str, domain: Domain, note: &'static str) -> Spec {
    Spec { key, domain, note }
}

const B: Domain = Domain::Bool;
const NON_NEGATIVE: Domain = closed(0.0, f64::INFINITY);

/// Every key of [`super::Config`], in its tree order.
pub const SPECS: &[Spec] = &[
    spec("pyramid.levels", int(1, crate::levels::MAX_LEVELS as i64)),
    spec("pyramid.scale_factor", left_open(1.0, 4.0)),
    spec(
        "pyramid.interpolation",
        Domain::OneOf(&["linear", "linear_exact"]),
    ),
    spec("pyramid.scales", Domain::OneOf(&["orb", "orb_slam3"])),
    spec(
        "detector.method",
        Domain::OneOf(&["fast", "harris", "none"]),
    ),
    spec("detector.fast_threshold", int(1, 255)),
    Spec {
        key: "detector.min_fast_threshold",
        domain: int(1, 255),
        note: "<= detector.fast_threshold",
    },
    Spec {
        key: "detector.low_threshold_retry",
        domain: B,
        note: "true needs select.spread grid or quadtree",
    },
    spec("detector.nonmax_suppression", B),
    spec("detector.border", int(3, 256)),
    spec("detector.score", Domain::OneOf(&["harris", "fast"])),
    spec(
        "detector.harris_k",
        Domain::Float {
            min: 0.0,
            max: 0.25,
            min_open: true,
            max_open: true,
        },
    ),
    spec("detector.harris_block_size", odd(3, 31)),
    spec("detector.dense_block_size", int(1, 31)),
    spec("detector.dense_ksize", odd(3, 7)),
    spec("detector.dense_quality", left_open(0.0, 1.0)),
    noted(
        "select.max_keypoints",
        int(0, 1_000_000),
        "0 = keep every corner",
    ),
    spec(
        "select.spread",
        Domain::OneOf(&["none", "grid", "quadtree"]),
    ),
    spec("select.cell_size", int(8, 1024)),
    Spec {
        key: "orient.enabled",
        domain: B,
        note: "true needs detector.border > orient.patch_size / 2",
    },
    Spec {
        key: "orient.patch_size",
        domain: odd(3, 127),
        note: "31 while describe.enabled",
    },
    spec("canny.enabled", B),
    spec("canny.low_threshold", NON_NEGATIVE),
    spec("canny.high_threshold", NON_NEGATIVE),
    spec("canny.l2_gradient", B),
    noted(
        "canny.blur_ksize",
        Domain::Int {
            min: 3,
            max: 31,
            odd: true,
            or_zero: true,
        },
        "0 = no pre-blur",
    ),
    spec("canny.blur_sigma", NON_NEGATIVE),
    Spec {
        key: "describe.enabled",
        domain: B,
        note: "true needs orient.patch_size 31",
    },
    spec("describe.blur", Domain::OneOf(&["orb", "orb_slam3"])),
    spec("describe.fma", B),
    spec("track.enabled", B),
    spec("track.max_features", int(1, 10_000)),
    spec("track.min_distance", closed(0.0, 1000.0)),
    spec("track.window", odd(5, 63)),
    spec("track.levels", int(0, 8)),
    spec("track.flow_back", B),
    noted("track.ransac_threshold", closed(0.0, 100.0), "0 = off"),
    Spec {
        key: "track.stereo",
        domain: B,
        note: "false with track.frontend vins_mono",
    },
    spec("track.detector", Domain::OneOf(&["gftt", "fast"])),
    spec("track.quality", left_open(0.0, 1.0)),
    spec("track.fast_threshold", int(1, 255)),
    spec("track.mask_order", Domain::OneOf(&["vins", "stable"])),
    spec("track.lifting", Domain::OneOf(&["camodocal", "opencv"])),
    Spec {
        key: "track.feature_every",
        domain: int(1, 100),
        note: "1 with track.frontend vins_mono",
    },
    spec(
        "track.frontend",
        Domain::OneOf(&["vins_fusion", "vins_mono"]),
    ),
    noted("track.freq", int(0, 1000), "0 = 100 Hz, as VINS-Mono"),
    spec("track.equalize", B),
    noted(
        "cpu.threads",
        int(0, super::MAX_CPU_THREADS),
        "0 = auto: all cores; 1 for a tracker beside a GPU pipeline",
    ),
    spec("cuda.zero_copy", Domain::OneOf(&["auto", "on", "off"])),
    spec("cuda.graphs", B),
    noted("cuda.stage_timings", int(0, u32::MAX as i64), "0 = never"),
    spec("cuda.programmatic_launch", B),
    noted("cuda.prewake_us", int(-1, MAX_PREWAKE_US), "-1 = auto"),
    noted(
        "cuda.warm_ahead_us",
        int(-1, MAX_WARM_AHEAD_US),
        "-1 = auto",
    ),
    noted("cuda.crew_threads", int(0, MAX_CREW_THREADS), "0 = auto"),
    spec("cuda.host_gray", B),
];

/// The spec of `key`, if it is a config key.
pub fn spec_of(key: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.key == key)
}

impl Domain {
    /// The domain in words, as the errors and the parameter descriptions say it: `in 1..=32`,
    /// `odd in 3..=31`, `0 or odd in 3..=31`, `in (1, 4]`, `>= 0`, `one of fast, harris, none`.
    pub fn describe(&self) -> String {
        match *self {
            Domain::Bool => "true or false".into(),
            Domain::Int {
                min,
                max,
                odd,
                or_zero,
            } => {
                let what = if odd { "odd in " } else { "in " };
                let zero = if or_zero { "0 or " } else { "" };
                format!("{zero}{what}{min}..={max}")
            }
            Domain::Float {
                min,
                max,
                min_open,
                max_open,
            } => {
                if max.is_infinite() {
                    format!("{} {min}", if min_open { ">" } else { ">=" })
                } else {
                    let l = if min_open { '(' } else { '[' };
                    let r = if max_open { ')' } else { ']' };
                    format!("in {l}{min}, {max}{r}")
                }
            }
            Domain::OneOf(v) => format!("one of {}", v.join(", ")),
        }
    }

    /// Whether `v` (as the config serializes it) is in the domain.
    pub fn contains(&self, v: &Value) -> bool {
        match *self {
            Domain::Bool => v.is_bool(),
            Domain::Int {
                min,
                max,
                odd,
                or_zero,
            } => match v.as_i64() {
                Some(0) if or_zero => true,
                Some(i) => (min..=max).contains(&i) && (!odd || i % 2 != 0),
                None => false,
            },
            Domain::Float {
                min,
                max,
                min_open,
                max_open,
            } => match v.as_f64() {
                Some(f) if f.is_finite() => {
                    (if min_open { f > min } else { f >= min })
                        && (if max_open { f < max } else { f <= max })
                }
                _ => false,
            },
            Domain::OneOf(all) => v.as_str().is_some_and(|s| all.contains(&s)),
        }
    }
}

/// `key: VALUE is not DOMAIN (note)` when `v` is outside `domain`.
pub fn check_value(key: &str, v: &Value, domain: &Domain, note: &str) -> Result<(), String> {
    if domain.contains(v) {
        return Ok(());
    }
    let shown = match v {
        Value::String(s) => format!("{s:?}"),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    };
    let note = match note {
        "" => String::new(),
        n => format!(" ({n})"),
    };
    Err(format!("{key}: {shown} is not {}{note}", domain.describe()))
}

/// Checks every key of a flattened config against [`SPECS`]: the first value outside its
/// domain, as [`check_value`] says it.
pub fn check(values: &[(String, Value)]) -> std::result::Result<(), String> {
    for (key, v) in values {
        if let Some(s) = spec_of(key) {
            check_value(key, v, &s.domain, s.note)?;
        }
    }
    Ok(())
}

/// The description of each key: its comment in config/default.yaml (the comment lines below
/// it that continue it included), `(key, text)` in file order.
pub fn descriptions() -> Vec<(String, String)> {
    described(include_str!("../../config/default.yaml"))
}

/// [`descriptions`] of a YAML text written as config/default.yaml is: `key: value  # text`,
/// nested by two-space indentation, a comment continued on the lines below that hold only a
/// comment indented past the key.
pub fn described(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut last_indent = usize::MAX;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        if body.is_empty() {
            last_indent = usize::MAX;
            continue;
        }
        if let Some(comment) = body.strip_prefix('#') {
            // A continuation of the last key's comment.
            if indent > last_indent {
                if let Some((_, text)) = out.last_mut() {
                    text.push(' ');
                    text.push_str(comment.trim());
                }
            }
            continue;
        }
        let (code, comment) = match body.split_once(" #") {
            Some((c, m)) => (c.trim(), m.trim()),
            None => (body.trim(), ""),
        };
        let Some((key, value)) = code.split_once(':') else {
            continue;
        };
        while path.last().is_some_and(|(i, _)| *i >= indent) {
            path.pop();
        }
        let mut dotted: Vec<&str> = path.iter().map(|(_, k)| k.as_str()).collect();
        dotted.push(key.trim());
        let dotted = dotted.join(".");
        if value.trim().is_empty() {
            path.push((indent, key.trim().to_string()));
            last_indent = usize::MAX;
        } else {
            out.push((dotted, comment.to_string()));
            last_indent = indent;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn every_key_has_a_spec_and_a_description() {
        let flat = Config::default().flatten();
        let keys: Vec<&str> = flat.iter().map(|(k, _)| k.as_str()).collect();
        let specs: Vec<&str> = SPECS.iter().map(|s| s.key).collect();
        assert_eq!(keys, specs, "SPECS lists every key, in the config's order");
        let described = descriptions();
        for k in keys {
            let d = described.iter().find(|(key, _)| key == k);
            assert!(
                d.is_some_and(|(_, t)| t.len() >= 8),
                "{k}: no description in config/default.yaml ({d:?})"
            );
        }
        // The defaults are in their domains.
        check(&flat).unwrap();
    }

    #[test]
    fn comments_continue_onto_the_lines_below() {
        let d = described("a:\n  b: 1     # first\n         # second\n  c: x\n# top\nd: 2 # dee\n");
        assert_eq!(
            d,
            vec![
                ("a.b".to_string(), "first second".to_string()),
                ("a.c".to_string(), String::new()),
                ("d".to_string(), "dee".to_string()),
            ]
        );
    }

    /// Each domain's edges: the values just inside pass the whole config's validation, the
    /// values just outside fail it naming the key (so the table is what validation uses).
    #[test]
    fn validation_follows_the_table() {
        let base = Config::default();
        for s in SPECS {
            let (inside, outside): (Vec<Value>, Vec<Value>) = match s.domain {
                Domain::Bool => (vec![true.into(), false.into()], vec!["x".into()]),
                Domain::Int { min, max, odd, .. } => {
                    let (lo, hi) = if odd {
                        (min | 1, if max % 2 == 0 { max - 1 } else { max })
                    } else {
                        (min, max)
                    };
                    let mut out = vec![(min - 1).into(), (max + 1).into()];
                    if odd {
                        out.push((lo + 1).into());
                    }
                    (vec![lo.into(), hi.into()], out)
                }
                Domain::Float {
                    min,
                    max,
                    min_open,
                    max_open,
                } => {
                    let mut inside = vec![];
                    let mut outside = vec![(min - 0.5).into()];
                    if min_open {
                        outside.push(min.into());
                    } else {
                        inside.push(min.into());
                    }
                    if max.is_finite() {
                        outside.push((max + 0.5).into());
                        if max_open {
                            outside.push(max.into());
                        } else {
                            inside.push(max.into());
                        }
                    }
                    (inside, outside)
                }
                Domain::OneOf(all) => (
                    all.iter().map(|&v| v.into()).collect(),
                    vec!["no_such_value".into()],
                ),
            };
            for v in inside {
                let c = base.with_values(&[(s.key.to_string(), v.clone())]);
                // Inside the domain a value may still break a rule between keys; never
                // this key's own range.
                if let Err(e) = &c {
                    let e = e.to_string();
                    assert!(
                        !e.contains(&format!("{}: ", s.key))
                            || !s.note.is_empty()
                            || e.contains("needs")
                            || e.contains("learned"),
                        "{} = {v:?} refused: {e}",
                        s.key
                    );
                }
            }
            for v in outside {
                let e = base
                    .with_values(&[(s.key.to_string(), v.clone())])
                    .expect_err(&format!("{} = {v:?} accepted", s.key))
                    .to_string();
                assert!(e.contains(s.key), "{} = {v:?}: {e}", s.key);
            }
        }
    }
}
