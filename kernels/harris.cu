// Dense Harris (cv::cornerHarris) + 3x3 NMS + quality threshold: GPU twin of
// harris::dense_corners. Not implemented on the GPU yet: the CUDA backend runs the CPU
// reference on the downloaded pyramid for `detector.method: harris` (see src/cuda/mod.rs).
// The kernels below are placeholders so that the module layout is final.
#include "common.cuh"

extern "C" __global__ void harris_dense(const u8* img, int w, int h, float* out) {}
extern "C" __global__ void harris_nms(const float* resp, int w, int h, float thr, u32* flags) {}
