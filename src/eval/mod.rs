//! Evaluation metrics: how well keypoints are re-found between frames (frame-to-frame
//! tracking, descriptor tracking) and between images related by a known homography
//! (repeatability, matching score). The replay computes them per frame; `replay::report`
//! aggregates and prints them.
//!
//! May import: `config`, `cpu`, `error`, `features`, `image`, `matching`; never `replay`,
//! `report` or `bag`.
//!
//! # Frame-to-frame tracking ([`track`])
//!
//! A keypoint `p` of frame t counts as *re-found* in frame t+1 when frame t+1 has a keypoint
//! `q` with
//! * `|q - p| <= TRACK_RADIUS` level-0 pixels (both coordinates, i.e. a square window),
//! * `|octave(q) - octave(p)| <= 1`, and
//! * a zero-mean normalised cross-correlation (ZNCC) of at least [`TRACK_MIN_ZNCC`] between
//!   the two 15x15-sample gray patches around `p` (in frame t) and `q` (in frame t+1),
//!   sampled every `s = round(1.2^octave)` level-0 pixels (so a patch covers the same
//!   neighbourhood at every pyramid level).
//!
//! The tracking ratio of a frame pair is re-found / tried, where tried counts the keypoints
//! of frame t whose patch lies inside the image. The report also gives the position-only
//! ratio (first two conditions only), an upper bound that ignores appearance.
//!
//! # Descriptor tracking ([`track_descriptors`])
//!
//! The ORB descriptors of frame t (queries) are matched against those of frame t+1 (train)
//! by the library matcher ([`crate::matching`]) with the replay's [`MatchParams`](crate::matching::MatchParams) (the
//! defaults: two nearest neighbours, Lowe ratio 0.8 and cross-check). Per frame pair:
//! * *matches* = the matches the matcher keeps;
//! * a match (p in frame t, q in frame t+1) is an *inlier* when q lies in p's tracking
//!   window: `|q - p| <= TRACK_RADIUS` level-0 pixels in x and in y, and
//!   `|octave(q) - octave(p)| <= 1` (the position conditions above, no appearance test);
//! * *inlier share* = inliers / matches (undefined, and left out of the bag's statistics,
//!   for a pair without matches).
//!
//! On a video whose motion between frames stays within the window this is the share of
//! descriptor matches that are geometrically plausible; on unrelated frames it falls to
//! the chance that a wrong match lands in the window (about `17^2 / area`).
//!
//! # Homography protocol ([`evaluate_pair`])
//!
//! Repeatability and matching score as in Mikolajczyk et al., "A comparison of affine region
//! detectors" (IJCV 2005), for image pairs with a known homography H (image 1 -> image 2):
//! * A keypoint is the disc of diameter `size` around (x, y), in level-0 pixels.
//! * Only keypoints in the common part count: `H p1` inside image 2, `H^-1 p2` inside image 1.
//! * The overlap error of a pair is `1 - area(A ∩ B) / area(A ∪ B)`, where A is the disc of
//!   p1 mapped into image 2 through the local affine approximation of H at p1 (an ellipse)
//!   and B the disc of p2. As in the protocol, both regions are first rescaled about their
//!   centres by the factor that gives A a radius of 30 px (the centres do not move), so the
//!   error does not favour large regions. Areas are integrated on a 48x48 sample grid over
//!   the pair's bounding box.
//! * Two keypoints correspond when their overlap error is below 0.4; correspondences are
//!   made one-to-one greedily, lowest error first. Repeatability = correspondences /
//!   min(n1, n2), over the common part.
//! * Matching score = correct nearest-neighbour descriptor matches / min(n1, n2): each
//!   keypoint of image 1 in the common part is matched to the image-2 keypoint of the common
//!   part at the smallest Hamming distance (ties to the lower index), and the match is
//!   correct when that pair's overlap error is below 0.4.
//!
//! The descriptors are the library's own ORB descriptors (`Features::descriptors`, computed
//! with `describe.enabled` switched on, see [`describing`]), and the nearest neighbours come
//! from the library matcher ([`crate::matching::match_descriptors`] with
//! [`MatchParams::all`](crate::matching::MatchParams::all): no ratio test, no cross-check, not one-to-one, so the matching score
//! can exceed the repeatability on easy pairs). The report prints it beside OpenCV ORB's,
//! from `scripts/eval_homography.py`, which implements the same protocol in numpy.
//!
//! # Layout
//!
//! * `tracking`: the frame-to-frame measures.
//! * `homography`: the homography protocol (pairs, descriptors, scores).
//! * `geometry`: the homography's maths and the overlap error of two regions.

use crate::features::Keypoint;

mod geometry;
mod homography;
mod tracking;

pub use self::geometry::OVERLAP_MAX_ERROR;
pub use self::homography::{
    describe_view, describing, detect_with_descriptors, evaluate_keypoints, evaluate_pair,
    parse_homography, Described, HomographyPair, HomographyResult, Side,
};
pub use self::tracking::{track, track_descriptors, MatchTrackStats, TrackStats};

pub const TRACK_RADIUS: f32 = 8.0;
pub const TRACK_MIN_ZNCC: f64 = 0.8;

/// Buckets keypoints into square cells for radius queries.
struct Grid {
    cell: f32,
    cols: usize,
    rows: usize,
    cells: Vec<Vec<usize>>,
}

impl Grid {
    fn new(kps: &[Keypoint], cell: f32) -> Grid {
        let maxx = kps.iter().map(|k| k.x).fold(0.0f32, f32::max);
        let maxy = kps.iter().map(|k| k.y).fold(0.0f32, f32::max);
        let cols = (maxx / cell) as usize + 1;
        let rows = (maxy / cell) as usize + 1;
        let mut cells = vec![Vec::new(); cols * rows];
        for (i, k) in kps.iter().enumerate() {
            let (cx, cy) = (
                (k.x.max(0.0) / cell) as usize,
                (k.y.max(0.0) / cell) as usize,
            );
            cells[cy * cols + cx].push(i);
        }
        Grid {
            cell,
            cols,
            rows,
            cells,
        }
    }

    /// Indices of keypoints in cells touching the square of half-side `r` around (x, y).
    fn near(&self, x: f32, y: f32, r: f32, out: &mut Vec<usize>) {
        out.clear();
        let c0 = ((x - r).max(0.0) / self.cell) as usize;
        let r0 = ((y - r).max(0.0) / self.cell) as usize;
        let c1 = (((x + r).max(0.0) / self.cell) as usize).min(self.cols - 1);
        let r1 = (((y + r).max(0.0) / self.cell) as usize).min(self.rows - 1);
        for row in r0..=r1.max(r0).min(self.rows - 1) {
            for col in c0..=c1.max(c0).min(self.cols - 1) {
                out.extend_from_slice(&self.cells[row * self.cols + col]);
            }
        }
    }
}

/// Helpers shared by the submodules' tests.
#[cfg(test)]
mod testutil {
    use std::path::Path;

    use super::*;
    use crate::config::Config;
    use crate::image::{GrayImage, ImageView};

    pub(super) fn kp(x: f32, y: f32, size: f32, octave: i32) -> Keypoint {
        Keypoint {
            x,
            y,
            response: 1.0,
            size,
            angle: 0.0,
            octave,
        }
    }

    /// A `w` x `h` gray crop at (x0, y0) of a test photo.
    pub(super) fn crop(name: &str, x0: usize, y0: usize, w: usize, h: usize) -> GrayImage {
        let g = crate::cpu::decode::load_gray(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data")
                .join(name),
        )
        .unwrap();
        let mut out = GrayImage::new(w, h);
        for y in 0..h {
            out.row_mut(y).copy_from_slice(&g.row(y0 + y)[x0..x0 + w]);
        }
        out
    }

    pub(super) fn described(img: &GrayImage) -> Described {
        let view = ImageView::mono8(&img.data, img.width, img.height).unwrap();
        describe_view(&view, &Config::default()).unwrap()
    }
}
