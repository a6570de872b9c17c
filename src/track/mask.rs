//! VINS's `setMask`: the pixels where the top-up detection may not put a corner, a filled
//! disc of radius `min_distance` around every kept track, drawn exactly as OpenCV's
//! `cv::circle(mask, center, radius, 0, FILLED)` draws it (8-connected midpoint circle,
//! each octant pair filled by horizontal spans, clipped to the image).
//!
//! [`Discs`] keeps the claimed discs as centres and one span table instead of an image:
//! VINS's greedy pass asks it whether a pixel is free, the GPU draws the mask from the
//! centres (kilobytes up instead of the image-sized mask), and [`Discs::paint`] draws the
//! same mask on the host for the CPU detectors.

use crate::image::GrayImage;

/// The midpoint circle's steps for `radius`: `(dx, dy)` with `dx >= dy`, each drawing the
/// spans `cx ± dx` on rows `cy ± dy` and `cx ± dy` on rows `cy ± dx` (`cv::circle`'s
/// filled octant pairs).
fn circle_steps(radius: i32) -> impl Iterator<Item = (i32, i32)> {
    let (mut err, mut dx, mut dy, mut plus, mut minus) =
        (0i32, radius, 0i32, 1i32, (radius << 1) - 1);
    std::iter::from_fn(move || {
        if radius < 0 || dx < dy {
            return None;
        }
        let step = (dx, dy);
        dy += 1;
        err += plus;
        plus += 2;
        let mask = (err <= 0) as i32 - 1;
        err -= minus & mask;
        dx += mask;
        minus -= mask & 2;
        Some(step)
    })
}

/// Fills the disc of `radius` around (`cx`, `cy`) with `value` (`cv::circle` with
/// thickness -1, `LINE_8`, no shift). Centres off the image draw their visible part.
pub fn fill_circle(img: &mut GrayImage, cx: i32, cy: i32, radius: i32, value: u8) {
    let (w, h) = (img.width as i32, img.height as i32);
    let mut hline = |y: i32, x0: i32, x1: i32| {
        if y < 0 || y >= h {
            return;
        }
        let (a, b) = (x0.max(0), x1.min(w - 1));
        if a > b {
            return;
        }
        let row = img.row_mut(y as usize);
        row[a as usize..=b as usize].fill(value);
    };
    for (dx, dy) in circle_steps(radius) {
        let (y11, y12, y21, y22) = (cy - dy, cy + dy, cy - dx, cy + dx);
        let (x11, x12, x21, x22) = (cx - dx, cx + dx, cx - dy, cx + dy);
        if x11 < w && x12 >= 0 && y21 < h && y22 >= 0 {
            hline(y11, x11, x12);
            hline(y12, x11, x12);
            if x21 < w && x22 >= 0 {
                hline(y21, x21, x22);
                hline(y22, x21, x22);
            }
        }
    }
}

/// The disc of `radius` as half-widths: row offset `dy` (0..=radius, either sign) covers
/// `cx - spans[dy] ..= cx + spans[dy]`. Every span `fill_circle` draws is centred on `cx`,
/// so a row's union is its widest span; the spans it skips by its clipping test lie wholly
/// off the image, so clipping this table to the image draws the same pixels.
pub fn disc_spans(radius: i32, spans: &mut Vec<i32>) {
    spans.clear();
    if radius < 0 {
        return;
    }
    spans.resize(radius as usize + 1, -1);
    for (dx, dy) in circle_steps(radius) {
        let (dx_, dy_) = (dx as usize, dy as usize);
        spans[dy_] = spans[dy_].max(dx);
        spans[dx_] = spans[dx_].max(dy);
    }
}

/// No disc in a grid cell.
const NONE: u32 = u32::MAX;

/// The discs VINS's mask pass claimed this frame: their centres in claim order, the disc's
/// span table, and a grid of cells at least a radius wide (each holding the centres inside
/// it as a linked list), so that a pixel is tested against the discs of its 3x3 cells only.
/// Sized once per resolution and radius.
#[derive(Default)]
pub struct Discs {
    size: (usize, usize),
    radius: i32,
    spans: Vec<i32>,
    cell: usize,
    cols: usize,
    heads: Vec<u32>,
    next: Vec<u32>,
    centers: Vec<(i32, i32)>,
}

impl Discs {
    /// No disc claimed yet, on an image of `size`, discs of `radius` (>= 0).
    pub fn start(&mut self, size: (usize, usize), radius: i32) {
        let radius = radius.max(0);
        if radius != self.radius || self.spans.is_empty() {
            self.radius = radius;
            disc_spans(radius, &mut self.spans);
        }
        self.size = size;
        // At least 16 pixels a cell, so that a small radius does not make a huge grid.
        self.cell = (radius as usize + 1).max(16);
        self.cols = size.0.div_ceil(self.cell).max(1);
        let rows = size.1.div_ceil(self.cell).max(1);
        self.heads.clear();
        self.heads.resize(self.cols * rows, NONE);
        self.next.clear();
        self.centers.clear();
    }

    fn cell_of(&self, x: i32, y: i32) -> (usize, usize) {
        let rows = self.heads.len() / self.cols;
        let c = (x.max(0) as usize / self.cell).min(self.cols - 1);
        let r = (y.max(0) as usize / self.cell).min(rows - 1);
        (c, r)
    }

    /// Whether a claimed disc covers pixel (`x`, `y`) (the mask is 0 there).
    pub fn covers(&self, x: i32, y: i32) -> bool {
        if self.heads.is_empty() {
            return false; // never started: nothing claimed
        }
        let (c, r) = self.cell_of(x, y);
        let rows = self.heads.len() / self.cols;
        for rr in r.saturating_sub(1)..=(r + 1).min(rows - 1) {
            for cc in c.saturating_sub(1)..=(c + 1).min(self.cols - 1) {
                let mut i = self.heads[rr * self.cols + cc];
                while i != NONE {
                    let (cx, cy) = self.centers[i as usize];
                    let dy = (y - cy).unsigned_abs() as usize;
                    if dy < self.spans.len() && (x - cx).abs() <= self.spans[dy] {
                        return true;
                    }
                    i = self.next[i as usize];
                }
            }
        }
        false
    }

    /// VINS's test for a track at pixel (`x`, `y`, inside the image): free (no claimed disc
    /// covers it) claims its disc and returns true.
    pub fn claim(&mut self, x: i32, y: i32) -> bool {
        if self.heads.is_empty() {
            // Never started: an empty image's grid (one cell; pixels are clamped into it).
            self.start(self.size, self.radius);
        }
        if self.covers(x, y) {
            return false;
        }
        let (c, r) = self.cell_of(x, y);
        let slot = &mut self.heads[r * self.cols + c];
        self.next.push(*slot);
        *slot = self.centers.len() as u32;
        self.centers.push((x, y));
        true
    }

    /// The claimed centres, in claim order.
    pub fn centers(&self) -> &[(i32, i32)] {
        &self.centers
    }

    /// The disc's half-widths by row offset ([`disc_spans`]).
    pub fn spans(&self) -> &[i32] {
        &self.spans
    }

    /// Room for `n` centres without growing.
    pub fn reserve(&mut self, n: usize) {
        self.centers.reserve(n);
        self.next.reserve(n);
    }

    /// The mask as VINS draws it: 255, then 0 on every claimed disc.
    pub fn paint(&self, img: &mut GrayImage) {
        img.reshape(self.size.0, self.size.1);
        img.data.fill(255);
        for &(x, y) in &self.centers {
            fill_circle(img, x, y, self.radius, 0);
        }
    }
}

/// OpenCV's `cvRound` of a pixel coordinate (ties to even), as `Point2f -> Point` does.
pub fn round_px(v: f32) -> i32 {
    v.round_ties_even() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disc_is_symmetric_and_has_the_radius() {
        let mut m = GrayImage::new(41, 41);
        m.data.fill(255);
        fill_circle(&mut m, 20, 20, 10, 0);
        assert_eq!(m.get(20, 10), 0);
        assert_eq!(m.get(20, 9), 255);
        assert_eq!(m.get(10, 20), 0);
        assert_eq!(m.get(30, 20), 0);
        assert_eq!(m.get(31, 20), 255);
        for y in 0..41 {
            for x in 0..41 {
                assert_eq!(m.get(x, y), m.get(40 - x, y));
                assert_eq!(m.get(x, y), m.get(x, 40 - y));
            }
        }
        // Clipped at the edge without panicking.
        fill_circle(&mut m, -5, 3, 8, 7);
        assert_eq!(m.get(0, 3), 7);
    }

    /// VINS's pass on an image mask: free where the mask is 255, then the disc drawn.
    fn claim_on_image(m: &mut GrayImage, pts: &[(i32, i32)], r: i32) -> Vec<bool> {
        m.data.fill(255);
        pts.iter()
            .map(|&(x, y)| {
                let free = m.get(x as usize, y as usize) == 255;
                if free {
                    fill_circle(m, x, y, r, 0);
                }
                free
            })
            .collect()
    }

    #[test]
    fn the_span_table_draws_fill_circles_disc() {
        for r in [0, 1, 2, 3, 7, 10, 30, 31, 100] {
            let n = (2 * r + 1) as usize;
            let mut m = GrayImage::new(n, n);
            m.data.fill(255);
            fill_circle(&mut m, r, r, r, 0);
            let mut spans = Vec::new();
            disc_spans(r, &mut spans);
            assert_eq!(spans.len(), r as usize + 1);
            for y in 0..n {
                for x in 0..n {
                    let (dx, dy) = ((x as i32 - r).abs(), (y as i32 - r).unsigned_abs() as usize);
                    assert_eq!(m.get(x, y) == 0, dx <= spans[dy], "r {r} at ({x}, {y})");
                }
            }
        }
    }

    proptest::proptest! {
        /// The claims, and the painted mask, equal VINS's pass on an image, discs at the
        /// edges and overlapping ones included.
        #[test]
        fn discs_claim_and_paint_as_the_image_mask(
            (w, h) in (1usize..90, 1usize..70),
            r in 0i32..40,
            raw in proptest::collection::vec((0u32..10_000, 0u32..10_000), 0..60),
        ) {
            let pts: Vec<(i32, i32)> = raw
                .iter()
                .map(|&(a, b)| ((a as usize % w) as i32, (b as usize % h) as i32))
                .collect();
            let mut img = GrayImage::new(w, h);
            let want = claim_on_image(&mut img, &pts, r);
            let mut d = Discs::default();
            d.start((w, h), r);
            let got: Vec<bool> = pts.iter().map(|&(x, y)| d.claim(x, y)).collect();
            proptest::prop_assert_eq!(&got, &want);
            let mut painted = GrayImage::new(1, 1);
            d.paint(&mut painted);
            proptest::prop_assert_eq!(&painted.data, &img.data);
            for y in 0..h as i32 {
                for x in 0..w as i32 {
                    proptest::prop_assert_eq!(d.covers(x, y), img.get(x as usize, y as usize) == 0);
                }
            }
            // Never started: nothing covered, and a claim works (one cell for everything).
            let mut fresh = Discs::default();
            proptest::prop_assert!(!fresh.covers(3, 4));
            proptest::prop_assert!(fresh.claim(3, 4) && !fresh.claim(3, 4));
            // The same object again, another radius: nothing of the last frame is left.
            d.start((w, h), r + 1);
            proptest::prop_assert!(d.centers().is_empty());
            proptest::prop_assert!(!d.covers(0, 0));
        }
    }
}
