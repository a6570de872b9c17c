//! Per-topic digests of a bag's messages, to compare two replays' outputs (CPU and CUDA, or
//! before and after a change) message for message where the MCAP container itself is not
//! byte-stable: one line per topic with its message count and an FNV-1a digest of every
//! message's bytes in order, then (with `--each`) one line per message.
//!
//!   cargo run --release --example bag_digest -- OUT/out.mcap [--each]
//!   diff <(bag_digest a/out.mcap) <(bag_digest b/out.mcap)

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use gpu_features::bag::reader::{Bag, RawMessage};

fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: bag_digest BAG [--each]");
        std::process::exit(2);
    };
    let each = args.iter().any(|a| a == "--each");
    let bag = match Bag::open(Path::new(path)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let topics: HashSet<String> = bag
        .topics()
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.name)
        .collect();
    let mut sums: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    let r = bag.read(&topics, &mut |m: RawMessage| {
        let e = sums
            .entry(m.topic.to_string())
            .or_insert((0, 0xcbf2_9ce4_8422_2325));
        if each {
            println!(
                "{} {} {:016x}",
                m.topic,
                e.0,
                fnv(0xcbf2_9ce4_8422_2325, m.data)
            );
        }
        e.0 += 1;
        e.1 = fnv(e.1, m.data);
        Ok(gpu_features::bag::reader::Flow::Continue(()))
    });
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    for (t, (n, h)) in sums {
        println!("{t} {n} messages {h:016x}");
    }
}
