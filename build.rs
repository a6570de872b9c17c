//! Link fixes for the ROS 2 node built against the PyPI ROS 2 wheels (scripts/setup-ros.sh).
//!
//! Does nothing unless BOTH hold:
//! - the `ros` feature is on (CARGO_FEATURE_ROS), and
//! - an AMENT_PREFIX_PATH entry is a pip venv prepared by scripts/setup-ros.sh (it holds the
//!   marker file `.gpu_features-pip-ros-prefix`; other entries, such as a colcon install
//!   space sourced before a rebuild, may come first).
//!
//! So the default build, and a node built in a sourced /opt/ros workspace (colcon), link as
//! usual. For the pip prefix:
//! 1. The wheels' librcl depends on the Python message libraries, which need CPython symbols;
//!    a Rust binary has none, so libpython is linked in explicitly (`--no-as-needed`, since
//!    no Rust code references it).
//! 2. The wheels' own RUNPATHs point at folders that do not exist after pip installs them, so
//!    the binary gets a DT_RPATH (which, unlike RUNPATH, also serves its dependencies) to
//!    <venv>/lib, every site-packages/ros_*.libs folder and the lib folder of every prefix
//!    scripts/setup-ros-msgs.sh built (foxglove_msgs): it runs without LD_LIBRARY_PATH.
use std::env;
use std::fs;
use std::path::Path;

const MARKER: &str = ".gpu_features-pip-ros-prefix";
const MSGS_MARKER: &str = ".gpu_features-ros-msgs-prefix";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=AMENT_PREFIX_PATH");
    println!("cargo:rerun-if-env-changed=GPU_FEATURES_PYLIB");
    if env::var_os("CARGO_FEATURE_ROS").is_none() {
        return;
    }
    let prefixes = env::var("AMENT_PREFIX_PATH").unwrap_or_default();
    let mut venv = None;
    for p in prefixes.split(':').filter(|p| !p.is_empty()) {
        let p = Path::new(p);
        if p.join(MARKER).exists() {
            println!("cargo:rerun-if-changed={}", p.join(MARKER).display());
            venv = Some(p);
            break;
        }
    }
    let Some(prefix) = venv else {
        return; // a real ROS install: nothing to fix
    };

    // Every linked target (the node, and unit tests built with --features ros) needs these.
    let pylib = env::var("GPU_FEATURES_PYLIB").unwrap_or_else(|_| "libpython3.11.so.1.0".into());
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-l:{pylib}");
    println!("cargo:rustc-link-arg=-Wl,--as-needed");

    let lib = prefix.join("lib");
    let mut rpath = vec![lib.display().to_string()];
    for entry in fs::read_dir(&lib).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("python3") {
            continue;
        }
        let site = entry.path().join("site-packages");
        let mut libs: Vec<String> = fs::read_dir(&site)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("ros_") && n.ends_with(".libs")
            })
            .map(|e| e.path().display().to_string())
            .collect();
        libs.sort();
        rpath.extend(libs);
    }
    // Message packages scripts/setup-ros-msgs.sh built beside the wheels (foxglove_msgs).
    for p in prefixes.split(':').filter(|p| !p.is_empty()) {
        let p = Path::new(p);
        if p.join(MSGS_MARKER).exists() {
            println!("cargo:rerun-if-changed={}", p.join(MSGS_MARKER).display());
            rpath.push(p.join("lib").display().to_string());
        }
    }
    println!(
        "cargo:rustc-link-arg=-Wl,--disable-new-dtags,-rpath,{}",
        rpath.join(":")
    );
}
