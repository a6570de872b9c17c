//! The ROS 2 node; see `gpu_features::ros` and docs/ros.md.
fn main() {
    std::process::exit(gpu_features::ros::main());
}
