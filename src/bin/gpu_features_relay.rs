//! Transport floor for the node benchmark; see `gpu_features::ros::load::relay`.
fn main() {
    std::process::exit(gpu_features::ros::load::relay::main());
}
