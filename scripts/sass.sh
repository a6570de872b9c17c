#!/usr/bin/env bash
# The SASS (machine code) of one kernel, no GPU needed: NVRTC compiles the kernels as the
# pipeline does (the test cuda::context::tests::kernels_compile_with_nvrtc with
# GF_DUMP_CUBIN), and cuobjdump with nvdisasm from PyPI's nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm wheels (into target/, idempotent) disassemble the CUBIN. For counting
# a loop's instructions before spending device time (docs/performance.md, change 33).
# Usage: scripts/sass.sh KERNEL [ARCH]   (ARCH: sm_90 (default) or sm_87)
set -euo pipefail
KERNEL=${1:?usage: scripts/sass.sh KERNEL [sm_90|sm_87]}
ARCH=${2:-sm_90}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/target/cuobjdump
BIN=$(find "$TOOLS" -name cuobjdump -type f 2>/dev/null | head -1 || true)
if [ -z "$BIN" ]; then
  mkdir -p "$TOOLS"
  python3 -m pip download -q --no-deps -d "$TOOLS" \
    nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37 >&2
  (cd "$TOOLS" && for w in ./*.whl; do python3 -m zipfile -e "$w" .; done)
  BIN=$(find "$TOOLS" -name cuobjdump -type f | head -1)
fi
chmod +x "$(dirname "$BIN")"/*
LIB=$(bash "$ROOT/scripts/setup-nvrtc.sh")
OUT=$ROOT/target/cubin
mkdir -p "$OUT"
(cd "$ROOT" && GF_DUMP_CUBIN="$OUT" GF_REQUIRE_NVRTC=1 LD_LIBRARY_PATH="$LIB" \
  cargo test --release --lib -q kernels_compile_with_nvrtc >/dev/null)
PATH="$(dirname "$BIN"):$PATH" "$BIN" -sass -fun "$KERNEL" "$OUT/kernels-$ARCH.cubin"
