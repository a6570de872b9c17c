//! Unit tests of [`super::CpuPipeline`]: level 0 read in place or decoded gives the same
//! features.

use super::*;
use crate::cpu::decode::load_gray;
use crate::image::Encoding;

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_frame_read_in_place_gives_the_decoded_frames_features() {
    // The same gray image as packed mono8 (read in place), mono8 with padded rows and bgr8
    // (both decoded into a buffer): the same keypoints, descriptors and edges, on one
    // thread and on two; a longer buffer than the frame's is read as the frame only.
    let img = load_gray(&root().join("tests/data/graf1.png")).unwrap();
    let (w, h) = (img.width, img.height);
    let mut packed = img.data.clone();
    packed.extend_from_slice(&[255; 64]);
    let step = w + 13;
    let mut padded = vec![7u8; step * h];
    let mut bgr = vec![0u8; 3 * w * h];
    for y in 0..h {
        padded[y * step..y * step + w].copy_from_slice(img.row(y));
        for (x, &v) in img.row(y).iter().enumerate() {
            bgr[3 * (y * w + x)..3 * (y * w + x) + 3].fill(v);
        }
    }
    let views = [
        ImageView::with_encoding(&packed, w, h, w, Encoding::Mono8, false).unwrap(),
        ImageView::with_encoding(&padded, w, h, step, Encoding::Mono8, false).unwrap(),
        ImageView::with_encoding(&bgr, w, h, 3 * w, Encoding::Bgr8, false).unwrap(),
    ];
    assert!(views[0].packed_mono8().is_some());
    assert!(views[1].packed_mono8().is_none() && views[2].packed_mono8().is_none());
    for threads in [1, 2] {
        let mut cfg = Config::default();
        cfg.cpu.threads = threads;
        let mut cpu = CpuPipeline::new();
        let all: Vec<Features> = views.iter().map(|v| cpu.process(&cfg, v)).collect();
        assert!(all[0].keypoints.len() > 100 && all[0].edges.is_some());
        for f in &all[1..] {
            assert_eq!(f.keypoints, all[0].keypoints, "threads {threads}");
            assert_eq!(f.descriptors, all[0].descriptors, "threads {threads}");
            assert_eq!(f.edges, all[0].edges, "threads {threads}");
            assert_eq!(f.level_sizes, all[0].level_sizes, "threads {threads}");
        }
    }
}

#[test]
fn one_pipeline_follows_the_frame_size() {
    // Frames of two sizes in turn through one pipeline (its resize tables and buffers kept
    // from frame to frame) give what a fresh pipeline gives for each.
    let img = load_gray(&root().join("tests/data/graf1.png")).unwrap();
    let (cw, ch) = (601, 397);
    let crop: Vec<u8> = (0..ch).flat_map(|y| img.row(y)[..cw].to_vec()).collect();
    let big = ImageView::mono8(&img.data, img.width, img.height).unwrap();
    let small = ImageView::mono8(&crop, cw, ch).unwrap();
    let cfg = Config::default();
    let mut kept = CpuPipeline::new();
    for frame in [&big, &small, &big, &small] {
        let fresh = CpuPipeline::new().process(&cfg, frame);
        let got = kept.process(&cfg, frame);
        assert!(!fresh.keypoints.is_empty());
        assert_eq!(got.keypoints, fresh.keypoints);
        assert_eq!(got.descriptors, fresh.descriptors);
        assert_eq!(got.edges, fresh.edges);
    }
}
