#!/usr/bin/env bash
# Idempotent: NVIDIA's runtime compiler (libnvrtc) from PyPI into target/nvrtc, so that the
# kernels can be compiled without a GPU or a CUDA install (the test
# cuda::context::tests::kernels_compile_with_nvrtc; scripts/cubin-regs.py reads the result).
# Prints the directory that holds libnvrtc.so.12 (for LD_LIBRARY_PATH).
# GF_NVRTC_DIR overrides the location.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${GF_NVRTC_DIR:-$ROOT/target/nvrtc}
LIB=$DIR/nvidia/cuda_nvrtc/lib
if [ ! -e "$LIB/libnvrtc.so.12" ]; then
  python3 -m pip install -q --no-deps --target "$DIR" "nvidia-cuda-nvrtc-cu12==12.9.86" >&2
fi
[ -e "$LIB/libnvrtc.so.12" ] || { echo "setup-nvrtc: no libnvrtc.so.12 under $LIB" >&2; exit 1; }
echo "$LIB"
