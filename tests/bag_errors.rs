//! Bad bags give a clear error, and a failed replay leaves no output that looks finished.

mod bag_common;

use std::path::{Path, PathBuf};

use bag_common::*;
use gpu_features::replay;
use gpu_features::{bag, cdr};

fn frames() -> Vec<Frame> {
    pan("graf1.png", 3, 160, 128)
}

/// Replays `input` into a fresh directory that holds a stale out.mcap from an earlier run;
/// returns the error text after checking nothing finished-looking is left.
fn fail(name: &str, input: &Path, topics: &[&str]) -> String {
    let out = scratch(&format!("bad_out_{name}"));
    std::fs::write(out.join("out.mcap"), b"stale result of an earlier run").unwrap();
    let mut o = options(input, &out);
    o.topics = topics.iter().map(|s| s.to_string()).collect();
    let e = replay::run(&o).expect_err("bad bag must fail").to_string();
    assert_no_output(&out);
    e
}

fn good_mcap(dir: &Path) -> PathBuf {
    let p = dir.join("good.mcap");
    write_mcap(&p, &frames(), false);
    p
}

#[test]
fn truncated_mcap() {
    let dir = scratch("bad_truncated");
    let good = std::fs::read(good_mcap(&dir)).unwrap();
    for cut in [good.len() / 2, good.len() - 10, 12] {
        let p = dir.join(format!("cut{cut}.mcap"));
        std::fs::write(&p, &good[..cut]).unwrap();
        let e = fail("truncated", &p, &[]);
        assert!(e.contains(p.to_str().unwrap()), "{e}");
        assert!(e.contains("MCAP"), "{e}");
    }
}

#[test]
fn corrupt_chunk() {
    let dir = scratch("bad_chunk");
    let mut b = std::fs::read(good_mcap(&dir)).unwrap();
    let mid = b.len() / 2;
    for v in &mut b[mid..mid + 64] {
        *v ^= 0x5a;
    }
    let p = dir.join("corrupt.mcap");
    std::fs::write(&p, &b).unwrap();
    let e = fail("chunk", &p, &[]);
    assert!(e.contains("MCAP"), "{e}");
}

#[test]
fn truncated_and_corrupt_db3() {
    let dir = scratch("bad_db3");
    write_db3_dir(&dir.join("bag"), &frames(), false);
    let good = std::fs::read(dir.join("bag/bag_0.db3")).unwrap();
    let p = dir.join("cut.db3");
    std::fs::write(&p, &good[..good.len() / 3]).unwrap();
    let e = fail("db3_cut", &p, &[]);
    assert!(e.contains("sqlite3"), "{e}");
    // Scribble over every page but the first.
    let mut b = good.clone();
    for (i, v) in b.iter_mut().enumerate().skip(4096) {
        *v = (i * 131 % 251) as u8;
    }
    let p = dir.join("scribbled.db3");
    std::fs::write(&p, &b).unwrap();
    let e = fail("db3_scribbled", &p, &[]);
    assert!(e.contains("sqlite3"), "{e}");
}

#[test]
fn missing_or_broken_metadata() {
    let dir = scratch("bad_meta");
    let bag_dir = dir.join("bag");
    write_db3_dir(&bag_dir, &frames(), false);
    let meta = std::fs::read_to_string(bag_dir.join("metadata.yaml")).unwrap();
    std::fs::remove_file(bag_dir.join("metadata.yaml")).unwrap();
    let e = fail("meta_missing", &bag_dir, &[]);
    assert!(
        e.contains("no metadata.yaml") && e.contains("bag_0.db3"),
        "{e}"
    );
    // metadata naming a file that is not there.
    std::fs::write(
        bag_dir.join("metadata.yaml"),
        meta.replace("bag_0.db3", "gone_0.db3"),
    )
    .unwrap();
    let e = fail("meta_gone", &bag_dir, &[]);
    assert!(
        e.contains("gone_0.db3") && e.contains("does not exist"),
        "{e}"
    );
    // metadata that is not rosbag2's.
    std::fs::write(bag_dir.join("metadata.yaml"), "hello: [1, 2\n").unwrap();
    let e = fail("meta_garbage", &bag_dir, &[]);
    assert!(e.contains("metadata.yaml"), "{e}");
    // Storage declared wrong.
    std::fs::write(
        bag_dir.join("metadata.yaml"),
        meta.replace("storage_identifier: sqlite3", "storage_identifier: mcap"),
    )
    .unwrap();
    let e = fail("meta_wrong_storage", &bag_dir, &[]);
    assert!(e.contains("metadata.yaml says mcap"), "{e}");
}

#[test]
fn no_image_topic_and_unknown_topic() {
    let dir = scratch("bad_topics");
    let p = dir.join("chatter.mcap");
    let mut w = bag::writer::McapBagWriter::create(&p).unwrap();
    let c = w
        .channel_with_schema(CHATTER, "std_msgs/msg/String", "string data\n")
        .unwrap();
    w.write(c, 1, 1, &string_msg("hi")).unwrap();
    w.finish().unwrap();
    let e = fail("no_image", &p, &[]);
    assert!(
        e.contains("no sensor_msgs/msg/Image") && e.contains("/chatter (std_msgs/msg/String)"),
        "{e}"
    );
    let good = good_mcap(&dir);
    let e = fail("unknown_topic", &good, &["/nope"]);
    assert!(e.contains("no topic /nope") && e.contains(RAW), "{e}");
    let e = fail("not_image_topic", &good, &[CHATTER]);
    assert!(e.contains("not sensor_msgs/msg/Image"), "{e}");
}

#[test]
fn wrong_schema_or_encoding() {
    let dir = scratch("bad_schema");
    // A topic that says Image but carries String messages.
    let p = dir.join("liar.mcap");
    let mut w = bag::writer::McapBagWriter::create(&p).unwrap();
    let c = w.channel(RAW, cdr::IMAGE).unwrap();
    w.write(c, 5, 5, &string_msg("I am not an image")).unwrap();
    w.finish().unwrap();
    let e = fail("liar", &p, &[]);
    assert!(e.contains("CDR") && e.contains(RAW), "{e}");

    // A JSON-encoded channel (not a ROS 2 bag).
    let p = dir.join("json.mcap");
    {
        let f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
        let mut w = mcap::Writer::new(f).unwrap();
        let s = w.add_schema(cdr::IMAGE, "jsonschema", b"{}").unwrap();
        let ch = w.add_channel(s, RAW, "json", &Default::default()).unwrap();
        let h = mcap::records::MessageHeader {
            channel_id: ch,
            sequence: 1,
            log_time: 1,
            publish_time: 1,
        };
        w.write_to_known_channel(&h, b"{}").unwrap();
        w.finish().unwrap();
    }
    let e = fail("json", &p, &[]);
    assert!(e.contains("not cdr"), "{e}");
}

#[test]
fn not_a_bag() {
    let dir = scratch("bad_notabag");
    let p = dir.join("photo.mcap");
    std::fs::copy(data("graf1.png"), &p).unwrap();
    let e = fail("png", &p, &[]);
    assert!(e.contains("neither an MCAP file nor a SQLite3"), "{e}");
    let p = dir.join("empty.db3");
    std::fs::write(&p, b"").unwrap();
    let e = fail("empty", &p, &[]);
    assert!(e.contains("empty"), "{e}");
    let e = fail("missing", &dir.join("nothing_here.mcap"), &[]);
    assert!(e.contains("nothing_here.mcap"), "{e}");
}

#[test]
fn unusable_frames_are_skipped_and_counted() {
    let dir = scratch("bad_frames");
    let p = dir.join("mixed.mcap");
    let fr = frames();
    let mut w = bag::writer::McapBagWriter::create(&p).unwrap();
    let c = w.channel(RAW, cdr::IMAGE).unwrap();
    w.write(c, 1, 1, &image_msg(0, &fr[0])).unwrap();
    // A well-formed message with an encoding the library does not take.
    let good1 = image_msg(1, &fr[1]);
    let mut bad = cdr::Image::decode(&good1).unwrap();
    bad.encoding = "32FC1".into();
    w.write(c, 2, 2, &bad.encode()).unwrap();
    w.write(c, 3, 3, &image_msg(2, &fr[2])).unwrap();
    w.finish().unwrap();
    let out = scratch("bad_frames_out");
    let s = replay::run(&options(&p, &out)).unwrap();
    assert_eq!((s.frames, s.skipped), (2, 1));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&s.report_json).unwrap()).unwrap();
    let reasons = j["skip_reasons"].as_object().unwrap();
    assert!(reasons.keys().any(|k| k.contains("32FC1")), "{reasons:?}");
    // The image itself is still copied to the output bag; only its results are missing.
    let msgs = read_out(&s.out_bag);
    assert_eq!(msgs[RAW].len(), 3);
    assert_eq!(msgs[&replay::keypoints_topic(RAW)].len(), 2);
}

#[test]
fn unfinished_writer_leaves_nothing() {
    let dir = scratch("bad_writer");
    let p = dir.join("x.mcap");
    {
        let mut w = bag::writer::McapBagWriter::create(&p).unwrap();
        let c = w.channel(RAW, cdr::IMAGE).unwrap();
        w.write(c, 1, 1, &image_msg(0, &frames()[0])).unwrap();
        assert!(dir.join(".x.mcap.partial").exists());
        // Dropped without finish, as when a replay fails half way.
    }
    assert!(!p.exists());
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
}
