#!/usr/bin/env bash
# Idempotent: NVIDIA's runtime compiler (libnvrtc) from PyPI, so that the kernels can be
# compiled without a GPU or a CUDA install (the test
# cuda::context::tests::kernels_compile_with_nvrtc; scripts/cubin-regs.py reads the result).
# Prints the directory that holds libnvrtc (for LD_LIBRARY_PATH).
#
#   scripts/setup-nvrtc.sh      # CUDA 12's NVRTC (12.9) into target/nvrtc
#   scripts/setup-nvrtc.sh 13   # CUDA 13's (13.0, JetPack 7 / Thor) into target/nvrtc13
#
# CUDA 13's wheel ships libnvrtc.so.13, a name cudarc (built for CUDA 12) does not try; the
# folder printed for it holds a libnvrtc.so link to it, the name a CUDA 13 install's
# development package provides (docs/jetson.md). GF_NVRTC_DIR overrides the location.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MAJOR=${1:-12}
case "$MAJOR" in
  12) DIR=${GF_NVRTC_DIR:-$ROOT/target/nvrtc}; PKG="nvidia-cuda-nvrtc-cu12==12.9.86"
      LIB=$DIR/nvidia/cuda_nvrtc/lib; SO=libnvrtc.so.12 ;;
  13) DIR=${GF_NVRTC_DIR:-$ROOT/target/nvrtc13}; PKG="nvidia-cuda-nvrtc==13.0.88"
      LIB=$DIR/nvidia/cu13/lib; SO=libnvrtc.so.13 ;;
  *) echo "setup-nvrtc: unknown CUDA major version '$MAJOR' (12 or 13)" >&2; exit 2 ;;
esac
if [ ! -e "$LIB/$SO" ]; then
  python3 -m pip install -q --no-deps --target "$DIR" "$PKG" >&2
fi
[ -e "$LIB/$SO" ] || { echo "setup-nvrtc: no $SO under $LIB" >&2; exit 1; }
if [ "$MAJOR" = 13 ]; then
  [ -e "$LIB/libnvrtc.so" ] || ln -sf "$SO" "$LIB/libnvrtc.so"
fi
echo "$LIB"
