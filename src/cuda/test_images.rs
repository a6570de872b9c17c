//! Synthetic test images shared by the unit tests of src/cuda/fast_harris.rs and
//! tests/gpu_vs_cpu.rs (which includes this file with `#[path]`): plain functions, no crate
//! items.

/// Noise (an LCG) whose contrast varies from block to block over the image: some cells are
/// empty at a high FAST threshold, their neighbours are not.
pub fn contrast_noise(w: usize, h: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..w * h)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 56) as u32;
            let (x, y) = (i % w, i / w);
            let amp = 4 + ((x / 23 + y / 17) * 37 % 120) as u32;
            (128 - amp / 2 + r * amp / 256) as u8
        })
        .collect()
}
