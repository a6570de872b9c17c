//! Intensity-centroid orientation (CPU reference for `kernels/orient.cu`).
//!
//! Bit-exact with OpenCV's ORB (`ICAngles` + `cv::fastAtan2`): the moments are integers and
//! the angle is OpenCV's float polynomial, evaluated in the same order in `f32` (no FMA).

use crate::image::{AsGray, Gray};

/// Half-widths of the circular patch per row offset (ORB's `umax`), `half_patch + 2` long
/// (entries `0..=half_patch` are used). Rows near the diagonal are rounded from
/// `sqrt(r^2 - v^2)`; the rest mirror them so that the disc is symmetric in x and y.
pub fn circle_extents(half_patch: u32) -> Vec<i32> {
    let hp = half_patch as i32;
    let mut umax = vec![0i32; hp as usize + 2];
    // ORB evaluates these bounds in float.
    let diag = hp as f32 * 2f32.sqrt() / 2.0;
    let vmax = (diag + 1.0).floor() as i32;
    let vmin = diag.ceil() as i32;
    for v in 0..=vmax.min(hp + 1) {
        let r2 = (hp as f64) * (hp as f64) - (v * v) as f64;
        umax[v as usize] = r2.max(0.0).sqrt().round_ties_even() as i32;
    }
    // Mirror: row v's extent is the number of leading rows whose extent is at least v.
    let mut v0 = 0usize;
    let mut v = hp;
    while v >= vmin {
        while umax[v0] == umax[v0 + 1] {
            v0 += 1;
        }
        umax[v as usize] = v0 as i32;
        v0 += 1;
        v -= 1;
    }
    umax
}

/// ORB's `IC_Angle` at (x, y), degrees in [0, 360). The patch radius is `umax.len() - 2`; the
/// caller keeps (x, y) at least that far from every border.
pub fn ic_angle(img: impl AsGray, x: u32, y: u32, umax: &[i32]) -> f32 {
    let img = img.gray();
    let half = umax.len() as i32 - 2;
    let (m01, m10) = moments(img, x as i32, y as i32, half, umax);
    fast_atan2(m01 as f32, m10 as f32)
}

/// The moments `(m_01, m_10)` over the circular patch, in ORB's integer arithmetic.
pub fn moments(img: impl AsGray, x: i32, y: i32, half: i32, umax: &[i32]) -> (i32, i32) {
    moments_versions(img.gray(), x, y, half, umax)
}

super::simd::versions! {
    /// [`moments_rows`] at the process's SIMD level (integer sums: the same on every level).
    fn moments_versions(img: Gray<'_>, x: i32, y: i32, half: i32, umax: &[i32]) -> (i32, i32) = moments_rows;
}

/// The patch row by row: the centre row's `u * p` and, for each `v`, the rows `y + v` and
/// `y - v` over `-umax[v] ..= umax[v]` as slices (one bounds check per row; the sums
/// vectorise, where a lookup per pixel had stayed scalar: measured 2026-12-07).
#[inline(always)]
fn moments_rows(img: Gray<'_>, x: i32, y: i32, half: i32, umax: &[i32]) -> (i32, i32) {
    let w = img.width as isize;
    let c = y as isize * w + x as isize;
    let row = |o: isize, d: i32| -> &[u8] {
        let start = (c + o - d as isize) as usize;
        &img.data[start..start + 2 * d as usize + 1]
    };
    let mut m10 = 0i32;
    for (p, u) in row(0, half).iter().zip(-half..) {
        m10 += u * *p as i32;
    }
    let mut m01 = 0i32;
    for v in 1..=half {
        let d = umax[v as usize];
        let (plus, minus) = (row(v as isize * w, d), row(-(v as isize) * w, d));
        let mut v_sum = 0i32;
        for ((&p, &m), u) in plus.iter().zip(minus).zip(-d..) {
            let (p, m) = (p as i32, m as i32);
            v_sum += p - m;
            m10 += u * (p + m);
        }
        m01 += v * v_sum;
    }
    (m01, m10)
}

// cv::fastAtan2's coefficients: the minimax atan polynomial times (float)(180/pi), each
// product rounded to float as OpenCV's `static const float` initialisers do. The literals
// are OpenCV's digits, parsed straight to f32 like its `f` literals (no double rounding).
const DEG: f32 = (180.0 / std::f64::consts::PI) as f32;
#[allow(clippy::excessive_precision)]
pub const ATAN_P1: f32 = 0.999_787_841_279_480_7_f32 * DEG;
#[allow(clippy::excessive_precision)]
pub const ATAN_P3: f32 = -0.325_808_397_464_097_5_f32 * DEG;
#[allow(clippy::excessive_precision)]
pub const ATAN_P5: f32 = 0.155_578_651_846_328_1_f32 * DEG;
#[allow(clippy::excessive_precision)]
pub const ATAN_P7: f32 = -0.044_326_555_547_921_28_f32 * DEG;

/// `cv::fastAtan2(y, x)`: degrees in [0, 360), ~0.01 degree accurate, bit-exact with OpenCV.
pub fn fast_atan2(y: f32, x: f32) -> f32 {
    let (ax, ay) = (x.abs(), y.abs());
    // OpenCV adds (float)DBL_EPSILON to the denominator so that (0, 0) gives 0.
    let eps = f64::EPSILON as f32;
    let poly = |c: f32| {
        let c2 = c * c;
        (((ATAN_P7 * c2 + ATAN_P5) * c2 + ATAN_P3) * c2 + ATAN_P1) * c
    };
    let mut a = if ax >= ay {
        poly(ay / (ax + eps))
    } else {
        90.0 - poly(ax / (ay + eps))
    };
    if x < 0.0 {
        a = 180.0 - a;
    }
    if y < 0.0 {
        a = 360.0 - a;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::GrayImage;

    #[test]
    fn umax_for_orb_patch_31() {
        // OpenCV ORB's table for patchSize 31 (halfPatchSize 15).
        assert_eq!(
            circle_extents(15)[..16],
            [15, 15, 15, 15, 14, 14, 14, 13, 13, 12, 11, 10, 9, 8, 6, 3]
        );
    }

    #[test]
    fn umax_is_symmetric() {
        // The disc {(u, v): |u| <= umax[|v|]} is symmetric under transposition.
        for hp in 1..=63u32 {
            let u = circle_extents(hp);
            let inside = |a: i32, b: i32| a.abs() <= u[b.unsigned_abs() as usize];
            for a in -(hp as i32)..=hp as i32 {
                for b in -(hp as i32)..=hp as i32 {
                    assert_eq!(inside(a, b), inside(b, a), "hp {hp} ({a},{b})");
                }
            }
        }
    }

    #[test]
    fn fast_atan2_values() {
        // Values of cv2.fastAtan2 (OpenCV 5.0).
        assert_eq!(fast_atan2(1.0, 2.0), 26.567_104);
        assert_eq!(fast_atan2(0.0, 0.0), 0.0);
        for (y, x) in [(1.0f32, 1.0f32), (-3.0, 2.0), (5.0, -7.0), (-1.0, -1e-3)] {
            let a = fast_atan2(y, x);
            let exact = (y as f64).atan2(x as f64).to_degrees().rem_euclid(360.0);
            assert!((a as f64 - exact).abs() < 0.01, "{y},{x}: {a} vs {exact}");
            assert!((0.0..360.0).contains(&a));
        }
    }

    #[test]
    fn gradient_points_to_the_bright_side() {
        // Brightness increasing with x: the centroid lies at +x, angle ~0.
        let mut img = GrayImage::new(41, 41);
        for y in 0..41 {
            for x in 0..41 {
                img.data[y * 41 + x] = (x * 5) as u8;
            }
        }
        let umax = circle_extents(15);
        let a = ic_angle(&img, 20, 20, &umax);
        assert!(!(0.01..=359.99).contains(&a), "{a}");
        // Transposed: brighter with y, angle 90.
        let t = GrayImage::from_vec(41, 41, (0..41 * 41).map(|i| ((i / 41) * 5) as u8).collect())
            .unwrap();
        assert!((ic_angle(&t, 20, 20, &umax) - 90.0).abs() < 0.01);
    }
}
