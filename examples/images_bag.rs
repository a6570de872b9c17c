//! Image files to a rosbag2 MCAP bag of `sensor_msgs/Image` (mono8, each file converted to
//! gray as the library loads it), stamps `T0 + k * PERIOD` ns: the frames a test plays to the
//! node, as a bag for `gpu_features replay` (tests/ros/test_node.py: the node's `feature`
//! messages against the replay's, message for message).
//!
//!   cargo run --release --example images_bag -- OUT.mcap TOPIC FRAME_ID T0_NS PERIOD_NS IMAGE...

use std::path::Path;

use gpu_features::bag::writer::McapBagWriter;
use gpu_features::cdr::{self, Header, Time};

fn run(args: &[String]) -> Result<(), String> {
    let [out, topic, frame_id, t0, period, images @ ..] = args else {
        return Err("usage: images_bag OUT.mcap TOPIC FRAME_ID T0_NS PERIOD_NS IMAGE...".into());
    };
    let num = |s: &str, what: &str| s.parse::<u64>().map_err(|e| format!("{what} {s:?}: {e}"));
    let (t0, period) = (num(t0, "T0_NS")?, num(period, "PERIOD_NS")?);
    let mut w = McapBagWriter::create(Path::new(out)).map_err(|e| e.to_string())?;
    let ch = w.channel(topic, cdr::IMAGE).map_err(|e| e.to_string())?;
    for (k, path) in images.iter().enumerate() {
        let g = gpu_features::cpu::decode::load_gray(Path::new(path)).map_err(|e| e.to_string())?;
        let t = t0 + k as u64 * period;
        let header = Header {
            stamp: Time::from_nanos(t),
            frame_id: frame_id.clone(),
        };
        let msg = cdr::Image::mono8(header, g.width, g.height, &g.data).encode();
        w.write(ch, t, t, &msg).map_err(|e| e.to_string())?;
    }
    w.finish().map_err(|e| e.to_string())?;
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("images_bag: {e}");
        std::process::exit(2);
    }
}
