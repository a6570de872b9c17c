#!/usr/bin/env bash
# Builds ros/foxglove_msgs (Foxglove's ImageAnnotations family, which no PyPI wheel carries)
# into PREFIX with the rosidl generators of the venv's ROS 2 distribution, so the node built
# against the wheels can publish `keypoints/annotations` (foxglove_annotations) and rclpy can
# read it. With a ROS install use its package instead: apt install ros-$ROS_DISTRO-foxglove-msgs.
#
#   scripts/setup-ros-msgs.sh VENV DISTRO PREFIX     (called by scripts/setup-ros.sh)
#
# The generators (ament_cmake, rosidl_*) are build-time wheels the runtime set leaves out:
# installed here into the venv. Idempotent: a stamp of
# the message files, this script and the venv's wheel stamp skips the build (~25 s on 2
# cores when it runs).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
V=$1; DISTRO=$2; P=$3
SRC=$ROOT/ros/foxglove_msgs
py=$V/bin/python
log() { echo "[setup-ros-msgs] $*" >&2; }
STAMP=$P/.gpu_features-ros-msgs-stamp
WANT=$( (cd "$SRC" && cat package.xml CMakeLists.txt msg/*.msg; cat "$ROOT/scripts/setup-ros-msgs.sh" "$V/.gpu_features-ros-stamp") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ] && [ -e "$P/share/foxglove_msgs/package.xml" ]; then
  exit 0
fi
case "$DISTRO" in
  kilted | jazzy) ;;
  *) log "DISTRO $DISTRO: kilted or jazzy"; exit 2 ;;
esac
log "building foxglove_msgs for $DISTRO into $P"
# The generator family by name (the wheels do not declare all of their dependencies; the
# index has one version of each per distribution). empy 3.3.4: what the generators' templates
# need (../shared/ros-tools pins it too), so not the runtime set's constraints (empy 4).
pk=()
for n in ament-cmake ament-cmake-core ament-cmake-export-definitions ament-cmake-export-dependencies \
  ament-cmake-export-include-directories ament-cmake-export-interfaces ament-cmake-export-libraries \
  ament-cmake-export-link-flags ament-cmake-export-targets ament-cmake-gen-version-h \
  ament-cmake-include-directories ament-cmake-libraries ament-cmake-python ament-cmake-ros \
  ament-cmake-target-dependencies ament-cmake-test ament-cmake-version ament-package \
  rosidl-adapter rosidl-cli rosidl-cmake rosidl-core-generators rosidl-core-runtime \
  rosidl-default-generators rosidl-default-runtime rosidl-generator-c rosidl-generator-cpp \
  rosidl-generator-py rosidl-generator-type-description rosidl-parser rosidl-pycommon \
  rosidl-typesupport-c rosidl-typesupport-cpp rosidl-typesupport-fastrtps-c \
  rosidl-typesupport-fastrtps-cpp rosidl-typesupport-interface \
  rosidl-typesupport-introspection-c rosidl-typesupport-introspection-cpp; do
  pk+=("ros-$DISTRO-$n")
done
# Jazzy's generators also find these (its ament_cmake_ros asks for the test helpers).
[ "$DISTRO" = jazzy ] && pk+=(ros-jazzy-ament-cmake-gmock ros-jazzy-ament-cmake-gtest
                            ros-jazzy-ament-cmake-pytest ros-jazzy-python-cmake-module)
"$py" -m pip install -q --disable-pip-version-check wheel setuptools catkin-pkg "empy==3.3.4" \
  lark cmake "${pk[@]}" >&2
# The wheels' CMake configs name the include folder of the machine they were built on
# (/opt/python/cp311-cp311/...): point it at this Python's (as ../shared/ros-tools does).
inc=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
[ -e /usr/include/python3.11/Python.h ] && inc=/usr/include/python3.11
mkdir -p /opt/python/cp311-cp311/include
[ -e /opt/python/cp311-cp311/include/python3.11 ] || ln -s "$inc" /opt/python/cp311-cp311/include/python3.11
b=$(mktemp -d)
rm -rf "$P"
if ! ( cd "$b" && AMENT_PREFIX_PATH=$V CMAKE_PREFIX_PATH=$V PATH=$V/bin:$PATH \
       cmake "$SRC" -DCMAKE_INSTALL_PREFIX="$P" -DPython3_EXECUTABLE="$py" -DBUILD_TESTING=OFF \
         >cmake.log 2>&1 && make -j2 install >make.log 2>&1 ); then
  tail -n 30 "$b/cmake.log" "$b/make.log" >&2 || true
  log "foxglove_msgs build failed; logs in $b"
  exit 1
fi
rm -rf "$b"
# Read by build.rs: the node gets a run path to this prefix's libraries.
touch "$P/.gpu_features-ros-msgs-prefix"
echo "$WANT" >"$STAMP"
log "foxglove_msgs ready in $P"
