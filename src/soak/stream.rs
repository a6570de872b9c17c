//! The soak's input: synthetic scenes in every encoding of the mix, malformed variants, and
//! the configs it cycles through.

use crate::config::Config;
use crate::image::{Encoding, ImageView};

/// xorshift64*: deterministic, dependency-free frame and fault choices.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(super) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A synthetic scene: overlapping rectangles and discs of random gray levels on a gradient,
/// with mild noise, so that every stage (corners, edges, descriptors) has work to do.
pub(super) fn scene(width: usize, height: usize, rng: &mut Rng) -> Vec<u8> {
    let mut img: Vec<u8> = (0..width * height)
        .map(|i| (((i % width) * 96 / width) + ((i / width) * 64 / height)) as u8)
        .collect();
    for _ in 0..(width * height / 4000) {
        let (cx, cy) = (rng.below(width), rng.below(height));
        let r = 4 + rng.below(40);
        let v = rng.below(256) as u8;
        let disc = rng.below(2) == 0;
        for y in cy.saturating_sub(r)..(cy + r).min(height) {
            for x in cx.saturating_sub(r)..(cx + r).min(width) {
                let (dx, dy) = (x.abs_diff(cx), y.abs_diff(cy));
                if !disc || dx * dx + dy * dy <= r * r {
                    img[y * width + x] = v;
                }
            }
        }
    }
    for p in img.iter_mut() {
        *p = p.saturating_add((rng.next() % 5) as u8);
    }
    img
}

/// One prepared input frame.
pub(super) struct Frame {
    pub(super) data: Vec<u8>,
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) step: usize,
    pub(super) encoding: Encoding,
}

impl Frame {
    pub(super) fn view(&self) -> std::result::Result<ImageView<'_>, crate::DecodeError> {
        ImageView::new(
            &self.data,
            self.width,
            self.height,
            self.step,
            self.encoding.name(),
            false,
        )
    }
}

/// The encodings of the mix; bgr8 rows are padded by 64 bytes.
pub(super) const MIX: [(Encoding, usize); 5] = [
    (Encoding::Mono8, 0),
    (Encoding::Bgr8, 64),
    (Encoding::Rgb8, 0),
    (Encoding::Mono16, 0),
    (Encoding::Uyvy, 0),
];

pub(super) fn encode(gray: &[u8], width: usize, height: usize, enc: Encoding, pad: usize) -> Frame {
    let bpp = enc.bytes_per_pixel();
    let step = width * bpp + pad;
    let mut data = vec![0u8; step * height];
    for y in 0..height {
        let src = &gray[y * width..(y + 1) * width];
        let dst = &mut data[y * step..y * step + width * bpp];
        for (x, &g) in src.iter().enumerate() {
            let px = &mut dst[x * bpp..(x + 1) * bpp];
            match enc {
                Encoding::Mono8 => px[0] = g,
                // Channels differ a little so the colour conversion matters.
                Encoding::Rgb8 | Encoding::Bgr8 => {
                    px.copy_from_slice(&[g, g.saturating_sub(20), g.saturating_add(20)])
                }
                Encoding::Mono16 => px.copy_from_slice(&(g as u16 * 257).to_le_bytes()),
                // U Y0 V Y1: chroma on even bytes, luma on odd ones.
                Encoding::Uyvy => px.copy_from_slice(&[128, g]),
                _ => unreachable!("not in the soak mix"),
            }
        }
    }
    Frame {
        data,
        width,
        height,
        step,
        encoding: enc,
    }
}

/// The configs the stream cycles through, as `--set` updates of the default.
pub(super) const CONFIGS: &[&[(&str, &str)]] = &[
    &[],
    &[
        ("select.spread", "quadtree"),
        ("detector.low_threshold_retry", "true"),
        ("select.max_keypoints", "1000"),
    ],
    &[
        ("detector.fast_threshold", "10"),
        ("canny.enabled", "false"),
    ],
    &[
        ("pyramid.levels", "4"),
        ("describe.enabled", "false"),
        ("canny.blur_ksize", "5"),
        ("canny.l2_gradient", "false"),
    ],
    &[
        ("pyramid.interpolation", "linear_exact"),
        ("select.spread", "grid"),
    ],
];

pub(super) fn config_at(i: usize) -> Config {
    let mut cfg = Config::default();
    for (k, v) in CONFIGS[i % CONFIGS.len()] {
        cfg = cfg.with_value(k, v).expect("soak configs are valid");
    }
    cfg
}

#[derive(Clone, Copy)]
pub(super) enum Fault {
    ShortBuffer,
    WrongStep,
    UnknownEncoding,
}
