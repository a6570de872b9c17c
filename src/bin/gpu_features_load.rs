//! Load generator for a running gpu_features_node; see `gpu_features::ros::load`.
fn main() {
    std::process::exit(gpu_features::ros::load::main());
}
