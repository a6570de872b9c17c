//! Feature tracks for visual-inertial odometry: VINS-Mono / VINS-Fusion's `feature_tracker`
//! rebuilt on the OpenCV-exact CPU reference (`cpu::lk`, `cpu::gftt`).
//!
//! * [`mask`]: VINS's mask around kept tracks (OpenCV's filled circle).

pub mod mask;
