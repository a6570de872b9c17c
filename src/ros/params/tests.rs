//! The node's parameters: start-up sets, run-time changes, read-only settings, VINS's config.

use super::*;

#[test]
fn every_config_key_is_a_parameter() {
    let p = NodeParams::new();
    let names: Vec<String> = p.all().into_iter().map(|(k, _)| k).collect();
    for (k, _) in Config::default().flatten() {
        assert!(names.contains(&k), "{k}");
    }
    assert!(names.contains(&"backend".to_string()));
}

#[test]
fn runtime_updates_are_validated_whole() {
    let mut p = NodeParams::new();
    let g = p.live.generation;
    p.set("canny.low_threshold", &ParameterValue::Double(10.0))
        .unwrap();
    assert_eq!(p.live.config.canny.low_threshold, 10.0);
    assert!(p.live.generation > g);
    // integers are accepted for double settings
    p.set("canny.high_threshold", &ParameterValue::Integer(90))
        .unwrap();
    assert_eq!(p.live.config.canny.high_threshold, 90.0);
    let before = p.live.clone();
    let e = p
        .set("pyramid.levels", &ParameterValue::Integer(0))
        .unwrap_err();
    assert!(e.contains("pyramid.levels"), "{e}");
    assert_eq!(p.live.config, before.config);
    assert!(p
        .set("backend", &ParameterValue::String("cpu".into()))
        .is_err());
    assert!(p.set("nope", &ParameterValue::Integer(1)).is_err());
    assert!(p
        .set("pyramid.levels", &ParameterValue::String("x".into()))
        .is_err());
}

#[test]
fn atomic_batches_apply_together() {
    let mut p = NodeParams::new();
    // fast_threshold 5 alone is invalid (min_fast_threshold 7 > 5)
    assert!(p
        .check("detector.fast_threshold", &ParameterValue::Integer(5))
        .is_err());
    p.check("detector.min_fast_threshold", &ParameterValue::Integer(3))
        .unwrap();
    p.check("detector.fast_threshold", &ParameterValue::Integer(5))
        .unwrap();
    p.set("detector.min_fast_threshold", &ParameterValue::Integer(3))
        .unwrap();
    p.set("detector.fast_threshold", &ParameterValue::Integer(5))
        .unwrap();
    assert_eq!(p.live.config.detector.fast_threshold, 5);
    assert_eq!(p.live.config.detector.min_fast_threshold, 3);
}

#[test]
fn cuda_device_is_a_read_only_start_up_setting() {
    let mut p = NodeParams::new();
    assert_eq!(p.settings.cuda_device, 0);
    p.apply_initial(&[("cuda.device".into(), ParameterValue::Integer(2))])
        .unwrap();
    assert_eq!(p.settings.cuda_device, 2);
    assert!(p
        .all()
        .contains(&("cuda.device".to_string(), ParameterValue::Integer(2))));
    // at run time: the same value is accepted, another one refused
    assert!(p.set("cuda.device", &ParameterValue::Integer(2)).is_ok());
    let e = p
        .set("cuda.device", &ParameterValue::Integer(1))
        .unwrap_err();
    assert!(e.contains("read-only"), "{e}");
    assert_eq!(p.settings.cuda_device, 2);
    // bad start-up values name the parameter
    for bad in [
        ParameterValue::Integer(-1),
        ParameterValue::String("1".into()),
    ] {
        let e = NodeParams::new()
            .apply_initial(&[("cuda.device".into(), bad)])
            .unwrap_err();
        assert!(e.contains("cuda.device"), "{e}");
    }
}

#[test]
fn the_start_up_bools_are_read_only() {
    /// What NodeSettings holds for a parameter.
    type Held = fn(&NodeParams) -> bool;
    // (name, default, what NodeSettings holds)
    let cases: [(&str, bool, Held); 2] = [
        ("keep_freed_memory", true, |p| p.settings.keep_freed_memory),
        ("foxglove_annotations", false, |p| {
            p.settings.foxglove_annotations
        }),
    ];
    for (name, default, get) in cases {
        let mut p = NodeParams::new();
        assert_eq!(get(&p), default, "{name}");
        p.apply_initial(&[(name.into(), ParameterValue::Bool(!default))])
            .unwrap();
        assert_eq!(get(&p), !default, "{name}");
        assert!(p
            .all()
            .contains(&(name.to_string(), ParameterValue::Bool(!default))));
        let e = p.set(name, &ParameterValue::Bool(default)).unwrap_err();
        assert!(e.contains("read-only"), "{e}");
        let e = NodeParams::new()
            .apply_initial(&[(name.into(), ParameterValue::Integer(1))])
            .unwrap_err();
        assert!(e.contains(name) && e.contains("a bool"), "{e}");
    }
}

#[test]
fn vins_mono_is_refused_a_stereo_pair_at_start_and_at_run_time() {
    let start = |format: &str, stereo: bool| {
        NodeParams::new().apply_initial(&[
            (
                "inputs".into(),
                ParameterValue::StringArray(vec!["left".into(), "right".into()]),
            ),
            (
                "feature_format".into(),
                ParameterValue::String(format.into()),
            ),
            ("track.enabled".into(), ParameterValue::Bool(true)),
            ("track.stereo".into(), ParameterValue::Bool(stereo)),
        ])
    };
    let e = start("vins_mono", true).unwrap_err();
    assert!(e.contains("vins_mono") && e.contains("track.stereo"), "{e}");
    assert!(start("vins_fusion", true).is_ok());
    assert!(start("vins_mono", false).is_ok());
    // At run time: switching the pair on is refused, nothing changes.
    let mut p = NodeParams::new();
    p.apply_initial(&[
        (
            "inputs".into(),
            ParameterValue::StringArray(vec!["left".into(), "right".into()]),
        ),
        (
            "feature_format".into(),
            ParameterValue::String("vins_mono".into()),
        ),
        ("track.enabled".into(), ParameterValue::Bool(true)),
        ("track.stereo".into(), ParameterValue::Bool(false)),
    ])
    .unwrap();
    let g = p.live.generation;
    let e = p
        .set("track.stereo", &ParameterValue::Bool(true))
        .unwrap_err();
    assert!(e.contains("vins_mono"), "{e}");
    assert!(p
        .check("track.stereo", &ParameterValue::Bool(true))
        .is_err());
    assert!(!p.live.config.track.stereo && p.live.generation == g);
}

#[test]
fn vins_config_sets_the_tracker_and_cameras_and_a_bad_one_does_not_stop_the_node() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/vins/seq_640x360_config.yaml"
    );
    let start = |extra: &[(&str, ParameterValue)]| {
        let mut p = NodeParams::new();
        let mut v = vec![(
            "vins_config".to_string(),
            ParameterValue::String(file.into()),
        )];
        v.extend(extra.iter().map(|(k, x)| (k.to_string(), x.clone())));
        p.apply_initial(&v).map(|_| p)
    };
    let p = start(&[]).unwrap();
    let v = p.vins.as_ref().expect("read");
    assert_eq!(v.cameras.len(), 1);
    let t = &p.live.config.track;
    assert!(t.enabled && t.max_features == v.max_cnt && t.min_distance == v.min_dist);
    assert!(p.vins_problem.is_none());
    assert!(p
        .all()
        .contains(&("vins_config".into(), ParameterValue::String(file.into()))));
    // The file wins over the parameters at start (a params file sets every key) ...
    let mut p = start(&[
        ("track.max_features", ParameterValue::Integer(77)),
        ("track.enabled", ParameterValue::Bool(false)),
    ])
    .unwrap();
    assert!(p.live.config.track.enabled && p.live.config.track.max_features == 150);
    // ... and a run-time change over the file.
    p.set("track.max_features", &ParameterValue::Integer(77))
        .unwrap();
    assert_eq!(p.live.config.track.max_features, 77);
    // A missing file: the node starts, the problem names the file, the tracker default.
    let mut p = NodeParams::new();
    p.apply_initial(&[(
        "vins_config".into(),
        ParameterValue::String("/nonexistent/vins.yaml".into()),
    )])
    .unwrap();
    assert!(p.vins.is_none());
    let e = p.vins_problem.as_deref().unwrap();
    assert!(e.contains("/nonexistent/vins.yaml"), "{e}");
    assert_eq!(p.live.config, Config::default());
    // Read-only at run time; a string.
    assert!(p
        .set("vins_config", &ParameterValue::String(file.into()))
        .unwrap_err()
        .contains("read-only"));
    let e = NodeParams::new()
        .apply_initial(&[("vins_config".into(), ParameterValue::Integer(1))])
        .unwrap_err();
    assert!(e.contains("vins_config"), "{e}");
}

#[test]
fn match_previous_is_a_live_bool() {
    let mut p = NodeParams::new();
    assert!(!p.live.match_previous);
    p.apply_initial(&[(MATCH_PREVIOUS.into(), ParameterValue::Bool(true))])
        .unwrap();
    assert!(p.live.match_previous);
    let g = p.live.generation;
    p.set(MATCH_PREVIOUS, &ParameterValue::Bool(false)).unwrap();
    assert!(!p.live.match_previous && p.live.generation == g + 1);
    assert!(!p.live.debug_image, "a different setting");
    let e = p
        .set(MATCH_PREVIOUS, &ParameterValue::Integer(1))
        .unwrap_err();
    assert!(e.contains("expected a bool"), "{e}");
    assert!(p
        .all()
        .contains(&(MATCH_PREVIOUS.to_string(), ParameterValue::Bool(false))));
}

#[test]
fn transports_and_diagnostics_rules_are_checked_at_start() {
    use crate::ros::compressed::Transport;
    let s = |v: ParameterValue| v;
    let mut p = NodeParams::new();
    p.apply_initial(&[
        (
            "inputs".into(),
            s(ParameterValue::StringArray(vec![
                "left".into(),
                "right".into(),
            ])),
        ),
        (
            "transport".into(),
            s(ParameterValue::StringArray(vec![
                "raw".into(),
                "compressed".into(),
            ])),
        ),
        (
            "diagnostics.expected_hz".into(),
            ParameterValue::Integer(20),
        ),
        ("diagnostics.timeout".into(), ParameterValue::Double(0.5)),
    ])
    .unwrap();
    let st = &p.settings;
    assert_eq!(
        (st.transport_of(0), st.transport_of(1)),
        (Transport::Raw, Transport::Compressed)
    );
    assert_eq!(st.diagnostics.expected_hz, 20.0);
    assert_eq!(st.diagnostics.timeout, 0.5);
    // One value is every input's.
    let mut one = NodeParams::new();
    one.apply_initial(&[(
        "transport".into(),
        ParameterValue::String("compressed".into()),
    )])
    .unwrap();
    assert_eq!(one.settings.transport_of(0), Transport::Compressed);
    for (name, value, says) in [
        (
            "transport",
            ParameterValue::String("theora".into()),
            "not raw or compressed",
        ),
        (
            "transport",
            ParameterValue::StringArray(vec!["raw".into(), "raw".into()]),
            "2 values for 1 input",
        ),
        (
            "diagnostics.hz_tolerance",
            ParameterValue::Double(1.5),
            "in [0, 1]",
        ),
        (
            "diagnostics.max_stamp_lag",
            ParameterValue::Double(-1.0),
            "not in",
        ),
        (
            "diagnostics.timeout",
            ParameterValue::Bool(true),
            "expected a double",
        ),
    ] {
        let e = NodeParams::new()
            .apply_initial(&[(name.into(), value)])
            .unwrap_err();
        assert!(e.contains(name) && e.contains(says), "{name}: {e}");
    }
    // Read-only at run time.
    assert!(p
        .set("diagnostics.expected_hz", &ParameterValue::Double(30.0))
        .unwrap_err()
        .contains("read-only"));
}
