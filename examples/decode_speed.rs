//! What the node's `transport: compressed` costs per frame: the decode of each JPEG or PNG
//! file given (the `image` crate: zune-jpeg, png; `gpu_features::image::decode_encoded_into`,
//! the node's call, into a buffer reused from frame to frame), on one thread, median and p90
//! in ms over `--repeats` decodes after two warm-up ones.
//!
//! ```sh
//! cargo run --release --example decode_speed -- --repeats 50 a.jpg b.png
//! ```
//!
//! Prints one line per file: `decode FILE WxH ENCODING BYTES p50_ms P90_ms` (scripts compare
//! it with `cv2.imdecode` on the same files in the same run: docs/ros.md).

use std::time::Instant;

use gpu_features::image::{decode_encoded_into, OwnedFrame};
use gpu_features::report::pct;

#[path = "common/mod.rs"]
mod common;
use common::named_arg;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repeats: usize = named_arg(&args, "--repeats", "50")
        .parse()
        .expect("--repeats N");
    let files: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--repeats"))
        .map(|(_, a)| a)
        .collect();
    if files.is_empty() {
        eprintln!("usage: decode_speed [--repeats N] FILE...");
        std::process::exit(2);
    }
    let mut frame = OwnedFrame::default();
    for f in files {
        let bytes = match std::fs::read(f) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{f}: {e}");
                std::process::exit(1);
            }
        };
        let mut ms = Vec::with_capacity(repeats);
        for i in 0..repeats + 2 {
            let t0 = Instant::now();
            if let Err(e) = decode_encoded_into(&bytes, &mut frame) {
                eprintln!("{f}: {e}");
                std::process::exit(1);
            }
            if i >= 2 {
                ms.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        ms.sort_by(|a, b| a.total_cmp(b));
        println!(
            "decode {f} {}x{} {:?} {} {:.3} {:.3}",
            frame.width,
            frame.height,
            frame.encoding,
            bytes.len(),
            pct(&ms, 50.0),
            pct(&ms, 90.0)
        );
    }
}
