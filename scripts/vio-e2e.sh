#!/usr/bin/env bash
# The real VINS-Fusion on one sequence, twice: on its own tracker and fed only by
# gpu_features; both trajectories scored against the ground truth (evo). See
# docs/tracking.md ("Inside the estimator") and scripts/vio_e2e.py.
#
#   scripts/vio-e2e.sh --bag DIR --gt FILE --vins-config FILE --out DIR [--stereo]
#                      [--repeats N] [--backend cpu|cuda|auto] [--set KEY=VALUE]... [--only own|gpu_features]
#
# --bag: a rosbag2 (MCAP or sqlite3) with the config's imu_topic and image0_topic;
# --gt: the body (IMU) trajectory in TUM format (t x y z qx qy qz qw).
# Sets up what it needs on first use (scripts/setup-vio.sh: VINS-Fusion, a venv with evo)
# and builds gpu_features (release). Writes OUT/summary.json and OUT/summary.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
eval "$(bash "$ROOT/scripts/setup-vio.sh")"
(cd "$ROOT" && cargo build --release --quiet --bin gpu_features)
# ROS 1's environment for roscore / rosbag / vins_node (its setup.bash is not set -u clean).
set +u
# shellcheck disable=SC1090
source "$VINS_SETUP"
set -u
exec "$VIO_PY" "$ROOT/scripts/vio_e2e.py" --vins-node "$VINS_NODE" \
  --gpu-features "$ROOT/target/release/gpu_features" --rosbags-convert "$ROSBAGS_CONVERT" \
  --harness "$VINS_HARNESS" "$@"
