//! Canny edges (CPU reference for `kernels/canny.cu`), identical to
//! `cv::Canny(img, low, high, 3, L2gradient)`.

use crate::config::CannyConfig;
use crate::image::GrayImage;

/// Reusable buffers (gradients, magnitudes, stack).
#[derive(Default)]
pub struct CannyScratch {}

/// Writes the 0/255 edge map of `img` into `out` (reshaped).
pub fn canny(img: &GrayImage, cfg: &CannyConfig, out: &mut GrayImage, scratch: &mut CannyScratch) {
    let _ = (img, cfg, out, scratch);
    todo!("canny::canny")
}
