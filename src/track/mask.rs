//! VINS's `setMask`: the pixels where the top-up detection may not put a corner, a filled
//! disc of radius `min_distance` around every kept track, drawn exactly as OpenCV's
//! `cv::circle(mask, center, radius, 0, FILLED)` draws it (8-connected midpoint circle,
//! each octant pair filled by horizontal spans, clipped to the image).

use crate::image::GrayImage;

/// Fills the disc of `radius` around (`cx`, `cy`) with `value` (`cv::circle` with
/// thickness -1, `LINE_8`, no shift). Centres off the image draw their visible part.
pub fn fill_circle(img: &mut GrayImage, cx: i32, cy: i32, radius: i32, value: u8) {
    let (w, h) = (img.width as i32, img.height as i32);
    if radius < 0 {
        return;
    }
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
    let (mut err, mut dx, mut dy, mut plus, mut minus) =
        (0i32, radius, 0i32, 1i32, (radius << 1) - 1);
    while dx >= dy {
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
        dy += 1;
        err += plus;
        plus += 2;
        let mask = (err <= 0) as i32 - 1;
        err -= minus & mask;
        dx += mask;
        minus -= mask & 2;
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
}
