//! Homography maths (apply, invert, local affine map) and the overlap error of a mapped
//! region and a disc, as the homography protocol ([module docs](super)) defines it.

use crate::pipeline::Keypoint;

pub(super) fn apply(h: &[f64; 9], x: f64, y: f64) -> (f64, f64) {
    let w = h[6] * x + h[7] * y + h[8];
    (
        (h[0] * x + h[1] * y + h[2]) / w,
        (h[3] * x + h[4] * y + h[5]) / w,
    )
}

pub(super) fn invert(h: &[f64; 9]) -> Option<[f64; 9]> {
    let [a, b, c, d, e, f, g, hh, i] = *h;
    let det = a * (e * i - f * hh) - b * (d * i - f * g) + c * (d * hh - e * g);
    if det.abs() < 1e-15 {
        return None;
    }
    let inv = [
        (e * i - f * hh) / det,
        (c * hh - b * i) / det,
        (b * f - c * e) / det,
        (f * g - d * i) / det,
        (a * i - c * g) / det,
        (c * d - a * f) / det,
        (d * hh - e * g) / det,
        (b * g - a * hh) / det,
        (a * e - b * d) / det,
    ];
    Some(inv)
}

/// Jacobian of the homography at (x, y): [[j00, j01], [j10, j11]].
fn jacobian(h: &[f64; 9], x: f64, y: f64) -> [f64; 4] {
    let w = h[6] * x + h[7] * y + h[8];
    let (u, v) = (h[0] * x + h[1] * y + h[2], h[3] * x + h[4] * y + h[5]);
    [
        (h[0] * w - u * h[6]) / (w * w),
        (h[1] * w - u * h[7]) / (w * w),
        (h[3] * w - v * h[6]) / (w * w),
        (h[4] * w - v * h[7]) / (w * w),
    ]
}

pub const OVERLAP_MAX_ERROR: f64 = 0.4;
const OVERLAP_GRID: usize = 48;
const NORM_RADIUS: f64 = 30.0;

/// A keypoint of image 1 mapped into image 2: centre and the inverse of the (rescaled)
/// affine map that takes the unit disc to its region, plus its scaled radius in image 1.
pub(super) struct Mapped {
    pub(super) c: (f64, f64),
    /// Inverse of k * J * r1 (maps image-2 offsets to the unit disc).
    inv: [f64; 4],
    /// Half-extent of the ellipse's bounding box.
    pub(super) ext: (f64, f64),
    /// Normalisation factor k = 30 / r1.
    pub(super) k: f64,
}

pub(super) fn map_region(h: &[f64; 9], kp: &Keypoint) -> Option<Mapped> {
    let r1 = (kp.size as f64 / 2.0).max(0.5);
    let k = NORM_RADIUS / r1;
    let c = apply(h, kp.x as f64, kp.y as f64);
    let j = jacobian(h, kp.x as f64, kp.y as f64);
    let m = [j[0] * k * r1, j[1] * k * r1, j[2] * k * r1, j[3] * k * r1];
    let det = m[0] * m[3] - m[1] * m[2];
    if det.abs() < 1e-12 {
        return None;
    }
    let inv = [m[3] / det, -m[1] / det, -m[2] / det, m[0] / det];
    // Bounding box of {M u : |u| <= 1}: half-widths are the row norms of M.
    let ext = (m[0].hypot(m[1]), m[2].hypot(m[3]));
    Some(Mapped { c, inv, ext, k })
}

/// Overlap error between the mapped region `a` and the disc of `b` (image 2), both rescaled
/// by a's factor; 1.0 when they cannot overlap.
pub(super) fn overlap_error(a: &Mapped, b: &Keypoint) -> f64 {
    let rb = a.k * (b.size as f64 / 2.0).max(0.5);
    let (bx, by) = (b.x as f64, b.y as f64);
    let x0 = (a.c.0 - a.ext.0).min(bx - rb);
    let x1 = (a.c.0 + a.ext.0).max(bx + rb);
    let y0 = (a.c.1 - a.ext.1).min(by - rb);
    let y1 = (a.c.1 + a.ext.1).max(by + rb);
    if (a.c.0 - bx).abs() > a.ext.0 + rb || (a.c.1 - by).abs() > a.ext.1 + rb {
        return 1.0;
    }
    let n = OVERLAP_GRID;
    let (sx, sy) = ((x1 - x0) / n as f64, (y1 - y0) / n as f64);
    let (mut inter, mut union) = (0usize, 0usize);
    let rb2 = rb * rb;
    for iy in 0..n {
        let y = y0 + (iy as f64 + 0.5) * sy;
        for ix in 0..n {
            let x = x0 + (ix as f64 + 0.5) * sx;
            let (dx, dy) = (x - a.c.0, y - a.c.1);
            let u = a.inv[0] * dx + a.inv[1] * dy;
            let v = a.inv[2] * dx + a.inv[3] * dy;
            let in_a = u * u + v * v <= 1.0;
            let in_b = (x - bx).powi(2) + (y - by).powi(2) <= rb2;
            inter += (in_a && in_b) as usize;
            union += (in_a || in_b) as usize;
        }
    }
    if union == 0 {
        1.0
    } else {
        1.0 - inter as f64 / union as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bag::eval::testutil::kp;

    const ID: [f64; 9] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];

    #[test]
    fn overlap_error_of_identical_and_shifted_discs() {
        let a = map_region(&ID, &kp(100.0, 100.0, 31.0, 0)).unwrap();
        assert!(overlap_error(&a, &kp(100.0, 100.0, 31.0, 0)) < 0.02);
        // Disjoint after normalisation (radius 30, shift 100): error 1.
        assert_eq!(overlap_error(&a, &kp(200.0, 100.0, 31.0, 0)), 1.0);
        // Scale 2 apart: areas 1:4, error = 1 - 1/4.
        let e = overlap_error(&a, &kp(100.0, 100.0, 62.0, 0));
        assert!((e - 0.75).abs() < 0.03, "{e}");
    }
}
