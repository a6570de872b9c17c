#!/usr/bin/env bash
# Idempotent: everything the ORB-SLAM3 parity and end-to-end need, installed by the project.
# Heavy builds live in a cache outside the clone (GF_CACHE, default ~/.cache/gpu_features),
# keyed by their sources, so a clean clone reuses them and a change rebuilds them:
#  - the real ORB-SLAM3 v1.0, headless, from ../shared/orb-slam3 (its setup.sh: apt
#    packages, DBoW2, g2o, libORB_SLAM3.so; ~20 min on 2 cores the first time), in
#    $GF_CACHE/orb-slam3 (its own stamp: its sources and patches);
#  - our programs built against it (scripts/orb-slam3/*.c*), in
#    $GF_CACHE/orb-slam3-tools/<hash of their sources and of the ORB-SLAM3 build>:
#      extractor_harness         ORB-SLAM3's ORBextractor.cc as ORB-SLAM3 compiles it
#                                (-O3 -march=native: FMA where the CPU has it),
#      extractor_harness_nofma   the same with -ffp-contract=off (a build without FMA),
#      gf_features.so            the adapter: Frame::ExtractORB fed by our clouds (LD_PRELOAD),
#      run_sequence              ORB-SLAM3 headless on a sequence folder, states per frame,
#      rectify_stereo            a PinHole stereo sequence rectified as ORB-SLAM3 does it,
#      train_vocabulary          DBoW2 training with ORB-SLAM3's own DBoW2, seeded;
#  - a vocabulary trained from tests/data (k 10, L 4, seed 1), in
#    $GF_CACHE/orb-slam3-voc/<hash>.txt;
#  - the venv of the VIO scripts (scripts/setup-vio-python.sh: target/py-vio).
# Prints shell assignments: ORB_SLAM3_DIR, ORB_TOOLS, ORB_VOCABULARY, ORB_FMA (1 when the
# build contracts to FMA), VIO_PY.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=${GF_SHARED:-$ROOT/../shared}
CACHE=${GF_CACHE:-$HOME/.cache/gpu_features}
[ -x "$SHARED/orb-slam3/setup.sh" ] || { echo "setup-orb-slam3: $SHARED/orb-slam3/setup.sh not found (set GF_SHARED)" >&2; exit 1; }
mkdir -p "$CACHE"
T0=$SECONDS
R=$(bash "$SHARED/orb-slam3/setup.sh" "$CACHE/orb-slam3")
echo "[setup-orb-slam3] ORB-SLAM3 ready in $((SECONDS - T0)) s: $R" >&2

SRC=$ROOT/scripts/orb-slam3
stamp=$( (cat "$SRC"/*.cc "$SRC"/*.cpp "$0"; cat "$CACHE/orb-slam3/.orbslam3-stamp") | sha256sum | cut -c1-16)
T=$CACHE/orb-slam3-tools/$stamp
if [ ! -f "$T/.done" ]; then
  T1=$SECONDS
  rm -rf "$T"; mkdir -p "$T"
  INC=(-I"$R" -I"$R/include" -I"$R/include/CameraModels" -I"$R/Thirdparty/Sophus" -I/usr/include/eigen3
       -I/usr/include/opencv4)
  CV=$(pkg-config --libs opencv4)
  LIBS=(-L"$R/lib" -Wl,-rpath,"$R/lib" -lORB_SLAM3 -L"$R/Thirdparty/DBoW2/lib" -Wl,-rpath,"$R/Thirdparty/DBoW2/lib"
        -lDBoW2 -L"$R/Thirdparty/g2o/lib" -Wl,-rpath,"$R/Thirdparty/g2o/lib" -lg2o -lboost_serialization -lcrypto)
  W=(-w -std=c++14 -DORBSLAM3_NO_PANGOLIN)
  # shellcheck disable=SC2086
  g++ -O3 -march=native "${W[@]}" -o "$T/extractor_harness" "$SRC/extractor_harness.cpp" "$R/src/ORBextractor.cc" \
    "${INC[@]}" $CV >&2
  # shellcheck disable=SC2086
  g++ -O3 -march=native -ffp-contract=off "${W[@]}" -o "$T/extractor_harness_nofma" "$SRC/extractor_harness.cpp" \
    "$R/src/ORBextractor.cc" "${INC[@]}" $CV >&2
  # shellcheck disable=SC2086
  g++ -O2 -fPIC -shared "${W[@]}" -o "$T/gf_features.so" "$SRC/gf_features.cc" "${INC[@]}" $CV >&2
  # shellcheck disable=SC2086
  g++ -O2 "${W[@]}" -o "$T/run_sequence" "$SRC/run_sequence.cpp" "${INC[@]}" "${LIBS[@]}" $CV -lpthread >&2
  # shellcheck disable=SC2086
  g++ -O2 "${W[@]}" -o "$T/rectify_stereo" "$SRC/rectify_stereo.cpp" "${INC[@]}" "${LIBS[@]}" $CV >&2
  # shellcheck disable=SC2086
  g++ -O2 "${W[@]}" -o "$T/train_vocabulary" "$SRC/train_vocabulary.cpp" "${INC[@]}" "${LIBS[@]}" $CV >&2
  touch "$T/.done"
  echo "[setup-orb-slam3] tools built in $((SECONDS - T1)) s" >&2
fi

# The vocabulary: tests/data's photos and real sequence, ORB-SLAM3's init budget (5000).
IMGS=("$ROOT"/tests/data/*.png "$ROOT"/tests/data/seq/*.png)
vstamp=$( (cat "$SRC/train_vocabulary.cpp" "${IMGS[@]}"; echo "k10 L4 seed1 n5000") | sha256sum | cut -c1-16)
VOC=$CACHE/orb-slam3-voc/$vstamp.txt
if [ ! -s "$VOC" ]; then
  T2=$SECONDS
  mkdir -p "$CACHE/orb-slam3-voc"
  "$T/train_vocabulary" "$VOC.tmp" 1 10 4 5000 "${IMGS[@]}" >&2
  mv "$VOC.tmp" "$VOC"
  echo "[setup-orb-slam3] vocabulary trained in $((SECONDS - T2)) s" >&2
fi

VIO_PY=$(bash "$ROOT/scripts/setup-vio-python.sh")
FMA=0
grep -qw fma /proc/cpuinfo && FMA=1
echo "ORB_SLAM3_DIR=$R"
echo "ORB_TOOLS=$T"
echo "ORB_VOCABULARY=$VOC"
echo "ORB_FMA=$FMA"
echo "VIO_PY=$VIO_PY"
