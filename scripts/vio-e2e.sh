#!/usr/bin/env bash
# A real estimator on one sequence, twice: on its own front-end and fed only by
# gpu_features; both trajectories scored against the ground truth (evo).
#
# VINS-Fusion (the default, --estimator vins-fusion): docs/tracking.md ("Inside the
# estimator") and scripts/vio_e2e.py.
#   scripts/vio-e2e.sh --bag DIR --gt FILE --vins-config FILE --out DIR [--stereo]
#                      [--repeats N] [--backend cpu|cuda|auto] [--set KEY=VALUE]... [--only own|gpu_features]
#
# ORB-SLAM3 v1.0: docs/slam.md and scripts/orb-slam3/e2e.py.
#   scripts/vio-e2e.sh --estimator orb-slam3 --mode mono|mono-inertial|stereo-inertial --bag DIR
#                      --gt FILE --orb-settings FILE [--vocabulary FILE] --out DIR [--repeats N]
#                      [--backend cpu|cuda] [--image-topic T] [--image1-topic T] [--imu-topic T]
#   (--vocabulary: the real ORBvoc.txt; without it, the one scripts/setup-orb-slam3.sh trains)
#
# --bag: a rosbag2 (MCAP or sqlite3) with the config's imu_topic and image0_topic;
# --gt: the body (IMU) trajectory in TUM format (t x y z qx qy qz qw).
# Sets up what it needs on first use (scripts/setup-vio.sh: VINS-Fusion, a venv with evo)
# and builds gpu_features (release). Writes OUT/summary.json and OUT/summary.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ESTIMATOR=vins-fusion
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --estimator) ESTIMATOR=${2:?--estimator needs vins-fusion or orb-slam3}; shift 2 ;;
    --estimator=*) ESTIMATOR=${1#*=}; shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
set -- "${ARGS[@]+"${ARGS[@]}"}"
case "$ESTIMATOR" in
  vins-fusion) ;;
  orb-slam3)
    eval "$(bash "$ROOT/scripts/setup-orb-slam3.sh")"
    (cd "$ROOT" && cargo build --release --quiet --bin gpu_features)
    VOC=()
    for a in "$@"; do [ "$a" = --vocabulary ] && VOC=(x); done
    [ ${#VOC[@]} -eq 0 ] && set -- "$@" --vocabulary "$ORB_VOCABULARY"
    exec "$VIO_PY" "$ROOT/scripts/orb-slam3/e2e.py" --tools "$ORB_TOOLS" --fma "$ORB_FMA" \
      --gpu-features "$ROOT/target/release/gpu_features" "$@" ;;
  *) echo "vio-e2e: unknown --estimator $ESTIMATOR (vins-fusion or orb-slam3)" >&2; exit 2 ;;
esac
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
