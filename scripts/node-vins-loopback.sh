#!/usr/bin/env bash
# The node as VINS's front-end over loopback, on the CPU backend (CI, no GPU): gpu_features_node
# with config/vins_frontend_params.yaml, fed by gpu_features_load with a camera_info per frame
# (--camera-info) and answered on VINS's `feature` (--answer feature), as
# scripts/node-vins-bench.sh measures it on the GPU: a moving camera (a pan over
# tests/data/building.png), then a stereo pair (`feature` carries both cameras; the second
# answers on its `tracks`). Fails unless every frame sent is answered, with points.
#
#   scripts/node-vins-loopback.sh [OUT_DIR]     (default target/node-vins-loopback)
# Env: GF_ROS_TARGET (target dir, default target/ros), GF_VINS_LOOPBACK_SECONDS (4).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${1:-$ROOT/target/node-vins-loopback}
mkdir -p "$OUT"
eval "$(scripts/setup-ros.sh --env)"
export CARGO_TARGET_DIR=${GF_ROS_TARGET:-$ROOT/target/ros}
cargo build --release --features ros --bin gpu_features_node --bin gpu_features_load
B=$CARGO_TARGET_DIR/release
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$(( (RANDOM % 100) + 1 ))} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export FASTDDS_DEFAULT_PROFILES_FILE=$ROOT/config/fastdds_large_frames.xml RCUTILS_COLORIZED_OUTPUT=0
rc=0
run() {  # label answer node-params...; LOAD_INPUTS
  local label=$1 answer=$2; shift 2
  "$B/gpu_features_node" --ros-args --params-file config/vins_frontend_params.yaml -p backend:=cpu \
    -p image_qos.reliability:=reliable -p image_qos.depth:=100 "$@" >"$OUT/node-$label.log" 2>&1 &
  local node=$!
  "$B/gpu_features_load" ${LOAD_INPUTS:+--inputs $LOAD_INPUTS} --sizes 320x240 --encodings mono8 \
    --rate 10 --duration "${GF_VINS_LOOPBACK_SECONDS:-4}s" --reliability reliable \
    --images tests/data/building.png --pan 3,2 --distinct 30 --camera-info --answer "$answer" \
    --node-pid "$node" --node-log "$OUT/node-$label.log" --label "$label" --json "$OUT/$label.json" \
    >"$OUT/load-$label.log" 2>&1 || { echo "[vins-loopback] $label: load failed"; tail -5 "$OUT/load-$label.log"; rc=1; }
  kill "$node" 2>/dev/null || true
  wait "$node" 2>/dev/null || true
  python3 - "$OUT/$label.json" "$label" <<'PY' || rc=1
import json, sys
d = json.load(open(sys.argv[1]))
bad = []
for i in d["inputs"]:
    name = i["input"] or "image"
    print(f"[vins-loopback] {sys.argv[2]} {name}: sent {i['sent']}, answered {i['answered']}, "
          f"points {i.get('answer_points')}, round trip p50 {i['round_trip_ms']['p50']:.2f} ms")
    if i["sent"] == 0 or i["answered"] != i["sent"] or not (i.get("answer_points") or 0) > 0:
        bad.append(name)
sys.exit(f"[vins-loopback] {sys.argv[2]}: not every frame answered with points: {bad}" if bad else 0)
PY
}
run mono feature
LOAD_INPUTS=left,right run stereo feature,tracks -p "inputs:=[left, right]" -p track.stereo:=true
exit $rc
