#!/usr/bin/env bash
# scripts/node-vins-bench.sh BUNDLE OUT, on the GPU machine from the repository root (BUNDLE
# from `scripts/node-gpu-bench.sh pack`): the node as VINS's feature tracker
# (config/vins_frontend_params.yaml, backend cuda, reliable image QoS depth 100) fed by
# gpu_features_load at 30 Hz for 20 s per case: mono 752x480 mono8, mono 1080p bgr8, mono
# 752x480 mono8 with the F test (VINS-Mono's 1 px), stereo 752x480 mono8 (two inputs
# published together). The frames cycle through tests/data's photos, so every frame is a
# new scene for the tracker (its tracks lost and replaced: a worst case). Then, when the
# photo PAN_IMAGE (default bench-data/Wood.jpg, textured all over) is there, a moving camera: 60-frame pans
# across it, (3, 2) px per frame (`gpu_features_load --pan`), for 752x480 mono8, 1080p bgr8
# and the stereo pair. Prints the node's shutdown summaries (the latency's parts, the
# tracking step's parts) and the load's rows; logs in OUT. docs/tracking.md, "In the node".
# GF_VINS_BENCH_PARAMS: extra node parameters for every case ("key:=value ...", e.g.
# "cuda.prewake_us:=0"). GF_VINS_BENCH_NODE: a gpu_features_node binary to run instead of
# the bundle's (another build against the same libraries: before/after in one call).
# GF_VINS_BENCH_CASES: only the cases of these labels ("pan-752x480-mono8 mono-752x480-mono8").
# The load publishes a camera_info with each frame and times each frame's round trip to the
# node's `feature` (the stereo pair's second camera: to its `tracks`), what VINS listens to;
# nobody listens to `keypoints`, as in a VINS deployment. GF_VINS_BENCH_ANSWER=keypoints:
# the load answers on `keypoints` instead, without camera_info (before 2026-11-29 the only
# way: the node then also publishes its keypoints cloud and no `feature`).
set -u
bundle=$1 out=$2
dir=$(mktemp -d); tar -C "$dir" -xJf "$bundle"
export LD_LIBRARY_PATH="$dir/lib:/usr/local/cuda/lib64" AMENT_PREFIX_PATH=$dir RMW_IMPLEMENTATION=rmw_fastrtps_cpp
export ROS_DOMAIN_ID=47 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST FASTDDS_DEFAULT_PROFILES_FILE=$dir/config/fastdds_large_frames.xml RCUTILS_COLORIZED_OUTPUT=0
mkdir -p "$out"
extra=()
for x in ${GF_VINS_BENCH_PARAMS:-}; do extra+=(-p "$x"); done
node_bin=${GF_VINS_BENCH_NODE:-$dir/bin/gpu_features_node}
answer_mode=${GF_VINS_BENCH_ANSWER:-feature}
answer_args() {  # the load's answer options for INPUTS (empty: one input)
  if [ "$answer_mode" = keypoints ]; then echo "--answer keypoints"
  elif [ -n "$1" ]; then echo "--camera-info --answer feature,tracks"
  else echo "--camera-info --answer feature"; fi
}
run() {  # label size enc extra-node-params... ; LOAD_INPUTS, LOAD_IMAGES, LOAD_PAN
  local label=$1 size=$2 enc=$3; shift 3
  if [ -n "${GF_VINS_BENCH_CASES:-}" ] && [[ " $GF_VINS_BENCH_CASES " != *" $label "* ]]; then
    return 0
  fi
  "$node_bin" --ros-args --params-file "$dir/config/vins_frontend_params.yaml" \
    -p backend:=cuda -p image_qos.reliability:=reliable -p image_qos.depth:=100 "$@" "${extra[@]}" \
    >"$out/node-$label.log" 2>&1 &
  local node=$!
  sleep 2
  "$dir/bin/gpu_features_load" ${LOAD_INPUTS:+--inputs $LOAD_INPUTS} --sizes "$size" --encodings "$enc" \
    --rate 30 --duration 20s --reliability reliable --images "${LOAD_IMAGES:-tests/data}" \
    $(answer_args "${LOAD_INPUTS:-}") \
    ${LOAD_PAN:+--pan $LOAD_PAN --distinct 60} >"$out/load-$label.log" 2>&1
  kill -INT $node; wait $node
  echo "== $label"
  grep -E "summary|tracking input|GPU failure|panicked" "$out/node-$label.log" | cut -c1-640
  grep -E "^\|  \|" "$out/load-$label.log" | cut -d'|' -f3-8
}
run mono-752x480-mono8 752x480 mono8
run mono-1080p-bgr8 1920x1080 bgr8
run mono-752x480-mono8-F 752x480 mono8 -p track.ransac_threshold:=1.0
LOAD_INPUTS=left,right run stereo-752x480-mono8 752x480 mono8 -p "inputs:=[left, right]" -p track.stereo:=true
pan=${PAN_IMAGE:-bench-data/Wood.jpg}
if [ -f "$pan" ]; then
  export LOAD_IMAGES=$pan LOAD_PAN=3,2
  run pan-752x480-mono8 752x480 mono8
  run pan-1080p-bgr8 1920x1080 bgr8
  LOAD_INPUTS=left,right run pan-stereo-752x480-mono8 752x480 mono8 -p "inputs:=[left, right]" -p track.stereo:=true
else
  echo "node-vins-bench: $pan not found: no pan cases"
fi
rm -rf "$dir"
