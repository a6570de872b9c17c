//! Helpers of the stage modules' unit tests.

use crate::image::GrayImage;

/// A `w x h` image of xorshift64 noise (13, 7, 17) from state `s`, which it advances: pixel
/// `i` in raster order is `f` of the state after step `i + 1`.
pub fn xorshift_image(w: usize, h: usize, s: &mut u64, f: impl Fn(u64) -> u8) -> GrayImage {
    let data = (0..w * h)
        .map(|_| {
            *s ^= *s << 13;
            *s ^= *s >> 7;
            *s ^= *s << 17;
            f(*s)
        })
        .collect();
    GrayImage::from_vec(w, h, data).unwrap()
}
