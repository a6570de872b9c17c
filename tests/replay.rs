//! `gpu_features replay` end to end: bags built at test time from real frames (a camera pan
//! over tests/data/graf1.png, and with the `rosbags` PyPI package when available), in both
//! storage formats, replayed; the output bag must carry the input's frames and timestamps and
//! exactly the library's keypoints and edges for the same image data.

mod bag_common;

use std::path::Path;
use std::process::Command;

use bag_common::*;
use gpu_features::bag::{self, Bag};
use gpu_features::eval::HomographyPair;
use gpu_features::output::pointcloud;
use gpu_features::replay;
use gpu_features::report::plot;
use gpu_features::Config;

fn stamps(n: usize) -> (Vec<u64>, Vec<u64>) {
    (
        (0..n).map(|i| T0 + i as u64 * PERIOD).collect(),
        (0..n).map(log_time).collect(),
    )
}

#[test]
fn mcap_file_every_image_topic() {
    let dir = scratch("replay_mcap");
    let frames = pan("graf1.png", 5, 256, 192);
    let bag_path = dir.join("in.mcap");
    write_mcap(&bag_path, &frames, true);
    let out = dir.join("out");
    let s = replay::run(&options(&bag_path, &out)).unwrap();
    assert_eq!(s.frames, 10);
    assert_eq!(s.per_topic[RAW], 5);
    assert_eq!(s.per_topic[COMPRESSED], 5);
    assert_eq!(s.skipped, 0);
    assert_eq!(s.out_bag, out.join("out.mcap"));
    let msgs = read_out(&s.out_bag);
    assert!(
        !msgs.contains_key(CHATTER),
        "non-image topics are not copied"
    );
    let (st, lt) = stamps(5);
    let a = check_topic(&msgs, RAW, 5, &st, &lt, &Config::default());
    let b = check_topic(&msgs, COMPRESSED, 5, &st, &lt, &Config::default());
    // Same pixels (png is lossless, bgr8 vs rgb8 gray conversion is the same).
    assert_eq!(a, b);
    assert!(a.iter().all(|&n| n > 20), "a real photo has corners: {a:?}");
    // The input images are copied byte for byte.
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(msgs[RAW][i].data, image_msg(i, f));
    }
    // MCAP profile and summary, as ROS tools expect.
    let buf = std::fs::read(&s.out_bag).unwrap();
    let summary = mcap::Summary::read(&buf).unwrap().unwrap();
    assert_eq!(summary.stats.unwrap().message_count, 40);
    assert!(buf.windows(4).any(|w| w == b"ros2"), "ros2 profile");
    // No temporary file left behind.
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("partial")), "{names:?}");
    for f in ["report.md", "report.json", "latency.png", "keypoints.png"] {
        assert!(names.contains(&f.to_string()), "{f} missing: {names:?}");
    }
}

#[test]
fn db3_bag_directory_one_topic_with_config() {
    let dir = scratch("replay_db3");
    let frames = pan("graf1.png", 4, 224, 160);
    let bag_dir = dir.join("bag");
    write_db3_dir(&bag_dir, &frames, true);
    let b = Bag::open(&bag_dir).unwrap();
    assert_eq!(b.storage(), bag::StorageKind::Sqlite3);
    let topics = b.topics().unwrap();
    assert_eq!(topics.len(), 3);
    assert!(topics.iter().all(|t| t.count == Some(4)));

    let out = dir.join("out");
    let mut o = options(&bag_dir, &out);
    o.topics = vec![RAW.to_string()];
    o.config = Config::default()
        .with_value("select.max_keypoints", "150")
        .unwrap()
        .with_value("canny.low_threshold", "30")
        .unwrap();
    let s = replay::run(&o).unwrap();
    assert_eq!(s.frames, 4);
    assert_eq!(s.per_topic.len(), 1);
    let msgs = read_out(&s.out_bag);
    assert!(!msgs.contains_key(COMPRESSED));
    let (st, lt) = stamps(4);
    let counts = check_topic(&msgs, RAW, 4, &st, &lt, &o.config);
    assert!(counts.iter().all(|&n| n <= 150 && n > 0), "{counts:?}");

    // The .db3 file alone (no metadata) reads the same.
    let out2 = dir.join("out2");
    let mut o2 = o.clone();
    o2.bag = bag_dir.join("bag_0.db3");
    o2.out_dir = out2.clone();
    replay::run(&o2).unwrap();
    let again = read_out(&out2.join("out.mcap"));
    assert_eq!(again[RAW].len(), 4);
    for (a, b) in again[&replay::keypoints_topic(RAW)]
        .iter()
        .zip(&msgs[&replay::keypoints_topic(RAW)])
    {
        assert_eq!(a.data, b.data);
    }
}

#[test]
fn report_contents_and_max_frames() {
    let dir = scratch("replay_report");
    let frames = pan("graf1.png", 6, 256, 192);
    let bag_path = dir.join("in.mcap");
    write_mcap(&bag_path, &frames, false);
    let out = dir.join("out");
    let mut o = options(&bag_path, &out);
    o.max_frames = Some(4);
    let s = replay::run(&o).unwrap();
    assert_eq!(s.frames, 4);
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&s.report_json).unwrap()).unwrap();
    assert_eq!(j["frames"], 4);
    assert_eq!(j["per_frame"].as_array().unwrap().len(), 4);
    let lat = &j["latency_ms"]["frame"];
    assert_eq!(lat["n"], 4);
    assert!(lat["p50"].as_f64().unwrap() > 0.0);
    assert!(lat["p99"].as_f64().unwrap() >= lat["p50"].as_f64().unwrap());
    let cov = j["coverage"]["mean"].as_f64().unwrap();
    assert!(cov > 0.05 && cov <= 1.0, "{cov}");
    let ed = j["edge_density"]["mean"].as_f64().unwrap();
    assert!(ed > 0.0 && ed < 0.5, "{ed}");
    // A slow pan over a still photo: most keypoints are found again in the next frame.
    let tr = &j["tracking"];
    assert_eq!(tr["frame_pairs"], 3);
    let ratio = tr["ratio"].as_f64().unwrap();
    assert!(
        ratio > 0.3 && ratio <= tr["ratio_position"].as_f64().unwrap(),
        "{tr}"
    );
    check_descriptor_tracking(&j);
    let pf = j["per_frame"].as_array().unwrap();
    let levels = j["keypoints_per_level_mean"].as_array().unwrap();
    assert_eq!(levels.len(), 8);
    let md = std::fs::read_to_string(&s.report_md).unwrap();
    for h in [
        "## Latency per stage",
        "## Keypoints",
        "## Frame-to-frame tracking",
        "Descriptor matching over 3 consecutive frame pairs (cpu matcher)",
        "| inlier share |",
        "p99",
    ] {
        assert!(md.contains(h), "{h} missing in report.md");
    }
    check_plots(&s, &md);
    // The heat map's grid covers the 256x192 frames in 32 px cells and counts every keypoint.
    let h = &j["keypoint_heatmap"];
    assert_eq!(
        (h["cols"].as_u64(), h["rows"].as_u64()),
        (Some(8), Some(6)),
        "{h}"
    );
    assert_eq!(h["frames"], 4);
    let total: u64 = h["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    let kp: u64 = pf.iter().map(|f| f["keypoints"].as_u64().unwrap()).sum();
    assert_eq!(total, kp);
    // report.html: the same report in one file, every plot embedded, nothing external.
    let html = std::fs::read_to_string(&s.report_html).unwrap();
    assert_eq!(s.report_html, out.join("report.html"));
    assert_eq!(
        html.matches("src=\"data:image/png;base64,").count(),
        s.plots.len()
    );
    assert!(
        html.contains("<h2>Latency per stage (ms)</h2>"),
        "{html:.2000}"
    );
    assert!(html.contains("<table>") && html.contains("<td>frame</td>"));
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("<script"));
}

/// `report_contents_and_max_frames`'s descriptor tracking: the library matcher on consecutive
/// frames, almost every match where the pan puts it, and the per-frame series summing up.
fn check_descriptor_tracking(j: &serde_json::Value) {
    // The default config computes descriptors; the pan is 5 px / 3 px a frame.
    let dt = &j["descriptor_tracking"];
    assert_eq!(dt["frame_pairs"], 3, "{dt}");
    assert_eq!(dt["matcher"], "cpu");
    assert_eq!(dt["cross_check"], true);
    let share = dt["inlier_share"].as_f64().unwrap();
    assert!(share > 0.9, "{dt}");
    assert!(
        dt["inlier_share_per_pair"]["min"].as_f64().unwrap() > 0.85,
        "{dt}"
    );
    // At least a third of the keypoints find a match that passes ratio test + cross-check.
    let q = dt["query_keypoints"].as_f64().unwrap();
    assert!(dt["matches"].as_f64().unwrap() > q / 3.0, "{dt}");
    let mean = dt["matches_per_pair"]["mean"].as_f64().unwrap();
    assert!(
        (mean - dt["matches"].as_f64().unwrap() / 3.0).abs() < 1e-9,
        "{dt}"
    );
    // The per-frame series: none for the first frame, then one per pair, summing up.
    let pf = j["per_frame"].as_array().unwrap();
    assert!(pf[0]["match_track"].is_null());
    let inl: u64 = pf[1..]
        .iter()
        .map(|f| f["match_track"]["inliers"].as_u64().unwrap())
        .sum();
    assert_eq!(inl, dt["inliers"].as_u64().unwrap());
}

/// `report_contents_and_max_frames`'s plots: every one there, the size of a plot, not blank,
/// linked from report.md; no homography plot without homography pairs.
fn check_plots(s: &replay::ReplaySummary, md: &str) {
    let names: Vec<&str> = s
        .plots
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap())
        .collect();
    for want in [
        "latency.png",
        "frame_latency.png",
        "keypoints.png",
        "levels.png",
        "heatmap.png",
        "coverage.png",
        "tracking.png",
    ] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    // No homography pairs: no score plot.
    assert!(!names.contains(&"homography.png"), "{names:?}");
    for p in &s.plots {
        let img = ::image::open(p).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (plot::W, plot::H));
        assert!(
            plot::ink_pixels(&img, 0..plot::W, 0..plot::H) > 5_000,
            "{p:?} is blank"
        );
        assert!(md.contains(&format!("]({})", p.file_name().unwrap().to_str().unwrap())));
    }
}

/// The chromium binary: $CHROMIUM, else the first of the usual names on PATH.
fn chromium() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
    .find(|p| p.is_file())
}

/// report.html opened by headless Chromium: the screenshot shows text and the embedded
/// plots (their colours), i.e. the page renders with no network and no other file.
#[test]
fn report_html_renders_in_chromium() {
    let Some(browser) = chromium() else {
        // CI installs it (scripts/setup-chromium.sh): missing there is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "no chromium in CI: scripts/setup-chromium.sh should have installed it"
        );
        println!("SKIPPED: no chromium");
        return;
    };
    let dir = scratch("replay_html");
    let frames = pan("graf1.png", 3, 256, 192);
    let bag_path = dir.join("in.mcap");
    write_mcap(&bag_path, &frames, false);
    let out = dir.join("out");
    let s = replay::run(&options(&bag_path, &out)).unwrap();
    // Only the report page travels: the plots must come from inside it.
    let alone = dir.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    let page = alone.join("report.html");
    std::fs::copy(&s.report_html, &page).unwrap();
    let shot = dir.join("shot.png");
    let _ = std::fs::remove_file(&shot);
    let (w, h) = (1280u32, 6000u32);
    let o = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-extensions",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("--window-size={w},{h}"))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        shot.exists(),
        "{} wrote no screenshot: {}\n{}",
        browser.display(),
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let img = ::image::open(&shot).unwrap().to_rgb8();
    assert_eq!(img.dimensions(), (w, h));
    let ink = plot::ink_pixels(&img, 0..w, 0..h);
    // Text alone (the header and the first tables) is tens of thousands of pixels.
    assert!(ink > 50_000, "screenshot nearly blank: {ink} pixels");
    // The embedded plots are drawn: the series colour and the heat map's colours appear.
    let near = |c: [u8; 3]| {
        img.pixels()
            .filter(|p| p.0.iter().zip(c).all(|(a, b)| a.abs_diff(b) <= 3))
            .count()
    };
    let blue = plot::PALETTE[0];
    assert!(
        near([blue.0, blue.1, blue.2]) > 2_000,
        "no plot lines in the screenshot"
    );
    // The heat map's colour bar: 64 bands from heat_color(1/128) to heat_color(127/128).
    let bar: usize = (0..64)
        .map(|i| plot::heat_color((2 * i + 1) as f64 / 128.0))
        .map(|c| near([c.0, c.1, c.2]))
        .sum();
    assert!(
        bar > 5_000,
        "no heat map colour bar in the screenshot: {bar}"
    );
}

/// Consecutive frames from two unrelated photos: descriptor matches between them are few
/// and land in the tracking window only by chance. Without descriptors (describe off) the
/// descriptor measure is absent and the rest of the report unchanged.
#[test]
fn descriptor_tracking_on_unrelated_frames() {
    let dir = scratch("replay_unrelated");
    let a = pan("graf1.png", 3, 256, 192);
    let b = pan("building.png", 3, 256, 192);
    let frames: Vec<Frame> = a.into_iter().zip(b).flat_map(|(x, y)| [x, y]).collect();
    let bag_path = dir.join("in.mcap");
    write_mcap(&bag_path, &frames, false);
    let report = |o: &replay::ReplayOptions| -> serde_json::Value {
        let s = replay::run(o).unwrap();
        assert_eq!(s.frames, 6);
        serde_json::from_str(&std::fs::read_to_string(&s.report_json).unwrap()).unwrap()
    };
    let j = report(&options(&bag_path, &dir.join("out")));
    let dt = &j["descriptor_tracking"];
    assert_eq!(dt["frame_pairs"], 5, "{dt}");
    let q = dt["query_keypoints"].as_f64().unwrap();
    let matches = dt["matches"].as_f64().unwrap();
    assert!(matches < q / 10.0, "{dt}");
    assert!(dt["inlier_share"].as_f64().unwrap() < 0.1, "{dt}");
    // The patch measure agrees: hardly anything is re-found.
    assert!(
        j["tracking"]["ratio"].as_f64().unwrap() < 0.1,
        "{}",
        j["tracking"]
    );

    let mut o = options(&bag_path, &dir.join("out_nodesc"));
    o.config = Config::default()
        .with_value("describe.enabled", "false")
        .unwrap();
    let j2 = report(&o);
    assert!(
        j2["descriptor_tracking"].is_null(),
        "{}",
        j2["descriptor_tracking"]
    );
    assert!(j2["per_frame"][1]["match_track"].is_null());
    assert_eq!(j2["tracking"], j["tracking"]);
}

#[test]
fn homography_protocol_on_graf_pair() {
    let dir = scratch("replay_homography");
    let frames = pan("graf1.png", 2, 200, 160);
    let bag_path = dir.join("in.mcap");
    write_mcap(&bag_path, &frames, false);
    let ident = dir.join("identity.txt");
    std::fs::write(&ident, "1 0 0\n0 1 0\n0 0 1\n").unwrap();
    let mut o = options(&bag_path, &dir.join("out"));
    let g1 = data("graf1.png");
    o.homography = vec![
        format!(
            "{},{},{}",
            g1.display(),
            data("graf3.png").display(),
            data("H1to3p.xml").display()
        )
        .parse()
        .unwrap(),
        HomographyPair {
            name: "graf1-self".into(),
            img1: g1.clone(),
            img2: g1,
            homography: ident,
        },
    ];
    let s = replay::run(&o).unwrap();
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&s.report_json).unwrap()).unwrap();
    let h = j["homography"].as_array().unwrap();
    let graf = &h[0];
    assert_eq!(graf["name"], "graf1-graf3");
    let rep = graf["repeatability"].as_f64().unwrap();
    let ms = graf["matching_score"].as_f64().unwrap();
    // graf1 -> graf3 is a strong viewpoint change: some, far from all, keypoints repeat.
    assert!(rep > 0.1 && rep < 0.9, "{graf}");
    assert!(ms < rep, "{graf}");
    // An image against itself: every keypoint corresponds and matches.
    let me = &h[1];
    assert_eq!(me["repeatability"], 1.0, "{me}");
    assert!(me["matching_score"].as_f64().unwrap() > 0.97, "{me}");
    let md = std::fs::read_to_string(&s.report_md).unwrap();
    assert!(md.contains("graf1-graf3"));
    assert!(
        md.contains("gpu_features + our ORB descriptor (ours)"),
        "{md}"
    );

    // With the script's JSON, OpenCV's numbers sit beside ours on the pair's row.
    let cv = dir.join("opencv_eval.json");
    let cv_row = serde_json::json!({
        "name": "graf1-graf3", "n1": 2000, "n2": 2000, "n1_common": 1900, "n2_common": 1600,
        "correspondences": 1000, "repeatability": 0.625, "correct_matches": 700,
        "matching_score": 0.4375
    });
    let eval_json = serde_json::json!({
        "opencv_version": "5.0.0", "pairs": [cv_row], "ours_with_orb_descriptor": [],
        "ours_with_our_descriptor": [graf]
    });
    std::fs::write(&cv, eval_json.to_string()).unwrap();
    o.opencv_eval = Some(cv);
    o.homography.truncate(1);
    let s = replay::run(&o).unwrap();
    let md = std::fs::read_to_string(&s.report_md).unwrap();
    let row = format!("| graf1-graf3 | {rep:.3} | 0.625 | {ms:.3} | 0.438 | - |");
    assert!(md.contains(&row), "{row} not in\n{md}");
    assert!(
        md.contains("our ORB descriptor, scored by the script"),
        "{md}"
    );
}

/// Prints `topic index width points first_descriptor_hex` for every keypoints message, read
/// with rosbags and decoded by the documented reader (scripts/read_keypoints.py).
const ROSBAGS_READ: &str = r#"
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from read_keypoints import cloud_to_arrays
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore
store = getattr(Stores, "ROS2_JAZZY", None) or Stores.ROS2_HUMBLE
with AnyReader([Path(sys.argv[1])], default_typestore=get_typestore(store)) as r:
    seen = {}
    ann = {}
    for c, t, raw in r.messages():
        m = r.deserialize(raw, c.msgtype)
        if c.topic.endswith("/keypoints/annotations"):
            ann[(c.topic[: -len("/annotations")], t)] = len(m.points[0].points)
    for c, t, raw in r.messages():
        if c.msgtype == "sensor_msgs/msg/PointCloud2":
            m = r.deserialize(raw, c.msgtype)
            i = seen.get(c.topic, 0)
            seen[c.topic] = i + 1
            points, desc = cloud_to_arrays(m)
            assert len(points) == m.width and m.fields[5].name == "octave"
            assert desc is not None and desc.shape == (m.width, 32) and desc.dtype.name == "uint8"
            first = desc[0].tobytes().hex() if m.width else "-"
            print(c.topic, i, m.width, ann[(c.topic, t)], first)
"#;

fn bags_python() -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cands: Vec<String> = std::env::var("GPU_FEATURES_BAGS_PYTHON")
        .into_iter()
        .collect();
    cands.push(root.join("target/py-bags/bin/python").display().to_string());
    cands.push(root.join(".venv-py/bin/python").display().to_string());
    cands.push("python3".into());
    let ok = |p: &str| {
        Command::new(p)
            .args(["-c", "import rosbags, numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Some(p) = cands.iter().find(|p| ok(p)) {
        return Some(p.clone());
    }
    if std::env::var_os("CI").is_some() {
        // CI runs on a clean machine: install the (small, pure-Python) package set.
        let o = Command::new("bash")
            .arg(root.join("scripts/setup-bags-python.sh"))
            .output()
            .ok()?;
        let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if o.status.success() && ok(&p) {
            return Some(p);
        }
        eprintln!(
            "setup-bags-python.sh failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    None
}

/// The photo at `src` written to `dst` as a binary PPM (RGB).
fn write_ppm(src: &Path, dst: &Path) {
    use ::image::codecs::pnm::{PnmEncoder, PnmSubtype, SampleEncoding};
    use ::image::ImageEncoder;
    let rgb = ::image::open(src).unwrap().to_rgb8();
    let f = std::fs::File::create(dst).unwrap();
    PnmEncoder::new(f)
        .with_subtype(PnmSubtype::Pixmap(SampleEncoding::Binary))
        .write_image(
            rgb.as_raw(),
            rgb.width(),
            rgb.height(),
            ::image::ExtendedColorType::Rgb8,
        )
        .unwrap();
}

/// make_bags.py's manifest: the frames' header stamps and log times, ns.
fn manifest_times(path: &Path) -> (Vec<u64>, Vec<u64>) {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let times = |key: &str| -> Vec<u64> {
        manifest[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    (times("stamps"), times("log_times"))
}

#[test]
fn rosbags_written_bags_both_formats() {
    let Some(py) = bags_python() else {
        eprintln!(
            "SKIPPED rosbags_written_bags_both_formats: no Python with `rosbags` \
             (run scripts/setup-bags-python.sh)"
        );
        return;
    };
    let dir = scratch("replay_rosbags");
    // A real photo as binary PPM (make_bags.py reads it without OpenCV).
    let ppm = dir.join("astronaut.ppm");
    write_ppm(&data("astronaut.png"), &ppm);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make_bags.py");
    let bags = dir.join("bags");
    let o = Command::new(&py)
        .arg(&script)
        .args([
            "--out",
            bags.to_str().unwrap(),
            "--image",
            ppm.to_str().unwrap(),
        ])
        .args(["--frames", "4", "--size", "240x180", "--compressed"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (st, lt) = manifest_times(&bags.join("manifest.json"));
    let mut per_format = Vec::new();
    for fmt in ["mcap", "sqlite3"] {
        let out = dir.join(format!("out_{fmt}"));
        let s = replay::run(&options(&bags.join(fmt), &out)).unwrap();
        assert_eq!(s.frames, 8, "{fmt}");
        let msgs = read_out(&s.out_bag);
        let raw = check_topic(&msgs, "/camera/image_raw", 4, &st, &lt, &Config::default());
        let comp = check_topic(
            &msgs,
            "/camera/image_raw/compressed",
            4,
            &st,
            &lt,
            &Config::default(),
        );
        assert_eq!(raw, comp);
        // rosbags (independent CDR + ros2msg implementation) reads the output bag, the
        // foxglove annotations included (from the schema text the bag carries).
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
        let check = Command::new(&py)
            .args(["-c", ROSBAGS_READ, s.out_bag.to_str().unwrap()])
            .arg(&scripts)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
        let text = String::from_utf8_lossy(&check.stdout);
        // Our own decoding of the same clouds (check_topic proved them equal to the
        // pipeline's output): the Python reader must see the same first descriptor.
        let first_descriptors: Vec<String> = msgs["/camera/image_raw/keypoints"]
            .iter()
            .map(|m| {
                let pc = gpu_features::cdr::PointCloud2::decode(&m.data).unwrap();
                let (_, d) = pointcloud::decode(&pc.data, pc.point_step as usize).unwrap();
                d.first().map_or("-".into(), |d| {
                    d.iter().map(|b| format!("{b:02x}")).collect::<String>()
                })
            })
            .collect();
        for (i, (n, first)) in raw.iter().zip(&first_descriptors).enumerate() {
            let line = format!("/camera/image_raw/keypoints {i} {n} {n} {first}");
            assert!(text.contains(&line), "{line} not in\n{text}");
        }
        per_format.push(raw);
    }
    assert_eq!(
        per_format[0], per_format[1],
        "mcap and sqlite3 give the same"
    );
}

#[test]
fn jpeg_compressed_images_decode() {
    let f = &pan("graf1.png", 1, 320, 240)[0];
    let mut jpg = std::io::Cursor::new(Vec::new());
    ::image::write_buffer_with_format(
        &mut jpg,
        &f.rgb,
        f.width as u32,
        f.height as u32,
        ::image::ExtendedColorType::Rgb8,
        ::image::ImageFormat::Jpeg,
    )
    .unwrap();
    let msg = gpu_features::cdr::CompressedImage {
        header: header(0),
        format: "jpeg".into(),
        data: std::borrow::Cow::Owned(jpg.into_inner()),
    }
    .encode();
    let frame = replay::decode_frame("sensor_msgs/msg/CompressedImage", &msg)
        .unwrap()
        .ok()
        .unwrap();
    let v = frame.view().unwrap();
    assert_eq!((v.width(), v.height()), (320, 240));
    assert_eq!(v.encoding(), gpu_features::Encoding::Rgb8);
    // JPEG is lossy, but close to the original.
    let diff: u64 = v
        .data()
        .iter()
        .zip(&f.rgb)
        .map(|(a, b)| (*a as i64 - *b as i64).unsigned_abs())
        .sum();
    assert!((diff as f64 / f.rgb.len() as f64) < 12.0, "{diff}");
    // Not an image at all: skipped with a reason, not a crash.
    let bad = gpu_features::cdr::CompressedImage {
        header: header(0),
        format: "jpeg".into(),
        data: std::borrow::Cow::Owned(vec![1, 2, 3]),
    }
    .encode();
    match replay::decode_frame("sensor_msgs/msg/CompressedImage", &bad).unwrap() {
        Err(replay::FrameSkip(why)) => assert!(why.contains("jpeg"), "{why}"),
        Ok(_) => panic!("garbage decoded"),
    }
}

/// `replay` with `track.enabled`: a `T/tracks` PointCloud2 per frame in out.mcap, in the
/// `output::tracks` layout, whose IDs persist across the pan and equal the library's
/// tracker run on the same frames.
#[test]
fn replay_writes_the_tracks_topic() {
    use gpu_features::output::tracks;
    use gpu_features::track::{TrackParams, Tracker};
    let dir = scratch("replay_tracks");
    let frames = pan("graf1.png", 6, 320, 240);
    let bag_path = dir.join("in.mcap");
    write_mcap(&bag_path, &frames, false);
    let out = dir.join("out");
    let mut o = options(&bag_path, &out);
    o.config = Config::default().with_set("track.enabled=true").unwrap();
    let s = replay::run(&o).unwrap();
    let msgs = read_out(&s.out_bag);
    let topic = replay::tracks_topic(RAW);
    let got = &msgs[&topic];
    assert_eq!(got.len(), 6);
    let mut lib = Tracker::new(TrackParams::from_config(&o.config.track));
    let mut prev_ids: Vec<u64> = Vec::new();
    for (i, (m, f)) in got.iter().zip(&frames).enumerate() {
        assert_eq!(m.schema, "sensor_msgs/msg/PointCloud2");
        let pc = gpu_features::cdr::PointCloud2::decode(&m.data).unwrap();
        let pts = tracks::decode(&pc.data).unwrap();
        assert_eq!(pc.header.stamp.as_nanos(), T0 + i as u64 * PERIOD);
        let stamp = (T0 + i as u64 * PERIOD) as f64 * 1e-9;
        let gray = f.gray();
        let want = lib.track(&gray, stamp, None).to_vec();
        assert_eq!(pts.len(), want.len(), "frame {i}");
        for (p, w) in pts.iter().zip(&want) {
            assert_eq!((p.0, p.1, p.2, p.7), (w.id, w.x, w.y, w.age));
        }
        if i > 0 {
            let kept = pts.iter().filter(|p| prev_ids.contains(&p.0)).count();
            assert!(
                kept * 2 > prev_ids.len(),
                "frame {i}: {kept} of {} tracks kept",
                prev_ids.len()
            );
        }
        prev_ids = pts.iter().map(|p| p.0).collect();
    }
    // The report's tracks section: report.json, report.md and the two plots.
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let ft = &rep["feature_tracks"];
    assert_eq!(ft["frames"], 6, "{ft}");
    assert!(
        ft["alive_per_frame"]["mean"].as_f64().unwrap() > 20.0,
        "{ft}"
    );
    assert!(ft["flow_kept_share"].as_f64().unwrap() > 0.5, "{ft}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Feature tracks"), "{md}");
    for f in ["tracks_alive.png", "track_lengths.png"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
}

/// With `camera_info` beside the image topic (from its second frame on), the replay writes
/// `T/feature` (VINS-Fusion's layout, the node's bytes) for every frame with a camera and
/// none before it, each point lifted through that camera as the tracker does (camodocal's
/// lifting by default), and `T/restart` when the tracker starts over (the camera appearing,
/// then the time going back).
#[test]
fn replay_writes_vins_feature_and_restart() {
    use gpu_features::camera::CameraModel;
    use gpu_features::cdr;
    use gpu_features::output::tracks::{FeatureCdr, VinsFormat};
    use gpu_features::track::{TrackParams, Tracker};
    let dir = scratch("replay_feature");
    let frames = pan("graf1.png", 6, 320, 240);
    let bag_path = dir.join("in.mcap");
    let k = [300.0, 0.0, 160.0, 0.0, 300.0, 120.0, 0.0, 0.0, 1.0];
    let d = [-0.2, 0.05, 0.001, -0.0005, 0.0];
    let info = |i: usize| {
        cdr::encode(&cdr::CameraInfo {
            header: header(i),
            height: 240,
            width: 320,
            distortion_model: "plumb_bob".into(),
            d: d.to_vec(),
            k,
            ..Default::default()
        })
    };
    // Frames 0..4 in order, then frame 5 stamped before frame 4 (time going back).
    let order = [0usize, 1, 2, 3, 4, 2];
    {
        let mut w = bag::writer::McapBagWriter::create(&bag_path).unwrap();
        let raw = w.channel(RAW, cdr::IMAGE).unwrap();
        let ci = w.channel("/cam/camera_info", cdr::CAMERA_INFO).unwrap();
        for (n, &i) in order.iter().enumerate() {
            let t = log_time(n);
            if n >= 1 {
                w.write(ci, t, t, &info(i)).unwrap();
            }
            w.write(raw, t, t, &image_msg(i, &frames[n])).unwrap();
        }
        w.finish().unwrap();
    }
    let out = dir.join("out");
    let mut o = options(&bag_path, &out);
    o.config = Config::default().with_set("track.enabled=true").unwrap();
    let s = replay::run(&o).unwrap();
    let msgs = read_out(&s.out_bag);
    let feats = &msgs[&replay::feature_topic(RAW)];
    assert_eq!(feats.len(), 5, "no feature before the camera is known");
    assert_eq!(feats[0].schema, "sensor_msgs/msg/PointCloud");
    let restarts = &msgs[&replay::restart_topic(RAW)];
    assert_eq!(
        restarts.len(),
        2,
        "the camera appearing, the time going back"
    );
    assert_eq!(restarts[0].data, cdr::encode(&cdr::Bool { data: true }));

    // The library's tracker with the same camera gives the same bytes.
    let cam = CameraModel::from_camera_info(320, 240, "plumb_bob", &k, &d).unwrap();
    let mut lib = Tracker::new(TrackParams::from_config(&o.config.track));
    let mut enc = FeatureCdr::default();
    let mut got = feats.iter();
    for (n, &i) in order.iter().enumerate() {
        let f = &frames[n];
        let gray = f.gray();
        let h = header(i);
        let stamp = h.stamp.sec as f64 + h.stamp.nanosec as f64 * 1e-9;
        let camera = (n >= 1).then_some(&cam);
        let tracks = lib.track(&gray, stamp, camera).to_vec();
        if n == 0 {
            continue;
        }
        *enc.header_mut() = h;
        let want = enc.encode(&[&tracks], VinsFormat::Fusion, 1).to_vec();
        assert_eq!(got.next().unwrap().data, want, "frame {n}");
        let pc: cdr::PointCloud = cdr::decode(&want, cdr::POINT_CLOUD).unwrap();
        assert_eq!(pc.points.len(), tracks.len());
        assert!(tracks.len() > 20);
        // camodocal's lifting, kept as f32 (VINS's Point2f): reprojects near the pixel.
        for (p, t) in pc.points.iter().zip(&tracks) {
            assert_eq!(p.x as f64, t.x_n);
            let (x, y) = (p.x as f64, p.y as f64);
            let r2 = x * x + y * y;
            let rad = 1.0 + d[0] * r2 + d[1] * r2 * r2;
            let u = 300.0 * (x * rad + 2.0 * d[2] * x * y + d[3] * (r2 + 2.0 * x * x)) + 160.0;
            assert!((u - t.x as f64).abs() < 0.5, "{u} vs {}", t.x);
        }
    }
}
