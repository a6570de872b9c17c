#!/usr/bin/env bash
# The CLI for Jetson robots, as tarballs a user unpacks and runs (docs/jetson.md):
#   gpu_features-<version>-jetpack5-aarch64.tar.gz   (Ubuntu 20.04, glibc 2.31)
#   gpu_features-<version>-jetpack6-aarch64.tar.gz   (Ubuntu 22.04, glibc 2.35)
# One aarch64 build linked against glibc 2.31 with cargo-zigbuild serves both (a binary
# that needs at most 2.31 runs on 2.35); each tarball is checked against its own limit:
# the highest GLIBC_x.y symbol version the binary needs, its ELF machine, and that it needs
# no shared library outside glibc and libgcc (libcuda and libnvrtc are loaded at run time
# from the Jetson's driver and CUDA, as on any machine). Each holds bin/gpu_features
# (stripped), share/gpu_features/config (the presets), docs/jetson.md, README.txt and
# MANIFEST (version, commit, glibc needed, sha256).
#
#   scripts/package-jetson.sh [--out DIR]      # default DIR: target/jetson
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=target/jetson
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    *) echo "package-jetson: unknown argument $1" >&2; exit 2 ;;
  esac
done
bash scripts/setup-aarch64.sh
eval "$(bash scripts/setup-aarch64.sh --env)"
TARGET=aarch64-unknown-linux-gnu
GLIBC_BUILD=2.31
# No debug info (stripped below anyway); the same build scripts/test-aarch64.sh makes.
CARGO_PROFILE_RELEASE_DEBUG=0 cargo zigbuild --release --target "$TARGET.$GLIBC_BUILD" --bin gpu_features
BIN=target/$TARGET/release/gpu_features
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
STRIP=aarch64-linux-gnu-strip
command -v "$STRIP" >/dev/null || { echo "package-jetson: no $STRIP (scripts/setup-aarch64.sh)" >&2; exit 1; }
mkdir -p "$OUT"

for pair in jetpack5:2.31 jetpack6:2.35; do
  jp=${pair%%:*}; limit=${pair#*:}
  name=gpu_features-$VERSION-$jp-aarch64
  stage=$OUT/$name
  rm -rf "$stage"
  mkdir -p "$stage/bin" "$stage/share/gpu_features/config" "$stage/docs"
  "$STRIP" -o "$stage/bin/gpu_features" "$BIN"
  for f in config/*.yaml; do
    grep -q ros__parameters "$f" || cp "$f" "$stage/share/gpu_features/config/"
  done
  cp docs/jetson.md "$stage/docs/"
  python3 scripts/elf_check.py --machine AArch64 --max-glibc "$limit" "$stage/bin/gpu_features" \
    >"$stage/glibc.txt"
  cat >"$stage/README.txt" <<EOF
gpu_features $VERSION ($COMMIT) for NVIDIA Jetson, $jp (aarch64, glibc <= $limit).

  bin/gpu_features detect --config share/gpu_features/config/default.yaml --out out image.png
  bin/gpu_features bench --help

The CUDA backend loads libcuda (the JetPack driver) and libnvrtc (JetPack's CUDA; the
kernels are compiled for the Jetson's GPU on first use); without them it says why and runs
on the CPU. The ROS 2 node is built from source in a colcon workspace: docs/jetson.md.
EOF
  {
    echo "name: $name"
    echo "version: $VERSION"
    echo "commit: $COMMIT"
    echo "target: $TARGET (linked against glibc $GLIBC_BUILD)"
    cat "$stage/glibc.txt"
    echo "sha256 bin/gpu_features: $(sha256sum "$stage/bin/gpu_features" | cut -d' ' -f1)"
  } >"$stage/MANIFEST"
  rm "$stage/glibc.txt"
  # The packed binary runs (under qemu here) and finds its presets where the README says.
  $CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER "$stage/bin/gpu_features" detect --backend cpu \
    --no-overlay --config "$stage/share/gpu_features/config/default.yaml" --out "$OUT/smoke-$jp" \
    tests/data/graf1.png >"$OUT/smoke-$jp.log" 2>&1 \
    || { echo "[package-jetson] the packed binary failed:"; cat "$OUT/smoke-$jp.log"; exit 1; }
  tar -C "$OUT" -czf "$OUT/$name.tar.gz" "$name"
  echo "[package-jetson] $OUT/$name.tar.gz ($(du -h "$OUT/$name.tar.gz" | cut -f1)): $(grep '^glibc' "$stage/MANIFEST")"
done
