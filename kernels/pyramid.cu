// Pyramid level from the previous one: cv::resize INTER_LINEAR / INTER_LINEAR_EXACT on 8-bit
// gray (GPU twin of src/cpu/pyramid.rs). The per-column / per-row taps and fixed-point
// weights are the CPU's own `ResizeTables`, uploaded once per resolution; only the
// arithmetic is here, in the same integer operations.
#include "common.cuh"

// Block (32, 8); each thread 4 consecutive pixels of one output row (a warp 128), so that the
// table and source reads of 4 pixels are in flight together: at one pixel per thread every
// thread waited on its own chain of dependent loads (table, then source).
// Grid (ceil(dw / 128), ceil(dh / 8)).
extern "C" __global__ void resize_linear(const u8* __restrict__ src, int sw, int sh,
                                         u8* __restrict__ dst, int dw, int dh,
                                         const u32* __restrict__ xofs, const u16* __restrict__ xw,
                                         const u32* __restrict__ yofs, const u16* __restrict__ yw,
                                         int exact) {
    const int xs = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (xs >= dw || y >= dh) return;
    const int y0 = (int)yofs[y], y1 = min(y0 + 1, sh - 1);
    const u32 b0 = yw[2 * y], b1 = yw[2 * y + 1];
    const u8* s0 = src + (size_t)y0 * sw;
    const u8* s1 = src + (size_t)y1 * sw;
    u8* out = dst + (size_t)y * dw;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int x = xs + j;
        if (x >= dw) break;
        const int x0 = (int)xofs[x], x1 = min(x0 + 1, sw - 1);
        const u32 a0 = xw[2 * x], a1 = xw[2 * x + 1];
        const u32 r0 = s0[x0] * a0 + s0[x1] * a1;
        const u32 r1 = s1[x0] * a0 + s1[x1] * a1;
        u32 v;
        if (exact) {
            v = (r0 * b0 + r1 * b1 + (1u << 15)) >> 16;
        } else {
            // OpenCV's SIMD vertical pass (VResizeLinearVec_32s8u), see src/cpu/pyramid.rs.
            v = ((((r0 >> 4) * b0) >> 16) + (((r1 >> 4) * b1) >> 16) + 2u) >> 2;
        }
        out[x] = (u8)(v > 255u ? 255u : v);
    }
}
