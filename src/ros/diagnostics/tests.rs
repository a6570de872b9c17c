//! The /diagnostics status: its values and levels.

use super::*;

#[test]
fn a_gpu_failure_is_a_warning_in_diagnostics() {
    let mut s = Stats {
        count: Counts {
            processed: 10,
            ..Default::default()
        },
        backend: "cpu".into(),
        ..Default::default()
    };
    let ok = diagnostic_status("/gpu_features", "", &mut s, &DiagnosticsRules::default());
    assert_eq!(ok.level, 0);
    s.count.gpu_failures = 1;
    s.gpu_failure = "launching orb_describe: injected fault".into();
    let d = diagnostic_status(
        "/gpu_features",
        "left",
        &mut s,
        &DiagnosticsRules::default(),
    );
    assert_eq!(d.level, 1, "WARN");
    assert!(d.message.contains("CPU backend") && d.message.contains("injected"));
    assert!(d
        .values
        .iter()
        .any(|kv| kv.key == "gpu_failures" && kv.value == "1"));
    assert_eq!(d.name, "gpu_features: left");
}

#[test]
fn foxglove_annotations_without_their_type_is_a_warning() {
    let mut s = Stats {
        count: Counts {
            processed: 10,
            ..Default::default()
        },
        annotations: Some(Ok("keypoints/annotations".into())),
        ..Default::default()
    };
    let rules = DiagnosticsRules::default();
    let d = diagnostic_status("/gpu_features", "", &mut s, &rules);
    assert_eq!(d.level, 0);
    let value = |d: &DiagnosticStatus| {
        d.values
            .iter()
            .find(|kv| kv.key == "foxglove_annotations")
            .map(|kv| kv.value.clone())
    };
    assert_eq!(value(&d).as_deref(), Some("keypoints/annotations"));
    s.annotations = Some(Err("foxglove_annotations: no foxglove_msgs".into()));
    let d = diagnostic_status("/gpu_features", "", &mut s, &rules);
    assert_eq!((d.level, value(&d).as_deref()), (1, Some("unavailable")));
    assert!(d.message.contains("no foxglove_msgs"), "{}", d.message);
    s.annotations = None;
    let d = diagnostic_status("/gpu_features", "", &mut s, &rules);
    assert_eq!((d.level, value(&d)), (0, None));
}

#[test]
fn the_latency_parts_of_the_window_are_in_diagnostics() {
    let mut s = Stats {
        count: Counts {
            processed: 100,
            ..Default::default()
        },
        ..Default::default()
    };
    for i in 0..100 {
        s.window.parts_ms[1].push(0.2 + i as f64 * 0.001);
        s.window.parts_ms[0].push(0.03);
    }
    s.window.parts_ms[1].push(5.0);
    let d = diagnostic_status("/gpu_features", "", &mut s, &DiagnosticsRules::default());
    let get = |k: &str| {
        d.values
            .iter()
            .find(|kv| kv.key == k)
            .map(|kv| kv.value.clone())
            .unwrap_or_else(|| panic!("no {k}"))
    };
    assert_eq!(get("latency_parts_ms.handover_p50"), "0.030");
    assert_eq!(get("latency_parts_ms.pipeline_p50"), "0.250");
    assert_eq!(get("latency_parts_ms.pipeline_p99"), "0.299");
    assert_eq!(get("latency_parts_ms.rest_p50"), "NaN");
    // The window starts over.
    assert!(s.window.parts_ms.iter().all(|p| p.is_empty()));
}

/// A stats window of `frames` frames over the last second, the last one `ago` seconds ago.
fn second_of(frames: u64, ago: f64) -> Stats {
    let now = Instant::now();
    let back = |s: f64| now.checked_sub(Duration::from_secs_f64(s)).unwrap();
    let mut s = Stats {
        count: Counts {
            processed: 100,
            received: 100,
            ..Default::default()
        },
        started: Some(back(60.0)),
        last_frame: Some(back(ago)),
        ..Default::default()
    };
    s.window.start = Some(back(1.0));
    s.window.processed = frames;
    s.rate_marks.push_back((back(1.0), 100 - frames));
    s
}

fn level_of(s: &mut Stats, rules: &DiagnosticsRules) -> (u8, String) {
    let d = diagnostic_status("/gpu_features", "", s, rules);
    (d.level, d.message)
}

#[test]
fn a_camera_that_stops_is_an_error_until_frames_come_again() {
    let rules = DiagnosticsRules {
        timeout: 1.0,
        ..Default::default()
    };
    assert_eq!(level_of(&mut second_of(10, 0.05), &rules).0, OK);
    let (level, message) = level_of(&mut second_of(0, 1.5), &rules);
    assert_eq!(level, ERROR, "{message}");
    assert!(message.contains("no image for 1.5 s"), "{message}");
    // Frames again: OK at the next period.
    assert_eq!(level_of(&mut second_of(10, 0.05), &rules).0, OK);
    // Off: no error however long the silence.
    let off = DiagnosticsRules {
        timeout: 0.0,
        ..Default::default()
    };
    assert_eq!(level_of(&mut second_of(0, 100.0), &off).0, OK);
    // Never a frame: a warning once the timeout passed since start.
    let mut never = second_of(0, 0.0);
    never.last_frame = None;
    let (level, message) = level_of(&mut never, &rules);
    assert_eq!(level, WARN, "{message}");
    assert!(message.contains("no image received"), "{message}");
}

#[test]
fn a_rate_outside_the_expected_one_is_a_warning() {
    let rules = DiagnosticsRules {
        expected_hz: 20.0,
        hz_tolerance: 0.1,
        ..Default::default()
    };
    let (level, message) = level_of(&mut second_of(20, 0.01), &rules);
    assert_eq!(level, OK, "{message}");
    // 17 fps is below 18 = 20 * (1 - 0.1); 23 above 22.
    for frames in [17, 23] {
        let (level, message) = level_of(&mut second_of(frames, 0.01), &rules);
        assert_eq!(level, WARN, "{frames}: {message}");
        assert!(message.contains("expected 20.0"), "{message}");
    }
    // Not checked without an expected rate.
    assert_eq!(
        level_of(&mut second_of(3, 0.01), &DiagnosticsRules::default()).0,
        OK
    );
}

#[test]
fn stamps_far_from_the_clock_are_a_warning_with_every_other_problem() {
    let rules = DiagnosticsRules::default();
    let mut s = second_of(10, 0.01);
    s.window.stamp_lag(0.2);
    s.window.stamp_lag(-7.5);
    s.window.stamp_lag(3.0);
    let d = diagnostic_status("/gpu_features", "", &mut s, &rules);
    assert_eq!(d.level, WARN, "{}", d.message);
    assert!(d.message.contains("7.500 s ahead of"), "{}", d.message);
    assert!(d
        .values
        .iter()
        .any(|kv| kv.key == "stamp_lag_s" && kv.value == "-7.500"));
    // The next window starts without it.
    assert_eq!(level_of(&mut s, &rules).0, OK);
    // With a dead camera too: the error first, the warning after it.
    let mut s = second_of(0, 10.0);
    s.window.stamp_lag(100.0);
    let (level, message) = level_of(&mut s, &rules);
    assert_eq!(level, ERROR);
    assert!(
        message.starts_with("no image for") && message.contains("behind"),
        "{message}"
    );
}
