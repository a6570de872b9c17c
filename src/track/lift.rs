//! Step 6 of a frame: a track's normalised coordinates through the camera model and its
//! velocity against the previous frame's, as VINS computes them when the camera lifts as
//! camodocal (`CameraModel::lifts_as_camodocal`: f32 values, VINS's `cv::Point2f`).

use nalgebra::Point2;

use crate::camera::CameraModel;

/// The normalised coordinates of pixel `p`; NaN without a camera or where it has no inverse.
pub(super) fn normalised(camera: Option<&CameraModel>, p: (f32, f32)) -> (f64, f64) {
    camera
        .and_then(|c| c.undistort(Point2::new(p.0 as f64, p.1 as f64)))
        .map_or((f64::NAN, f64::NAN), |q| (q.x, q.y))
}

/// The velocity on the normalised plane from the previous frame's position: with
/// camodocal's lifting as VINS's `ptsVelocity` computes it (f32 difference, divided in
/// f64, kept as f32), else in f64.
pub(super) fn velocity(cur: (f64, f64), prev: (f64, f64), dt: f64, f32_lift: bool) -> (f64, f64) {
    if f32_lift {
        let d = |a: f64, b: f64| ((a as f32 - b as f32) as f64 / dt) as f32 as f64;
        (d(cur.0, prev.0), d(cur.1, prev.1))
    } else {
        ((cur.0 - prev.0) / dt, (cur.1 - prev.1) / dt)
    }
}
