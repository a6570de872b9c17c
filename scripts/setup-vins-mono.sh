#!/usr/bin/env bash
# Builds scripts/vins/mono_harness.cpp against a VINS-Mono checkout (GPL-3.0; not in
# ../shared, so not part of CI: give the folder of a clone of
# github.com/HKUST-Aerial-Robotics/VINS-Mono) and the camodocal library that
# scripts/setup-vio.sh builds. Prints VINS_MONO_HARNESS=PATH.
#   scripts/setup-vins-mono.sh /path/to/VINS-Mono
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=${1:?usage: scripts/setup-vins-mono.sh VINS-MONO-DIR}
[ -f "$SRC/feature_tracker/src/feature_tracker.cpp" ] || { echo "no feature_tracker/src/feature_tracker.cpp in $SRC" >&2; exit 2; }
eval "$(bash "$ROOT/scripts/setup-vio.sh" | grep '^VINS_SETUP=')"
WS=${GF_CACHE:-$HOME/.cache/gpu_features}/vins-ws
FUSION=$WS/src/VINS-Fusion
H=$ROOT/target/vins-harness
mkdir -p "$H"
stamp=$(cat "$ROOT/scripts/vins/mono_harness.cpp" "$SRC/feature_tracker/src/feature_tracker.cpp" "$WS/.vins-stamp" | sha256sum | cut -c1-16)
if [ "$(cat "$H/.mono-stamp" 2>/dev/null)" != "$stamp" ] || [ ! -x "$H/mono_harness" ]; then
  # VINS-Mono's camera_model is VINS-Fusion's camera_models under another package name:
  # the library setup-vio.sh built serves both.
  g++ -O2 -std=c++17 -o "$H/mono_harness" "$ROOT/scripts/vins/mono_harness.cpp" \
    "$SRC/feature_tracker/src/feature_tracker.cpp" -I"$SRC/feature_tracker/src" \
    -I"$FUSION/camera_models/include" -I/usr/include/opencv4 -I/usr/include/eigen3 \
    -L"$WS/devel/lib" -Wl,-rpath,"$WS/devel/lib" -lcamera_models \
    $(pkg-config --libs opencv4) -lroscpp -lrosconsole -lroscpp_serialization -lrostime -lboost_system >&2
  echo "$stamp" > "$H/.mono-stamp"
fi
echo "VINS_MONO_HARNESS=$H/mono_harness"
