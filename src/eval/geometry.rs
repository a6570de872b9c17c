//! Homography maths with nalgebra (apply, invert, local affine map) and the overlap error of a mapped
//! region and a disc, as the homography protocol ([module docs](super)) defines it.

use nalgebra::{Matrix2, Matrix3, Point2};

use crate::features::Keypoint;

/// `h` applied to `p` in homogeneous coordinates: `(h00 x + h01 y + h02) / w` and
/// `(h10 x + h11 y + h12) / w`, `w = h20 x + h21 y + h22` (summed in this order).
pub(super) fn apply(h: &Matrix3<f64>, p: Point2<f64>) -> Point2<f64> {
    let (u, v, w) = homogeneous(h, p);
    Point2::new(u / w, v / w)
}

/// `h * (x, y, 1)`, each row summed left to right.
fn homogeneous(h: &Matrix3<f64>, p: Point2<f64>) -> (f64, f64, f64) {
    let row = |r: usize| h[(r, 0)] * p.x + h[(r, 1)] * p.y + h[(r, 2)];
    (row(0), row(1), row(2))
}

/// The inverse of `h`; `None` when it is singular (|det| < 1e-15).
pub(super) fn invert(h: &Matrix3<f64>) -> Option<Matrix3<f64>> {
    if h.determinant().abs() < 1e-15 {
        return None;
    }
    h.try_inverse()
}

/// Jacobian of the homography at `p`: d(u/w, v/w) / d(x, y).
fn jacobian(h: &Matrix3<f64>, p: Point2<f64>) -> Matrix2<f64> {
    let (u, v, w) = homogeneous(h, p);
    let w2 = w * w;
    Matrix2::new(
        (h[(0, 0)] * w - u * h[(2, 0)]) / w2,
        (h[(0, 1)] * w - u * h[(2, 1)]) / w2,
        (h[(1, 0)] * w - v * h[(2, 0)]) / w2,
        (h[(1, 1)] * w - v * h[(2, 1)]) / w2,
    )
}

pub const OVERLAP_MAX_ERROR: f64 = 0.4;
const OVERLAP_GRID: usize = 48;
const NORM_RADIUS: f64 = 30.0;

/// A keypoint of image 1 mapped into image 2: centre and the inverse of the (rescaled)
/// affine map that takes the unit disc to its region, plus its scaled radius in image 1.
pub(super) struct Mapped {
    pub(super) c: Point2<f64>,
    /// Inverse of k * J * r1 (maps image-2 offsets to the unit disc).
    inv: Matrix2<f64>,
    /// Half-extent of the ellipse's bounding box.
    pub(super) ext: (f64, f64),
    /// Normalisation factor k = 30 / r1.
    pub(super) k: f64,
}

pub(super) fn map_region(h: &Matrix3<f64>, kp: &Keypoint) -> Option<Mapped> {
    let r1 = (kp.size as f64 / 2.0).max(0.5);
    let k = NORM_RADIUS / r1;
    let p = Point2::new(kp.x as f64, kp.y as f64);
    let c = apply(h, p);
    let m = jacobian(h, p).map(|j| j * k * r1);
    let inv = m.try_inverse().filter(|_| m.determinant().abs() >= 1e-12)?;
    // Bounding box of {M u : |u| <= 1}: half-widths are the row norms of M.
    let ext = (m.row(0).norm(), m.row(1).norm());
    Some(Mapped { c, inv, ext, k })
}

/// Overlap error between the mapped region `a` and the disc of `b` (image 2), both rescaled
/// by a's factor; 1.0 when they cannot overlap.
pub(super) fn overlap_error(a: &Mapped, b: &Keypoint) -> f64 {
    let rb = a.k * (b.size as f64 / 2.0).max(0.5);
    let (bx, by) = (b.x as f64, b.y as f64);
    let x0 = (a.c.x - a.ext.0).min(bx - rb);
    let x1 = (a.c.x + a.ext.0).max(bx + rb);
    let y0 = (a.c.y - a.ext.1).min(by - rb);
    let y1 = (a.c.y + a.ext.1).max(by + rb);
    if (a.c.x - bx).abs() > a.ext.0 + rb || (a.c.y - by).abs() > a.ext.1 + rb {
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
            let (dx, dy) = (x - a.c.x, y - a.c.y);
            let u = a.inv[(0, 0)] * dx + a.inv[(0, 1)] * dy;
            let v = a.inv[(1, 0)] * dx + a.inv[(1, 1)] * dy;
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
    use crate::eval::testutil::kp;

    #[test]
    fn overlap_error_of_identical_and_shifted_discs() {
        let a = map_region(&Matrix3::identity(), &kp(100.0, 100.0, 31.0, 0)).unwrap();
        assert!(overlap_error(&a, &kp(100.0, 100.0, 31.0, 0)) < 0.02);
        // Disjoint after normalisation (radius 30, shift 100): error 1.
        assert_eq!(overlap_error(&a, &kp(200.0, 100.0, 31.0, 0)), 1.0);
        // Scale 2 apart: areas 1:4, error = 1 - 1/4.
        let e = overlap_error(&a, &kp(100.0, 100.0, 62.0, 0));
        assert!((e - 0.75).abs() < 0.03, "{e}");
    }
}
