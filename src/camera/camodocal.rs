//! camodocal, the camera library VINS-Mono and VINS-Fusion lift their pixels with: its
//! camera files (OpenCV `FileStorage` YAML: `model_type` `PINHOLE`, `MEI` or
//! `KANNALA_BRANDT`) and its `liftProjective`, operation for operation.
//!
//! - `PINHOLE` (`PinholeCamera::liftProjective`): `m = K^-1 p` as `(1/fx) u + (-cx/fx)`,
//!   then 8 steps of `m_u = m_d - d(m_u)` with `d` the k1 k2 p1 p2 distortion, the ray
//!   `(m_u, 1)`. No distortion (all four zero) skips the steps.
//! - `MEI` (`CataCamera::liftProjective`): the same with `gamma1 gamma2 u0 v0` (8 steps too),
//!   then the lift to the sphere, `z = 1 - xi (r2 + 1) / (xi + sqrt(1 + (1 - xi^2) r2))`
//!   (`(1 - r2) / 2` when `xi == 1`).
//! - `KANNALA_BRANDT` (`EquidistantCamera::liftProjective`) becomes OpenCV's `equidistant`
//!   model (same polynomial, k2..k5 as k1..k4). camodocal takes `theta` as the smallest
//!   real, non-negative root of `theta + k2 t^3 + k3 t^5 + k4 t^7 + k5 t^9 = |m|` (each
//!   zero coefficient shortens the polynomial by two degrees from the top, as its `npow`
//!   does), found as eigenvalues of the companion matrix by Eigen; here the same root is
//!   found by Newton's method to full f64 precision ([`smallest_root`]), so the two agree
//!   to a few units in the last place of an f64, and the `cv::Point2f` VINS keeps is the
//!   same (checked against camodocal itself by scripts/lift_parity.py). Then the ray
//!   `(sin t cos phi, sin t sin phi, cos t)`, `phi = atan2(m_y, m_x)`.
//!
//! VINS then keeps `(x / z, y / z)` as a `cv::Point2f`; [`super::CameraModel::undistort`]
//! rounds to f32 the same way.

use nalgebra::{Matrix3, Point2};

use super::{CameraModel, Distortion, Lifting};

/// camodocal's `distortion(p_u)`: the k1 k2 p1 p2 displacement at `p`.
fn distortion(d: &[f64; 14], p: (f64, f64)) -> (f64, f64) {
    let (k1, k2, p1, p2) = (d[0], d[1], d[2], d[3]);
    let mx2 = p.0 * p.0;
    let my2 = p.1 * p.1;
    let mxy = p.0 * p.1;
    let rho2 = mx2 + my2;
    let rad = k1 * rho2 + k2 * rho2 * rho2;
    (
        p.0 * rad + 2.0 * p1 * mxy + p2 * (rho2 + 2.0 * mx2),
        p.1 * rad + 2.0 * p2 * mxy + p1 * (rho2 + 2.0 * my2),
    )
}

/// The recursive inverse of [`distortion`] from the distorted normalised point, `steps`
/// evaluations (camodocal's `n`).
fn undistort_recursive(d: &[f64; 14], md: (f64, f64), steps: usize) -> (f64, f64) {
    if d[..4].iter().all(|&k| k == 0.0) {
        return md;
    }
    let mut mu = md;
    for _ in 0..steps {
        let du = distortion(d, mu);
        mu = (md.0 - du.0, md.1 - du.1);
    }
    mu
}

/// camodocal's `backprojectSymmetric` for `r = |m|`: the smallest real root `t >= 0` of
/// `-r + t + k2 t^3 + k3 t^5 + k4 t^7 + k5 t^9` (`d[0..4]` = k2..k5), with camodocal's
/// `npow`: each zero coefficient takes the top two degrees off. `r` when there is no such
/// root.
///
/// Newton's method from `t = r` converges to it when the polynomial rises on `[0, t]`
/// (checked by a lower bound of its slope there, true for real lenses inside their field
/// of view); otherwise the first sign change is found on a grid and refined by bisection.
pub fn smallest_root(d: &[f64; 14], r: f64) -> f64 {
    let zeros = d[..4].iter().filter(|&&k| k == 0.0).count();
    let npow = 9 - 2 * zeros;
    // Coefficients of t^1, t^3, ... t^npow (camodocal sets coeffs(3..) only up to npow).
    let mut c = [0.0f64; 4];
    for (j, k) in d[..4].iter().enumerate() {
        if 2 * j + 3 <= npow {
            c[j] = *k;
        }
    }
    if npow == 1 || r == 0.0 {
        return r;
    }
    let f = |t: f64| {
        let t2 = t * t;
        -r + t * (1.0 + t2 * (c[0] + t2 * (c[1] + t2 * (c[2] + t2 * c[3]))))
    };
    let df = |t: f64| {
        let t2 = t * t;
        1.0 + t2 * (3.0 * c[0] + t2 * (5.0 * c[1] + t2 * (7.0 * c[2] + t2 * 9.0 * c[3])))
    };
    let mut t = r;
    let mut converged = false;
    for _ in 0..100 {
        let step = f(t) / df(t);
        if !step.is_finite() {
            break;
        }
        let next = t - step;
        if next == t || (next - t).abs() <= 1e-16 * t.abs() {
            t = next;
            converged = true;
            break;
        }
        t = next;
    }
    // The slope on [0, t] is at least 1 + the negative terms at t.
    let slope_floor = |t: f64| {
        let t2 = t * t;
        let mut s = 1.0;
        let mut p = t2;
        for (j, k) in c.iter().enumerate() {
            s += (((2 * j + 3) as f64) * k).min(0.0) * p;
            p *= t2;
        }
        s
    };
    if converged && t >= 0.0 && slope_floor(t) > 0.0 {
        return t;
    }
    first_root_on_grid(&f, r)
}

/// The first sign change of `f` (with `f(0) = -r < 0`) on a grid up to the Cauchy bound of
/// the roots, refined by bisection; `r` when there is none.
fn first_root_on_grid(f: &dyn Fn(f64) -> f64, r: f64) -> f64 {
    let hi = 1.0 + r.abs().max(1.0) * 1e3;
    let n = 1 << 16;
    let mut a = 0.0;
    for i in 1..=n {
        let b = hi * i as f64 / n as f64;
        if f(b) >= 0.0 {
            let (mut lo, mut up) = (a, b);
            for _ in 0..200 {
                let mid = 0.5 * (lo + up);
                if mid <= lo || mid >= up {
                    break;
                }
                if f(mid) >= 0.0 {
                    up = mid;
                } else {
                    lo = mid;
                }
            }
            return up;
        }
        a = b;
    }
    r
}

/// `liftProjective` of pixel `p` for a `PlumbBob` (PINHOLE: k1 k2 p1 p2; a k3 is ignored,
/// as camodocal has none), `Mei` or `Equidistant` (KANNALA_BRANDT) camera, as the
/// projective point `(x/z, y/z)` in f64. Other models fall back to their OpenCV inverse.
pub fn lift(cam: &CameraModel, p: Point2<f64>) -> Point2<f64> {
    let (x, y, z) = lift_ray(cam, p);
    Point2::new(x / z, y / z)
}

/// camodocal's `liftProjective` before the division: the ray `(x, y, z)` it returns (z = 1
/// for PINHOLE; VINS-Mono's `rejectWithF` divides by z itself, after scaling x and y).
pub fn lift_ray(cam: &CameraModel, p: Point2<f64>) -> (f64, f64, f64) {
    let (fx, fy, cx, cy) = (cam.k[(0, 0)], cam.k[(1, 1)], cam.k[(0, 2)], cam.k[(1, 2)]);
    let (ik11, ik13, ik22, ik23) = (1.0 / fx, -cx / fx, 1.0 / fy, -cy / fy);
    let md = (ik11 * p.x + ik13, ik22 * p.y + ik23);
    match cam.model {
        Distortion::PlumbBob => {
            let mu = undistort_recursive(&cam.d, md, 8);
            (mu.0, mu.1, 1.0)
        }
        Distortion::Mei => {
            let (mx, my) = undistort_recursive(&cam.d, md, 8);
            let xi = cam.xi;
            let z = if xi == 1.0 {
                (1.0 - mx * mx - my * my) / 2.0
            } else {
                let rho2 = mx * mx + my * my;
                1.0 - xi * (rho2 + 1.0) / (xi + (1.0 + (1.0 - xi * xi) * rho2).sqrt())
            };
            (mx, my, z)
        }
        Distortion::Equidistant => {
            let r = (md.0 * md.0 + md.1 * md.1).sqrt();
            let phi = if r < 1e-10 { 0.0 } else { md.1.atan2(md.0) };
            let theta = smallest_root(&cam.d, r);
            (
                theta.sin() * phi.cos(),
                theta.sin() * phi.sin(),
                theta.cos(),
            )
        }
        _ => {
            let mut c = cam.clone();
            c.lifting = Lifting::Opencv;
            let q = c.undistort(p).unwrap_or(Point2::new(f64::NAN, f64::NAN));
            (q.x, q.y, 1.0)
        }
    }
}

/// A camodocal camera file's text (what VINS's `cam0_calib` names). Errors name the key.
pub fn from_yaml(text: &str) -> Result<CameraModel, String> {
    let root = parse_opencv_yaml(text)?;
    let get = |section: Option<&str>, key: &str| -> Result<f64, String> {
        let node = match section {
            Some(s) => root.get(s).ok_or_else(|| format!("no `{s}` section"))?,
            None => &root,
        };
        let name = section.map_or(key.to_string(), |s| format!("{s}.{key}"));
        let v = node
            .get(key)
            .ok_or_else(|| format!("no `{name}`"))?
            .as_f64()
            .ok_or_else(|| format!("`{name}` is not a number"))?;
        if !v.is_finite() {
            return Err(format!("`{name}` is {v}"));
        }
        Ok(v)
    };
    let model = root
        .get("model_type")
        .and_then(|v| v.as_str())
        .ok_or("no `model_type` (PINHOLE, MEI or KANNALA_BRANDT)")?;
    let size = |key: &str| -> Result<u32, String> {
        let v = get(None, key)?;
        if v < 1.0 || v.fract() != 0.0 || v > 65535.0 {
            return Err(format!("`{key}` is {v}"));
        }
        Ok(v as u32)
    };
    let (w, h) = (size("image_width")?, size("image_height")?);
    let pp = Some("projection_parameters");
    // PINHOLE's and MEI's k1 k2 p1 p2.
    let radtan = || -> Result<[f64; 4], String> {
        let dp = Some("distortion_parameters");
        Ok([
            get(dp, "k1")?,
            get(dp, "k2")?,
            get(dp, "p1")?,
            get(dp, "p2")?,
        ])
    };
    let (fx, fy, cx, cy, d, xi, dist) = match model {
        "PINHOLE" => (
            get(pp, "fx")?,
            get(pp, "fy")?,
            get(pp, "cx")?,
            get(pp, "cy")?,
            radtan()?,
            0.0,
            Distortion::PlumbBob,
        ),
        "MEI" => (
            get(pp, "gamma1")?,
            get(pp, "gamma2")?,
            get(pp, "u0")?,
            get(pp, "v0")?,
            radtan()?,
            get(Some("mirror_parameters"), "xi")?,
            Distortion::Mei,
        ),
        "KANNALA_BRANDT" => (
            get(pp, "mu")?,
            get(pp, "mv")?,
            get(pp, "u0")?,
            get(pp, "v0")?,
            [
                get(pp, "k2")?,
                get(pp, "k3")?,
                get(pp, "k4")?,
                get(pp, "k5")?,
            ],
            0.0,
            Distortion::Equidistant,
        ),
        other => {
            return Err(format!(
                "model_type {other:?} is not PINHOLE, MEI or KANNALA_BRANDT"
            ))
        }
    };
    if fx == 0.0 || fy == 0.0 {
        return Err(format!(
            "focal length is zero (projection_parameters: {fx}, {fy})"
        ));
    }
    let mut coeffs = [0.0; 14];
    coeffs[..4].copy_from_slice(&d);
    Ok(CameraModel {
        width: w,
        height: h,
        k: Matrix3::new(fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0),
        model: dist,
        d: coeffs,
        xi,
        lifting: Lifting::Camodocal,
    })
}

/// An OpenCV `FileStorage` YAML text as a YAML value: the `%YAML:1.0` line (not YAML 1.2)
/// dropped and `!!opencv-matrix` tags taken off.
pub fn parse_opencv_yaml(text: &str) -> Result<serde_yaml::Value, String> {
    let body: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('%'))
        .flat_map(|l| [l, "\n"])
        .collect();
    let v: serde_yaml::Value = serde_yaml::from_str(&body).map_err(|e| e.to_string())?;
    fn untag(v: serde_yaml::Value) -> serde_yaml::Value {
        use serde_yaml::Value;
        match v {
            Value::Tagged(t) => untag(t.value),
            Value::Mapping(m) => {
                Value::Mapping(m.into_iter().map(|(k, v)| (k, untag(v))).collect())
            }
            Value::Sequence(s) => Value::Sequence(s.into_iter().map(untag).collect()),
            other => other,
        }
    }
    let v = untag(v);
    if !v.is_mapping() {
        return Err("not a YAML mapping".into());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PINHOLE: &str = "%YAML:1.0\n---\nmodel_type: PINHOLE\ncamera_name: camera\nimage_width: 752\nimage_height: 480\ndistortion_parameters:\n   k1: -2.917e-01\n   k2: 8.228e-02\n   p1: 5.333e-05\n   p2: -1.578e-04\nprojection_parameters:\n   fx: 4.616e+02\n   fy: 4.603e+02\n   cx: 3.630e+02\n   cy: 2.481e+02\n";

    #[test]
    fn pinhole_file_and_its_lift_reprojects() {
        let c = from_yaml(PINHOLE).unwrap();
        assert_eq!(
            (c.width, c.height, c.model),
            (752, 480, Distortion::PlumbBob)
        );
        assert_eq!(c.d[..4], [-2.917e-01, 8.228e-02, 5.333e-05, -1.578e-04]);
        // Distort the lifted point forward again: close to the pixel (8 recursive steps
        // leave a residue at the corners; that residue is VINS's, kept on purpose).
        for (u, v) in [(363.0, 248.1), (100.0, 60.0), (700.0, 440.0)] {
            let m = lift(&c, Point2::new(u, v));
            let d = distortion(&c.d, (m.x, m.y));
            let (pu, pv) = (461.6 * (m.x + d.0) + 363.0, 460.3 * (m.y + d.1) + 248.1);
            assert!(
                (pu - u).abs() < 0.5 && (pv - v).abs() < 0.5,
                "{u},{v}: {pu},{pv}"
            );
        }
        // Near the centre the recursion has converged.
        let m = lift(&c, Point2::new(380.0, 260.0));
        let d = distortion(&c.d, (m.x, m.y));
        assert!((461.6 * (m.x + d.0) + 363.0 - 380.0).abs() < 1e-9);
    }

    #[test]
    fn mei_and_kannala_brandt_files() {
        let mei = "model_type: MEI\ncamera_name: c\nimage_width: 640\nimage_height: 480\nmirror_parameters:\n  xi: 1.5\ndistortion_parameters:\n  k1: 0.0\n  k2: 0.0\n  p1: 0.0\n  p2: 0.0\nprojection_parameters:\n  gamma1: 800.0\n  gamma2: 800.0\n  u0: 320.0\n  v0: 240.0\n";
        let c = from_yaml(mei).unwrap();
        assert_eq!((c.model, c.xi), (Distortion::Mei, 1.5));
        // The unified model: a ray (X, Y, Z) projects to m = (X, Y) / (Z + xi |P|).
        let (x, y, z) = (0.3f64, -0.2f64, 1.0f64);
        let n = (x * x + y * y + z * z).sqrt();
        let (mx, my) = (x / (z + 1.5 * n), y / (z + 1.5 * n));
        let q = lift(&c, Point2::new(800.0 * mx + 320.0, 800.0 * my + 240.0));
        assert!(
            (q.x - x / z).abs() < 1e-12 && (q.y - y / z).abs() < 1e-12,
            "{q:?}"
        );
        let kb = "model_type: KANNALA_BRANDT\nimage_width: 640\nimage_height: 480\nprojection_parameters:\n  k2: 0.01\n  k3: 0.0\n  k4: 0.0\n  k5: 0.0\n  mu: 300.0\n  mv: 300.0\n  u0: 320.0\n  v0: 240.0\n";
        let c = from_yaml(kb).unwrap();
        assert_eq!((c.model, c.d[0]), (Distortion::Equidistant, 0.01));
    }

    #[test]
    fn kannala_brandt_root_inverts_the_polynomial() {
        // k2..k5 of a real fisheye lens (T265-like): theta -> r and back.
        let mut d = [0.0; 14];
        d[..4].copy_from_slice(&[-0.00931863, 0.0428543, -0.0401651, 0.00760284]);
        let r_of = |t: f64| {
            let t2 = t * t;
            t * (1.0 + t2 * (d[0] + t2 * (d[1] + t2 * (d[2] + t2 * d[3]))))
        };
        for i in 0..=150 {
            let theta = 1.5 * i as f64 / 150.0;
            let got = smallest_root(&d, r_of(theta));
            assert!((got - theta).abs() < 1e-13, "theta {theta}: {got}");
        }
        // camodocal's npow: one zero coefficient takes the top two degrees off, so k5 is
        // not used when k3 is zero.
        let mut gap = d;
        gap[1] = 0.0;
        for r in [0.3, 0.6, 0.9] {
            let t = smallest_root(&gap, r);
            let (t3, t7) = (t.powi(3), t.powi(7));
            assert!((t + d[0] * t3 + d[2] * t7 - r).abs() < 1e-14, "{r}: {t}");
            assert!((t + d[0] * t3 + d[2] * t7 + d[3] * t.powi(9) - r).abs() > 1e-9);
        }
        // No real non-negative root (t - 0.5 t^3 peaks at 0.544): r itself, as camodocal.
        let mut bump = [0.0; 14];
        bump[0] = -0.5;
        assert_eq!(smallest_root(&bump, 0.6), 0.6);
        // Below the peak the first root, where the slope test sends it to the grid.
        let t = smallest_root(&bump, 0.54);
        assert!(
            (t - 0.5 * t * t * t - 0.54).abs() < 1e-12 && t < 0.8165,
            "{t}"
        );
    }

    #[test]
    fn bad_files_name_the_key() {
        let e = |t: &str| from_yaml(t).unwrap_err();
        assert!(
            e("model_type: SCARAMUZZA\nimage_width: 1\nimage_height: 1\n").contains("SCARAMUZZA")
        );
        assert!(e(&PINHOLE.replace("fx: 4.616e+02", "fx: 0")).contains("focal length"));
        assert!(
            e(&PINHOLE.replace("fx: 4.616e+02", "fx: .nan")).contains("projection_parameters.fx")
        );
        assert!(e(&PINHOLE.replace("   k2: 8.228e-02\n", "")).contains("distortion_parameters.k2"));
        assert!(e(&PINHOLE.replace("image_width: 752", "image_width: -3")).contains("image_width"));
        assert!(e("model_type: [").contains("line") || e("model_type: [").contains("EOF"));
        assert!(e("image_width: 3\n").contains("model_type"));
    }
}
