#!/usr/bin/env bash
# The ROS 2 node's code, type-checked and linted for the Jetson's CPU (aarch64) on this x86_64
# machine: r2r's build scripts generate its bindings with bindgen for the aarch64 target
# (libclang with Debian's aarch64 sysroot, /usr/aarch64-linux-gnu) from the PyPI ROS 2
# prefix's headers, which are the same on every architecture; nothing is linked (the wheels'
# libraries are x86_64, so an aarch64 node binary needs an aarch64 ROS 2: build it on the
# Jetson, docs/jetson.md). Plain cargo, not cargo-zigbuild: zig's sysroot lacks the compiler
# headers (stdbool.h) bindgen needs. In the ROS build's target dir (target/ros): the
# build scripts' host tools (bindgen, the proc macros) are shared with it, and the aarch64
# output lies apart under target/ros/aarch64-unknown-linux-gnu.
# Called by scripts/test-aarch64.sh: this is its clippy for the target (the library and CLI
# with the node's code).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
eval "$(scripts/setup-ros.sh --env)"
eval "$(bash scripts/setup-aarch64.sh --env)"
export CARGO_TARGET_DIR=${GF_ROS_TARGET:-$ROOT/target/ros}
export BINDGEN_EXTRA_CLANG_ARGS_aarch64_unknown_linux_gnu="--sysroot=$GF_AARCH64_SYSROOT"
cargo clippy --release --target aarch64-unknown-linux-gnu --features ros --lib --bins -- -D warnings
echo "[check-ros-aarch64] the node's code (--features ros) checks and lints clean for aarch64"
