//! Camera models of `sensor_msgs/CameraInfo` and the undistortion of tracked pixels to
//! normalised image coordinates, exactly as OpenCV computes it:
//!
//! - `plumb_bob` (k1, k2, p1, p2[, k3]) and `rational_polynomial` (k1, k2, p1, p2, k3, k4,
//!   k5, k6): `cv::undistortPoints(src, dst, K, D)`: 5 fixed-point iterations of
//!   `x = (x0 - delta(x)) * icdist(x)` in f64, OpenCV's operation order, its fallback to the
//!   distorted point when `icdist < 0`.
//! - `equidistant` (k1..k4, the Kannala-Brandt fisheye of `cv::fisheye`):
//!   `cv::fisheye::undistortPoints(src, dst, K, D)`: Newton's method on
//!   `theta (1 + k1 t^2 + k2 t^4 + k3 t^6 + k4 t^8) = theta_d`, at most 10 steps or a step
//!   below 1e-8, `theta_d` clipped to [-pi/2, pi/2]; a point that does not converge (or
//!   flips sign) has no undistorted position.
//!
//! - camodocal's `liftProjective` ([`camodocal`]), what VINS-Mono / VINS-Fusion compute,
//!   where [`CameraModel::lifting`] asks for it (the tracker's `track.lifting`), and always
//!   for camodocal's `MEI` model.
//!
//! The intrinsics are an nalgebra `Matrix3` (the design card's geometry crate).
//! [`CameraModel::from_camera_info`] validates what a `CameraInfo` carries (sizes, finite
//! values, non-zero focal lengths, a known model) and says what is wrong.
//!
//! May import: `config`.

pub mod camodocal;
pub mod vins;

use nalgebra::{Matrix3, Point2};

pub use crate::config::Lifting;

/// The distortion models of `sensor_msgs/CameraInfo.distortion_model`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distortion {
    PlumbBob,
    RationalPolynomial,
    Equidistant,
    /// camodocal's unified (Mei) omnidirectional model: mirror `xi`, then k1 k2 p1 p2 on the
    /// normalised plane (VINS's `MEI` camera files; no `CameraInfo` name).
    Mei,
}

impl Distortion {
    pub fn parse(name: &str) -> Option<Distortion> {
        match name {
            "plumb_bob" => Some(Distortion::PlumbBob),
            "rational_polynomial" => Some(Distortion::RationalPolynomial),
            "equidistant" | "fisheye" => Some(Distortion::Equidistant),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Distortion::PlumbBob => "plumb_bob",
            Distortion::RationalPolynomial => "rational_polynomial",
            Distortion::Equidistant => "equidistant",
            Distortion::Mei => "mei",
        }
    }
}

/// A calibrated camera: image size, intrinsics `K` and distortion coefficients.
#[derive(Clone, Debug, PartialEq)]
pub struct CameraModel {
    pub width: u32,
    pub height: u32,
    pub k: Matrix3<f64>,
    pub model: Distortion,
    /// OpenCV's 14 coefficients for the polynomial models (k1 k2 p1 p2 k3 k4 k5 k6, then
    /// zeros); k1..k4 for `equidistant`; k1 k2 p1 p2 for `Mei`.
    pub d: [f64; 14],
    /// The mirror parameter of `Mei` (0 otherwise).
    pub xi: f64,
    /// How [`CameraModel::undistort`] lifts a pixel (`Mei` is always camodocal's).
    pub lifting: Lifting,
}

impl CameraModel {
    /// From the fields of a `sensor_msgs/CameraInfo`: `k` row-major 3x3, `d` the
    /// coefficients. Errors name what is wrong; the caller keeps tracking in pixels.
    pub fn from_camera_info(
        width: u32,
        height: u32,
        model: &str,
        k: &[f64],
        d: &[f64],
    ) -> Result<CameraModel, String> {
        let dist = Distortion::parse(model).ok_or_else(|| {
            format!(
                "distortion_model {model:?} is not plumb_bob, rational_polynomial or equidistant"
            )
        })?;
        if k.len() != 9 {
            return Err(format!("k has {} values, not 9", k.len()));
        }
        if let Some(v) = k.iter().chain(d).find(|v| !v.is_finite()) {
            return Err(format!("camera_info holds a non-finite value ({v})"));
        }
        let (fx, fy) = (k[0], k[4]);
        if fx == 0.0 || fy == 0.0 {
            return Err(format!("focal length is zero (fx {fx}, fy {fy})"));
        }
        if width == 0 || height == 0 {
            return Err(format!("image size {width}x{height}"));
        }
        let need = match dist {
            Distortion::PlumbBob => 4..=5,
            Distortion::RationalPolynomial => 8..=8,
            Distortion::Equidistant => 4..=4,
            Distortion::Mei => {
                return Err("the MEI model comes from camodocal camera files only".into())
            }
        };
        // An empty D means no distortion, as image_geometry reads it.
        if !d.is_empty() && !need.contains(&d.len()) {
            return Err(format!(
                "{} takes {} coefficients, camera_info has {}",
                dist.name(),
                if need.start() == need.end() {
                    need.start().to_string()
                } else {
                    format!("{} or {}", need.start(), need.end())
                },
                d.len()
            ));
        }
        let mut coeffs = [0.0; 14];
        coeffs[..d.len()].copy_from_slice(d);
        Ok(CameraModel {
            width,
            height,
            k: Matrix3::from_row_slice(k),
            model: dist,
            d: coeffs,
            xi: 0.0,
            lifting: Lifting::Opencv,
        })
    }

    /// The same camera lifted the other way (`Mei` keeps camodocal's lifting).
    pub fn lifted(mut self, lifting: Lifting) -> CameraModel {
        if self.model != Distortion::Mei {
            self.lifting = lifting;
        }
        self
    }

    /// Whether pixels are lifted as camodocal does (f32 results, as VINS keeps them).
    pub fn lifts_as_camodocal(&self) -> bool {
        self.lifting == Lifting::Camodocal
            && matches!(
                self.model,
                Distortion::PlumbBob | Distortion::Mei | Distortion::Equidistant
            )
    }

    /// The normalised coordinates of pixel `p` (`cv::undistortPoints` or
    /// `cv::fisheye::undistortPoints` with no R and no P); `None` where the fisheye solve
    /// does not converge.
    pub fn undistort(&self, p: Point2<f64>) -> Option<Point2<f64>> {
        if self.lifts_as_camodocal() {
            return Some(as_f32(camodocal::lift(self, p)));
        }
        match self.model {
            Distortion::Mei => Some(as_f32(camodocal::lift(self, p))),
            Distortion::PlumbBob | Distortion::RationalPolynomial => Some(self.undistort_poly(p)),
            Distortion::Equidistant => self.undistort_fisheye(p),
        }
    }

    fn undistort_poly(&self, p: Point2<f64>) -> Point2<f64> {
        let k = &self.d;
        let (fx, fy, cx, cy) = (
            self.k[(0, 0)],
            self.k[(1, 1)],
            self.k[(0, 2)],
            self.k[(1, 2)],
        );
        let (ifx, ify) = (1.0 / fx, 1.0 / fy);
        let (u, v) = (p.x, p.y);
        let mut x = (u - cx) * ifx;
        let mut y = (v - cy) * ify;
        let (x0, y0) = (x, y);
        for _ in 0..5 {
            let r2 = x * x + y * y;
            let icdist = (1.0 + ((k[7] * r2 + k[6]) * r2 + k[5]) * r2)
                / (1.0 + ((k[4] * r2 + k[1]) * r2 + k[0]) * r2);
            if icdist < 0.0 {
                x = (u - cx) * ifx;
                y = (v - cy) * ify;
                break;
            }
            let dx = 2.0 * k[2] * x * y + k[3] * (r2 + 2.0 * x * x) + k[8] * r2 + k[9] * r2 * r2;
            let dy = k[2] * (r2 + 2.0 * y * y) + 2.0 * k[3] * x * y + k[10] * r2 + k[11] * r2 * r2;
            x = (x0 - dx) * icdist;
            y = (y0 - dy) * icdist;
        }
        Point2::new(x, y)
    }

    fn undistort_fisheye(&self, p: Point2<f64>) -> Option<Point2<f64>> {
        let k = &self.d;
        let (fx, fy, cx, cy) = (
            self.k[(0, 0)],
            self.k[(1, 1)],
            self.k[(0, 2)],
            self.k[(1, 2)],
        );
        let pw = ((p.x - cx) / fx, (p.y - cy) / fy);
        let half_pi = std::f64::consts::FRAC_PI_2;
        let theta_d = (pw.0 * pw.0 + pw.1 * pw.1).sqrt().clamp(-half_pi, half_pi);
        let eps = 1e-8;
        let mut converged = false;
        let mut theta = theta_d;
        let mut scale = 0.0;
        if theta_d.abs() > eps {
            for _ in 0..10 {
                let t2 = theta * theta;
                let (t4, t6, t8) = (t2 * t2, t2 * t2 * t2, t2 * t2 * t2 * t2);
                let (a, b, c, d) = (k[0] * t2, k[1] * t4, k[2] * t6, k[3] * t8);
                let fix = (theta * (1.0 + a + b + c + d) - theta_d)
                    / (1.0 + 3.0 * a + 5.0 * b + 7.0 * c + 9.0 * d);
                theta -= fix;
                if fix.abs() < eps {
                    converged = true;
                    break;
                }
            }
            scale = theta.tan() / theta_d;
        } else {
            converged = true;
        }
        let flipped = (theta_d < 0.0 && theta > 0.0) || (theta_d > 0.0 && theta < 0.0);
        (converged && !flipped).then(|| Point2::new(pw.0 * scale, pw.1 * scale))
    }
}

/// The normalised coordinates as VINS keeps them when lifting as camodocal
/// (`cv::Point2f`): each rounded to f32.
pub fn as_f32(p: Point2<f64>) -> Point2<f64> {
    Point2::new(p.x as f32 as f64, p.y as f32 as f64)
}

/// A `camera_calibration_parsers` YAML file (what `camera_calibration` writes and
/// `camera_info_manager` reads): `image_width`, `image_height`, `camera_matrix.data`,
/// `distortion_model`, `distortion_coefficients.data`.
pub fn from_calibration_yaml(text: &str) -> Result<CameraModel, String> {
    #[derive(serde::Deserialize)]
    struct Mat {
        data: Vec<f64>,
    }
    #[derive(serde::Deserialize)]
    struct Calib {
        image_width: u32,
        image_height: u32,
        camera_matrix: Mat,
        distortion_model: String,
        distortion_coefficients: Mat,
    }
    let c: Calib = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    CameraModel::from_camera_info(
        c.image_width,
        c.image_height,
        &c.distortion_model,
        &c.camera_matrix.data,
        &c.distortion_coefficients.data,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: [f64; 9] = [458.654, 0.0, 367.215, 0.0, 457.296, 248.375, 0.0, 0.0, 1.0];

    #[test]
    fn bad_camera_info_is_named() {
        let e = |m: &str, k: &[f64], d: &[f64]| {
            CameraModel::from_camera_info(752, 480, m, k, d).unwrap_err()
        };
        assert!(e("plumb_bob", &K[..8], &[]).contains("9"));
        assert!(e("plumb_bob", &K, &[0.1, f64::NAN, 0.0, 0.0]).contains("non-finite"));
        let mut k0 = K;
        k0[0] = 0.0;
        assert!(e("plumb_bob", &k0, &[]).contains("focal length"));
        assert!(e("pinhole_magic", &K, &[]).contains("distortion_model"));
        assert!(e("equidistant", &K, &[0.1, 0.2]).contains("4 coefficients"));
        assert!(CameraModel::from_camera_info(0, 480, "plumb_bob", &K, &[]).is_err());
    }

    #[test]
    fn no_distortion_is_the_pinhole_inverse() {
        let c = CameraModel::from_camera_info(752, 480, "plumb_bob", &K, &[0.0; 5]).unwrap();
        let n = c
            .undistort(Point2::new(367.215 + 458.654, 248.375))
            .unwrap();
        assert!((n.x - 1.0).abs() < 1e-12 && n.y.abs() < 1e-12);
        let f = CameraModel::from_camera_info(752, 480, "equidistant", &K, &[0.0; 4]).unwrap();
        let n = f.undistort(Point2::new(367.215, 248.375)).unwrap();
        assert_eq!((n.x, n.y), (0.0, 0.0));
    }
}
