#!/usr/bin/env bash
# The ROS 2 node measured on a GPU machine that has no ROS and no Python ROS (docs/node-bench.md;
# docs/ros.md, "The node on a GPU", points there). Two steps:
#
#   scripts/node-gpu-bench.sh pack [BUNDLE]   here (PyPI ROS 2 from scripts/setup-ros.sh):
#       builds gpu_features_node, gpu_features_load and gpu_features_relay (release,
#       --features ros), strips
#       them, runs both once over loopback to record every shared library they map (the
#       dlopened rmw and type-support libraries included), and packs binaries + those
#       libraries + the ament index + config/ into BUNDLE (default devrun/node-bundle.tar.xz,
#       ~10 MB: small enough for the 64 MiB that travels to the GPU machine).
#
#   scripts/node-gpu-bench.sh run BUNDLE OUT [IMAGES]   on the GPU machine:
#       unpacks, then for 1920x1080 mono8 and bgr8 at 30 and 60 Hz, with 1 input and with
#       `inputs: [a, b, c, d]` (four cameras, four CUDA streams), first runs the load
#       generator against gpu_features_relay (a no-op node: the transport floors of this
#       run, `image` republishing each Image and `header` answering with a cloud on
#       `keypoints`, empty or as big as the node's with `header:N`), then starts the node
#       with backend cuda and runs the same load with --floor (the last `header` relay's
#       JSON), for GF_NODE_BENCH_SECONDS (default 60) each;
#       rows (the relays', then the node's with the floor beside) go to OUT/node-bench.md,
#       then each run's round trips split into way in / node / way back (GF_TRACE_DIR,
#       scripts/trace_split.py); logs, JSON and traces to OUT/node-bench-logs.tar.gz.
#       IMAGES: photos to crop the frames from (default bench-data).
#
#   scripts/node-gpu-bench.sh soak BUNDLE OUT [IMAGES]   on the GPU machine: the node's GPU
#       soak (docs/reliability.md): backend cuda, four inputs, 1920x1080 bgr8 at 30 Hz each
#       over reliable QoS (depth 100) with 1 % malformed frames, for GF_NODE_SOAK_DURATION
#       (default 9m); the load generator judges the node (RSS growth <= 64 MiB over its
#       warm-up maximum, every frame accounted for, every valid one answered) and the GPU's
#       used memory is sampled every 10 s (nvidia-smi) and must stay within 64 MiB of its
#       value after the first minute. Report in OUT/node-soak.md, samples in OUT.
#
# Env: GF_NO_BUILD=1 (pack: no cargo build), GF_NODE_BENCH_SECONDS (60), GF_NODE_BENCH_CASES ("mono8:30:1 mono8:60:1 ..." subset),
#      GF_NODE_BENCH_BACKEND (cuda), GF_NODE_SOAK_DURATION (9m), GF_NODE_SOAK_ANSWER
#      (keypoints; `edges`: the soak's load waits for the edge maps instead),
#      GF_NODE_BENCH_FLOORS ("image header"; `header:N` answers with N keypoints, the node's
#      size: its latency is then the floor of the node's keypoints part),
#      GF_NODE_BENCH_QOS (default: the node's image QoS, best effort depth 1; reliable:DEPTH
#      for the node and the relays, docs/ros.md "Frames lost between processes"),
#      GF_NODE_BENCH_PARAMS (extra node parameters, "key:=value ...", e.g. "cuda.prewake_us:=0"),
#      GF_NODE_BENCH_VARIANTS (node variants run one after the other against the same floor
#      in each case: space-separated, each a comma-separated list of node parameters, e.g.
#      "image_take:=serialized image_take:=message"; an item `fifo=N` runs that variant's node
#      under `chrt -f N`, every thread SCHED_FIFO at priority N; default: one run, no extra
#      parameter),
#      GF_NODE_BENCH_ANSWER (keypoints: what the load waits for from the node; `edges`: its
#      edge map, compared with the `image` floor: give GF_NODE_BENCH_FLOORS=image),
#      GF_NODE_BENCH_ROUNDS (1: the cases run once; N: all of them N times in turn, each run
#      with its own relay floor, to tell a change from the run-to-run spread),
#      ROS_DOMAIN_ID (default 42).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

pack() {
  local bundle=${1:-$ROOT/devrun/node-bundle.tar.xz}
  cd "$ROOT"
  eval "$(scripts/setup-ros.sh --env)"
  export CARGO_TARGET_DIR=${GF_ROS_TARGET:-$ROOT/target/ros}
  [ "${GF_NO_BUILD:-0}" = 1 ] ||   # GF_NO_BUILD=1: pack the binaries already built
    cargo build --release --features ros --bin gpu_features_node --bin gpu_features_load \
      --bin gpu_features_relay
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/bin" "$stage/lib" "$stage/share"
  for b in gpu_features_node gpu_features_load gpu_features_relay; do
    cp "$CARGO_TARGET_DIR/release/$b" "$stage/bin/" && strip "$stage/bin/$b"
  done
  # Run both over loopback (CPU backend) and record what they map while they run.
  export ROS_DOMAIN_ID=$(( (RANDOM % 100) + 1 )) ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
  export FASTDDS_DEFAULT_PROFILES_FILE=$ROOT/config/fastdds_large_frames.xml
  "$stage/bin/gpu_features_node" --ros-args -p backend:=cpu -p "inputs:=[a,b]" \
    >"$stage/pack-node.log" 2>&1 &
  local node=$!
  "$stage/bin/gpu_features_load" --inputs a,b --sizes 320x240 --encodings mono8,bgr8 \
    --rate 10 --duration 4s --images "$ROOT/tests/data" >"$stage/pack-load.log" 2>&1 &
  local load=$!
  sleep 3
  cat "/proc/$node/maps" "/proc/$load/maps" | awk '$6 ~ /\.so/ {print $6}' | sort -u \
    >"$stage/maps.txt" || true
  wait "$load" || { cat "$stage/pack-load.log"; kill "$node"; return 1; }
  kill -INT "$node"; wait "$node" || true
  # glibc, libstdc++, libgcc, expat and zlib are on any host recent enough for CUDA 12/13;
  # ship the rest
  # (the binaries also link libpython, through r2r's message libraries, never initialised).
  grep -v -E '/(ld-linux[^/]*|lib(c|m|dl|pthread|rt|gcc_s|stdc\+\+|expat|z)\.so[^/]*)$' \
      "$stage/maps.txt" | while read -r so; do
    # maps names the file a symlink resolved to; the loader looks for the SONAME
    local name base
    name=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    base=$(basename "$so")
    cp -L "$so" "$stage/lib/${name:-$base}"
    [ -z "$name" ] || [ "$name" = "$base" ] || ln -sf "$name" "$stage/lib/$base"
  done
  cp -r "$ROS_VENV/share/ament_index" "$stage/share/"
  cp -r "$ROOT/config" "$stage/"
  cp "$0" "$stage/node-gpu-bench.sh"
  cp "$ROOT/scripts/trace_split.py" "$stage/"
  rm -f "$stage"/pack-*.log
  echo "[node-gpu-bench] $(wc -l <"$stage/maps.txt") libraries mapped, $(ls "$stage/lib" | wc -l) shipped"
  mkdir -p "$(dirname "$bundle")"
  tar -C "$stage" -cJf "$bundle" .
  echo "[node-gpu-bench] wrote $bundle ($(du -h "$bundle" | cut -f1))"
}

# Unpacks BUNDLE into a new directory (printed) and sets the environment to run from it.
unpack() {
  dir=$(mktemp -d)
  tar -C "$dir" -xJf "$1"
  export LD_LIBRARY_PATH="$dir/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export AMENT_PREFIX_PATH=$dir RMW_IMPLEMENTATION=rmw_fastrtps_cpp
  export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-42} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
  export FASTDDS_DEFAULT_PROFILES_FILE=$dir/config/fastdds_large_frames.xml
  export RCUTILS_COLORIZED_OUTPUT=0
}

soak() {
  local bundle=$1 out=$2 images=${3:-bench-data}
  local dir
  unpack "$bundle"
  mkdir -p "$out"
  local dur=${GF_NODE_SOAK_DURATION:-9m}
  local inputs=cam1,cam2,cam3,cam4
  ( while true; do
      echo "$(date +%s) $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)"
      sleep 10
    done ) >"$out/gpu-memory.txt" 2>/dev/null &
  local sampler=$!
  "$dir/bin/gpu_features_node" --ros-args -p backend:=cuda -p diagnostics_period:=1.0 \
    -p image_qos.reliability:=reliable -p image_qos.depth:=100 -p "inputs:=[$inputs]" \
    >"$out/node.log" 2>&1 &
  local node=$!
  local rc=0
  "$dir/bin/gpu_features_load" --inputs "$inputs" --sizes 1920x1080 --encodings bgr8 \
    --rate 30 --duration "$dur" --malformed-percent 1 --images "$images" \
    --answer "${GF_NODE_SOAK_ANSWER:-keypoints}" \
    --node-pid "$node" --node-log "$out/node.log" --sample-every 10s \
    --soak-rss-growth-mib 64 --label "GPU node soak, 4 x 1080p bgr8 30 Hz, answer ${GF_NODE_SOAK_ANSWER:-keypoints}" \
    --json "$out/soak.json" >"$out/node-soak.md" 2>"$out/load.log" || rc=$?
  kill "$node" 2>/dev/null || true; wait "$node" 2>/dev/null || true
  kill "$sampler" 2>/dev/null || true
  grep "summary" "$out/node.log" >>"$out/node-soak.md" || true
  # GPU memory: flat after the first minute (the pipelines allocate per resolution once).
  awk 'NR == 1 {t0 = $1} $1 - t0 >= 60 {n++; if (n == 1) base = $2; if ($2 > max) max = $2;
       if (n == 1 || $2 < min) min = $2}
       END {printf "GPU memory after the first minute: %d samples, first %d MiB, min %d, max %d (growth %d MiB)\n",
            n, base, min, max, max - base; exit (n < 2 || max - base > 64)}' "$out/gpu-memory.txt" \
    >>"$out/node-soak.md" || rc=1
  cat "$out/node-soak.md"
  return $rc
}

run() {
  local bundle=$1 out=$2 images=${3:-bench-data}
  local dir
  unpack "$bundle"
  mkdir -p "$out/logs"
  local secs=${GF_NODE_BENCH_SECONDS:-60} backend=${GF_NODE_BENCH_BACKEND:-cuda}
  local cases=${GF_NODE_BENCH_CASES:-"mono8:30:1 mono8:60:1 bgr8:30:1 bgr8:60:1 mono8:30:4 mono8:60:4 bgr8:30:4 bgr8:60:4"}
  local md=$out/node-bench.md split=$out/trace-split.md
  : >"$split"
  local qos=${GF_NODE_BENCH_QOS:-default} node_qos=() relay_qos=()
  local node_answer=${GF_NODE_BENCH_ANSWER:-keypoints}
  if [ "$qos" != default ]; then
    local depth=${qos#reliable:}
    node_qos=(-p image_qos.reliability:=reliable -p "image_qos.depth:=$depth")
    relay_qos=(--reliability reliable --depth "$depth")
  fi
  {
    echo "image QoS of the node and the relays: $qos"
    echo "node benchmark: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'), $(nproc) CPUs, backend $backend, $secs s per case, /dev/shm $(df -h /dev/shm | awk 'NR==2 {print $2}')"
    echo
    "$dir/bin/gpu_features_load" --help >/dev/null
    echo "| run | input | sent | answered | not answered | dropped in the node | round trip p50 / p99 (ms) | floor (relay) p50 / p99 (ms) | over the floor p50 / p99 (ms) | node latency p50 / p99 (ms) | CPU ms a frame: node / load | backend | node latency's parts p50 / p99, then GPU stages (mean), ms |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
  } >"$md"
  local rounds=${GF_NODE_BENCH_ROUNDS:-1} round runs=()
  for round in $(seq 1 "$rounds"); do for c in $cases; do runs+=("$round:$c"); done; done
  for run in "${runs[@]}"; do
    IFS=: read -r round enc rate n <<<"$run"
    local inputs="" params=()
    if [ "$n" -gt 1 ]; then
      inputs=$(printf 'cam%d,' $(seq 1 "$n")); inputs=${inputs%,}
      params=(-p "inputs:=[${inputs}]")
    fi
    local tag="${enc}-${rate}hz-${n}in" label="1080p $enc $rate Hz, $n input(s)"
    if [ "$rounds" -gt 1 ]; then tag="$tag-r$round"; label="$label, round $round"; fi
    # The floors: the same load against the relay (same r2r, QoS and Fast DDS profile),
    # answering with the Image itself (`image`: the frame crosses twice) and with a cloud
    # on `keypoints` (`header`: what the node's own round trip consists of), empty or, with
    # `header:N`, of N keypoints in the node's encoding and publication (an answer as big
    # as the node's). The node's rows are compared with the last header floor listed.
    local floor_mode mode points floor_json=""
    for floor_mode in ${GF_NODE_BENCH_FLOORS:-image header}; do
      mode=${floor_mode%%:*} points=0
      [ "$mode" = "$floor_mode" ] || points=${floor_mode#*:}
      local answer=keypoints
      [ "$mode" = image ] && answer=relayed
      [ "$points" = 0 ] || mode="$mode-$points"
      export GF_TRACE_DIR=$out/trace/relay-$mode-$tag
      "$dir/bin/gpu_features_relay" --mode "${floor_mode%%:*}" --points "$points" \
        ${inputs:+--inputs "$inputs"} "${relay_qos[@]}" \
        >"$out/logs/relay-$mode-$tag.log" 2>&1 &
      local relay=$!
      "$dir/bin/gpu_features_load" ${inputs:+--inputs "$inputs"} --sizes 1920x1080 \
        --encodings "$enc" --rate "$rate" --duration "${secs}s" --images "$images" \
        --answer "$answer" --node-pid "$relay" --node-log "$out/logs/relay-$mode-$tag.log" \
        --label "relay ($mode), $label" --json "$out/logs/relay-$mode-load-$tag.json" \
        --markdown "$md" >"$out/logs/relay-$mode-load-$tag.log" 2>&1 \
        || { echo "[node-gpu-bench] relay $mode $tag failed:"; tail -5 "$out/logs/relay-$mode-load-$tag.log"; }
      kill "$relay" 2>/dev/null || true; wait "$relay" 2>/dev/null || true
      python3 "$dir/trace_split.py" "$GF_TRACE_DIR" --label "relay ($mode), $label" >>"$split" || true
      # The node's rows take the last header floor; answering with its edge map
      # (GF_NODE_BENCH_ANSWER=edges), an Image of the frame's size, the last image floor.
      if [ "$answer" != relayed ] || [ "$node_answer" = edges ]; then
        floor_json=$out/logs/relay-$mode-load-$tag.json
      fi
    done
    local floor=()
    [ -n "$floor_json" ] && [ -s "$floor_json" ] && floor=(--floor "$floor_json")
    local variant
    for variant in ${GF_NODE_BENCH_VARIANTS:--}; do
      local extra=() prefix=() vtag=$tag vlabel=$label
      for x in ${GF_NODE_BENCH_PARAMS:-}; do extra+=(-p "$x"); done
      if [ "$variant" != - ]; then
        local vp
        IFS=, read -ra vp <<<"$variant"
        for x in "${vp[@]}"; do
          case $x in
            fifo=*) prefix=(chrt -f "${x#fifo=}") ;;  # real-time priority for every thread
            *) extra+=(-p "$x") ;;
          esac
        done
        vtag="$tag-${variant//[^A-Za-z0-9]/_}" vlabel="$label, $variant"
      fi
      export GF_TRACE_DIR=$out/trace/node-$vtag
      "${prefix[@]}" "$dir/bin/gpu_features_node" --ros-args -p backend:="$backend" -p diagnostics_period:=1.0 \
        "${params[@]}" "${node_qos[@]}" "${extra[@]}" >"$out/logs/node-$vtag.log" 2>&1 &
      local node=$!
      "$dir/bin/gpu_features_load" ${inputs:+--inputs "$inputs"} --sizes 1920x1080 \
        --encodings "$enc" --rate "$rate" --duration "${secs}s" --images "$images" \
        --answer "$node_answer" --node-pid "$node" --node-log "$out/logs/node-$vtag.log" --label "$vlabel" \
        --json "$out/logs/load-$vtag.json" --markdown "$md" "${floor[@]}" \
        >"$out/logs/load-$vtag.log" 2>&1 \
        || { echo "[node-gpu-bench] $vtag failed:"; tail -5 "$out/logs/load-$vtag.log"; }
      kill "$node" 2>/dev/null || true; wait "$node" 2>/dev/null || true
      python3 "$dir/trace_split.py" "$GF_TRACE_DIR" --label "$vlabel" >>"$split" || true
      unset GF_TRACE_DIR
      echo "[node-gpu-bench] $vtag done"
    done
  done
  { echo; echo "Round trips split (scripts/trace_split.py: way in = the load's publish -> taken, node = -> keypoints published, way back = -> arrival in the load; one clock):"; echo; cat "$split"; } >>"$md"
  rm -f "$split"
  tar -C "$out" -czf "$out/node-bench-logs.tar.gz" logs trace && rm -rf "$out/logs" "$out/trace"
  cat "$md"
}

# The header comment above, as the usage text.
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; [ $# -ge 2 ] || usage; run "$@" ;;
  soak) shift; [ $# -ge 2 ] || usage; soak "$@" ;;
  *) usage ;;
esac
