#!/usr/bin/env bash
# Idempotent: everything the VINS-Fusion end-to-end needs, installed by the project itself.
#  - the real VINS-Fusion (ROS 1, Debian 12's own packages) from ../shared/vins-fusion into
#    a cache outside the clone, $GF_CACHE/vins-ws (default ~/.cache/gpu_features; its
#    setup.sh: apt packages + catkin_make, ~7 min the first time, then a check of its
#    sources' stamp), so a clean clone reuses it;
#  - the harnesses that run VINS's own FeatureTracker (scripts/vins/track_harness.cpp) and
#    camodocal's liftProjective (scripts/vins/lift_harness.cpp), linked against that build,
#    into target/vins-harness;
#  - the venv of the VIO scripts (scripts/setup-vio-python.sh: target/py-vio, with evo).
# Prints shell assignments: VINS_SETUP, VINS_NODE, VINS_HARNESS, VIO_PY, ROSBAGS_CONVERT.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=${GF_SHARED:-$ROOT/../shared}
[ -x "$SHARED/vins-fusion/setup.sh" ] || { echo "setup-vio: $SHARED/vins-fusion/setup.sh not found (set GF_SHARED)" >&2; exit 1; }
WS=${GF_CACHE:-$HOME/.cache/gpu_features}/vins-ws
SETUP=$(bash "$SHARED/vins-fusion/setup.sh" "$WS")
VIO_PY=$(bash "$ROOT/scripts/setup-vio-python.sh")
H=$ROOT/target/vins-harness
SRC=$WS/src/VINS-Fusion
stamp=$(cat "$ROOT/scripts/vins/track_harness.cpp" "$ROOT/scripts/vins/lift_harness.cpp" "$WS/.vins-stamp" | sha256sum | cut -c1-16)
if [ "$(cat "$H/.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -x "$H/track_harness" ] || [ ! -x "$H/lift_harness" ]; then
  mkdir -p "$H"
  g++ -O2 -std=c++17 -o "$H/track_harness" "$ROOT/scripts/vins/track_harness.cpp" \
    -I"$SRC/vins_estimator/src" -I"$SRC/camera_models/include" -I/usr/include/opencv4 -I/usr/include/eigen3 \
    -L"$WS/devel/lib" -Wl,-rpath,"$WS/devel/lib" -lvins_lib -lcamera_models \
    $(pkg-config --libs opencv4) -lroscpp -lrosconsole -lroscpp_serialization -lrostime -lboost_system >&2
  g++ -O2 -std=c++17 -o "$H/lift_harness" "$ROOT/scripts/vins/lift_harness.cpp" \
    -I"$SRC/camera_models/include" -I/usr/include/opencv4 -I/usr/include/eigen3 \
    -L"$WS/devel/lib" -Wl,-rpath,"$WS/devel/lib" -lcamera_models $(pkg-config --libs opencv4) -lboost_system >&2
  echo "$stamp" > "$H/.stamp"
fi
echo "VINS_SETUP=$SETUP"
echo "VINS_WS=$WS"
echo "VINS_NODE=$WS/devel/lib/vins/vins_node"
echo "VINS_HARNESS=$H/track_harness"
echo "VINS_LIFT_HARNESS=$H/lift_harness"
echo "VIO_PY=$VIO_PY"
echo "ROSBAGS_CONVERT=$(dirname "$VIO_PY")/rosbags-convert"
