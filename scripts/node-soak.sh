#!/usr/bin/env bash
# The ROS 2 node's loopback soak (docs/reliability.md): gpu_features_node on the CPU backend
# (GF_SOAK_BACKEND) with two inputs, fed by gpu_features_load at 30 Hz each for
# GF_SOAK_DURATION (default 30m) with a mix of sizes and encodings and 1 % malformed frames
# over reliable QoS; the node's RSS is sampled every 10 s. Fails (exit 1) when the node's RSS
# grows past its warm-up maximum + 64 MiB, a minute's answered frames fall under half the
# first minute's, or a frame is unaccounted for (node counters from /diagnostics: received =
# processed + dropped + decode errors, no process error, every malformed frame rejected or
# replaced unseen, every processed frame answered). Both processes trace each frame
# (GF_TRACE_DIR=OUT/trace, src/ros/trace.rs) and scripts/trace_split.py --check splits the
# round trips into way in / node / way back and fails on an answered frame the node has no
# row for, or one taken before it was sent or answered before it was taken.
#
#   scripts/node-soak.sh [OUT_DIR]     (default target/node-soak)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${1:-$ROOT/target/node-soak}
mkdir -p "$OUT"
eval "$(scripts/setup-ros.sh --env)"
export CARGO_TARGET_DIR=${GF_ROS_TARGET:-$ROOT/target/ros}
cargo build --release --features ros --bin gpu_features_node --bin gpu_features_load
B=$CARGO_TARGET_DIR/release
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$(( (RANDOM % 100) + 1 ))} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export FASTDDS_DEFAULT_PROFILES_FILE=$ROOT/config/fastdds_large_frames.xml RCUTILS_COLORIZED_OUTPUT=0
IMAGES=bench-data; [ -d "$IMAGES" ] || IMAGES=tests/data
rm -rf "$OUT/trace"
export GF_TRACE_DIR=$OUT/trace
"$B/gpu_features_node" --ros-args -p backend:="${GF_SOAK_BACKEND:-cpu}" -p diagnostics_period:=1.0 \
  -p image_qos.reliability:=reliable -p image_qos.depth:=100 -p "inputs:=[left,right]" \
  >"$OUT/node.log" 2>&1 &
NODE=$!
rc=0
"$B/gpu_features_load" --inputs left,right --sizes "${GF_SOAK_SIZES:-320x240,640x480}" \
  --encodings mono8,bgr8,rgb8,bgra8,mono16 --rate 30 --duration "${GF_SOAK_DURATION:-30m}" \
  --malformed-percent 1 --images "$IMAGES" --node-pid "$NODE" --node-log "$OUT/node.log" \
  --sample-every 10s --soak-rss-growth-mib 64 --label "node soak" --json "$OUT/soak.json" \
  | tee "$OUT/soak.md" || rc=$?
kill "$NODE" 2>/dev/null || true
wait "$NODE" 2>/dev/null || true
grep "summary" "$OUT/node.log" || true
python3 scripts/trace_split.py "$OUT/trace" --label "node soak" --check || rc=1
exit $rc
