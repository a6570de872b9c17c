#!/usr/bin/env bash
# The Jetson's CPU in CI (called by scripts/test.sh; SKIP_AARCH64=1 leaves it out): on this
# x86_64 machine, for aarch64-unknown-linux-gnu linked against glibc 2.31 (JetPack 5; the
# same binary runs on JetPack 6's 2.35), with cargo-zigbuild (scripts/setup-aarch64.sh):
#   1. clippy for the target, -D warnings (library and CLI; with the node's code in step 5);
#   2. the release library and CLI;
#   3. the library's unit tests and the exactness tests (tests/exact_*) under qemu-aarch64;
#   4. `detect` with every preset in config/ on tests/data (and the real sequence
#      tests/data/seq): every output file byte-identical to the x86_64 build's;
#   5. the ROS node's code checked for the target (r2r's bindings generated for aarch64 from
#      the PyPI ROS 2 prefix), unless GF_AARCH64_ROS=0;
#   6. the Jetson tarballs (scripts/package-jetson.sh) and their glibc check.
# Prints each step's time. Env: GF_AARCH64_ROS (1), GF_AARCH64_PACKAGE (1).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
T0=$SECONDS
lap() { echo "[test-aarch64] $1 done in $((SECONDS - $2)) s"; }
bash scripts/setup-aarch64.sh
eval "$(bash scripts/setup-aarch64.sh --env)"
lap setup "$T0"
TARGET=aarch64-unknown-linux-gnu
ZT=$TARGET.2.31   # cargo-zigbuild: link against glibc 2.31 (JetPack 5) and older
OUT=$ROOT/target/$TARGET/release

# Release without debug info for the target (a quarter faster to build; the tarballs strip
# it anyway). scripts/package-jetson.sh builds the same way, so it reuses this build.
zb() { CARGO_PROFILE_RELEASE_DEBUG=0 cargo-zigbuild "$@"; }

# Lints for the target: with the node's code (step 5) when the ROS check runs, else here.
if [ "${GF_AARCH64_ROS:-1}" != 1 ]; then
  T=$SECONDS
  zb clippy --release --target "$ZT" --lib --bins -- -D warnings
  lap clippy "$T"
fi

T=$SECONDS
zb zigbuild --release --target "$ZT" --lib --bins
lap "release build" "$T"

T=$SECONDS
tests=()
for f in tests/exact_*.rs; do tests+=(--test "$(basename "$f" .rs)"); done
# The SIMD levels and thread counts (cpu::simd): on aarch64 the NEON baseline at 1 and
# several threads, against the same outputs.
tests+=(--test simd_levels)
# The GPU tests in these files say SKIPPED (no CUDA under qemu); the CPU ones run. Left out
# under emulation: the evaluation's synthetic-homography test (minutes of emulated floating
# point; it checks the evaluation, not code that runs on the robot).
zb test --release --target "$ZT" --lib "${tests[@]}" -- --skip eval::homography 2>&1 | tee target/aarch64-tests.log \
  | grep -E "^test result|FAILED|panicked" || true
if grep -q "FAILED\|error\[" target/aarch64-tests.log || ! grep -q "^test result" target/aarch64-tests.log; then
  echo "[test-aarch64] tests failed under qemu"; tail -40 target/aarch64-tests.log; exit 1
fi
lap "unit + exactness tests under qemu" "$T"

T=$SECONDS
# The x86_64 CLI against the aarch64 one, same inputs, every preset.
# The x86_64 release CLI (scripts/test-vio.sh built it before this step in scripts/test.sh).
cargo build --release --bin gpu_features
python3 scripts/cross_detect.py --native target/release/gpu_features \
  --cross "$OUT/gpu_features" --runner "$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER" \
  --out target/aarch64-detect
lap "detect, every preset, x86_64 == aarch64" "$T"

if [ "${GF_AARCH64_ROS:-1}" = 1 ]; then
  T=$SECONDS
  bash scripts/check-ros-aarch64.sh
  lap "clippy for aarch64 with the node's code (--features ros)" "$T"
fi

if [ "${GF_AARCH64_PACKAGE:-1}" = 1 ]; then
  T=$SECONDS
  bash scripts/package-jetson.sh --out target/jetson
  lap "Jetson tarballs + glibc check" "$T"
fi
echo "[test-aarch64] total $((SECONDS - T0)) s"
