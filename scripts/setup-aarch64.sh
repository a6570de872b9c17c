#!/usr/bin/env bash
# Idempotent: what building and testing for the Jetson's CPU (aarch64) needs on an x86_64
# Debian/Ubuntu machine, installed by this script and nothing else:
#   - Rust's aarch64-unknown-linux-gnu standard library (rustup);
#   - Debian's cross C compiler, aarch64 C library and user-mode emulator
#     (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user; apt, as root);
#   - cargo-zigbuild and zig (PyPI wheels, pinned, in the venv target/py-zig): they link
#     against an older glibc than this machine's (JetPack 5 has 2.31, JetPack 6 2.35), so
#     that one build runs on both (scripts/package-jetson.sh).
# Fails loudly, naming what is missing, when something cannot be installed.
#
#   scripts/setup-aarch64.sh               # install or check (a second run takes ~1 s)
#   eval "$(bash scripts/setup-aarch64.sh --env)"  # then export PATH and cargo's runner
#
# With the env, `cargo zigbuild --target aarch64-unknown-linux-gnu.2.31 ...` builds and
# `cargo-zigbuild test --target aarch64-unknown-linux-gnu.2.31` runs the tests under qemu.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=aarch64-unknown-linux-gnu
VENV=$ROOT/target/py-zig
ZIGBUILD=0.24.1
ZIG=0.17.1
SYSROOT=/usr/aarch64-linux-gnu
log() { echo "[setup-aarch64] $*" >&2; }
die() { echo "[setup-aarch64] ERROR: $*" >&2; exit 1; }

# 1. Rust's standard library for the target.
if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
  log "rustup target add $TARGET"
  rustup target add "$TARGET" >&2 || die "rustup could not install the $TARGET standard library
  (no rustup, or its server cannot be reached). Debian's rustc-web with libstd-rust-web-dev:arm64
  is the untried fallback; see docs/jetson.md."
fi

# 2. Cross compiler, C library and the emulator the tests run under.
missing=
command -v aarch64-linux-gnu-gcc >/dev/null || missing="$missing gcc-aarch64-linux-gnu"
[ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] || missing="$missing libc6-dev-arm64-cross"
command -v qemu-aarch64 >/dev/null || missing="$missing qemu-user"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "apt-get install$missing"
    apt-get update -qq >&2 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2 \
      || die "apt-get could not install$missing"
  else
    die "need$missing (install them with your package manager, as root)"
  fi
fi

# 3. cargo-zigbuild and zig, pinned, from PyPI.
if [ ! -x "$VENV/bin/cargo-zigbuild" ] || [ ! -e "$VENV/.stamp-$ZIGBUILD-$ZIG" ]; then
  log "cargo-zigbuild $ZIGBUILD and ziglang $ZIG into $VENV"
  python3 -m venv "$VENV" >&2 || die "python3 -m venv failed"
  "$VENV/bin/pip" install -q --disable-pip-version-check "cargo-zigbuild==$ZIGBUILD" "ziglang==$ZIG" >&2 \
    || die "pip could not install cargo-zigbuild==$ZIGBUILD ziglang==$ZIG"
  touch "$VENV/.stamp-$ZIGBUILD-$ZIG"
fi

if [ "${1:-}" = --env ]; then
  cat <<EOF
export PATH='$VENV/bin':\$PATH
export CARGO_ZIGBUILD_PYTHON_PATH='$VENV/bin/python3'
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER='qemu-aarch64 -L $SYSROOT'
export GF_AARCH64_SYSROOT='$SYSROOT'
EOF
fi
