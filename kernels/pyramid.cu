// Pyramid level from the previous one: cv::resize INTER_LINEAR / INTER_LINEAR_EXACT on 8-bit
// gray (GPU twin of src/cpu/pyramid.rs). The per-column / per-row taps and fixed-point
// weights are the CPU's own `ResizeTables`, uploaded once per resolution; only the
// arithmetic is here, in the same integer operations.
#include "common.cuh"

// One output pixel from its two source rows' taps: horizontal sums r0 (upper row) and r1
// (lower row), vertical weights b0 and b1.
__device__ __forceinline__ u8 resize_blend(u32 r0, u32 r1, u32 b0, u32 b1, int exact) {
    u32 v;
    if (exact) {
        v = (r0 * b0 + r1 * b1 + (1u << 15)) >> 16;
    } else {
        // OpenCV's SIMD vertical pass (VResizeLinearVec_32s8u), see src/cpu/pyramid.rs.
        v = ((((r0 >> 4) * b0) >> 16) + (((r1 >> 4) * b1) >> 16) + 2u) >> 2;
    }
    return (u8)(v > 255u ? 255u : v);
}

// Output pixel (x, y) from rows s0 / s1 (already chosen by the row taps) of a source `sw`
// wide whose columns start at `col0` (0 for a whole row, the region's first column for a
// shared-memory region).
__device__ __forceinline__ u8 resize_px(const u8* s0, const u8* s1, int sw, int col0, int x,
                                        const u32* __restrict__ xofs, const u16* __restrict__ xw,
                                        u32 b0, u32 b1, int exact) {
    const int x0 = (int)xofs[x], x1 = min(x0 + 1, sw - 1);
    const u32 a0 = xw[2 * x], a1 = xw[2 * x + 1];
    const u32 r0 = s0[x0 - col0] * a0 + s0[x1 - col0] * a1;
    const u32 r1 = s1[x0 - col0] * a0 + s1[x1 - col0] * a1;
    return resize_blend(r0, r1, b0, b1, exact);
}

// Block (32, 8); each thread 4 consecutive pixels of one output row (a warp 128), so that the
// table and source reads of 4 pixels are in flight together: at one pixel per thread every
// thread waited on its own chain of dependent loads (table, then source).
// Grid (ceil(dw / 128), ceil(dh / 8)).
extern "C" __global__ void resize_linear(const u8* __restrict__ src, int sw, int sh,
                                         u8* __restrict__ dst, int dw, int dh,
                                         const u32* __restrict__ xofs, const u16* __restrict__ xw,
                                         const u32* __restrict__ yofs, const u16* __restrict__ yw,
                                         int exact) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
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
        out[x] = resize_px(s0, s1, sw, 0, x, xofs, xw, b0, b1, exact);
    }
}

// Two levels in one launch: `mid` from `src`, then `dst` from `mid`, each block computing
// the part of `mid` that its 128x8 tile of `dst` reads into shared memory (and writing the
// part of `mid` it owns to global memory), so the chain of launches and their short-grid
// tails is halved. The values are resize_linear's, pixel for pixel.
//
// Ownership: block (bx, by) owns mid columns [bx == 0 ? 0 : xofs2[dx0], last column
// block ? mw : xofs2[dx1]) where [dx0, dx1) are its dst columns (likewise rows): the
// ranges of neighbouring blocks meet, so every mid pixel is written exactly once. The block
// computes its owned range and up to the last column its dst pixels read
// (xofs2[dx1 - 1] + 1); the host checks once per resolution that this region fits
// RESIZE2_MW x RESIZE2_MH for every block (src/cuda/pyramid.rs), else it launches the levels
// one by one.
#define RESIZE2_TW 128
#define RESIZE2_TH 8
#define RESIZE2_MW 196
#define RESIZE2_MH 16

// A block's region of mid along one axis, [start, end), and the end of the part it owns,
// [start, own_end) (see the ownership note above).
struct MidSpan {
    int start, end, own_end;
};
__device__ __forceinline__ MidSpan mid_span(const u32* __restrict__ ofs2, int d0, int d1, int dn,
                                            int mn) {
    MidSpan r;
    r.start = d0 == 0 ? 0 : (int)ofs2[d0];
    r.own_end = d1 >= dn ? mn : (int)ofs2[d1];
    const int need_end = min((int)ofs2[d1 - 1] + 2, mn);
    r.end = max(r.own_end, need_end);
    return r;
}

// Block (32, 8). Grid (ceil(dw / 128), ceil(dh / 8)).
extern "C" __global__ void resize_linear2(const u8* __restrict__ src, int sw, int sh,
                                          u8* __restrict__ mid, int mw, int mh,
                                          u8* __restrict__ dst, int dw, int dh,
                                          const u32* __restrict__ xofs1, const u16* __restrict__ xw1,
                                          const u32* __restrict__ yofs1, const u16* __restrict__ yw1,
                                          const u32* __restrict__ xofs2, const u16* __restrict__ xw2,
                                          const u32* __restrict__ yofs2, const u16* __restrict__ yw2,
                                          int exact) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ u8 m[RESIZE2_MH][RESIZE2_MW];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int dx0 = blockIdx.x * RESIZE2_TW, dy0 = blockIdx.y * RESIZE2_TH;
    const int dx1 = min(dx0 + RESIZE2_TW, dw), dy1 = min(dy0 + RESIZE2_TH, dh);
    const MidSpan cx = mid_span(xofs2, dx0, dx1, dw, mw);
    const MidSpan cy = mid_span(yofs2, dy0, dy1, dh, mh);

    for (int my = cy.start + ty; my < cy.end; my += RESIZE2_TH) {
        const int y0 = (int)yofs1[my], y1 = min(y0 + 1, sh - 1);
        const u32 b0 = yw1[2 * my], b1 = yw1[2 * my + 1];
        const u8* s0 = src + (size_t)y0 * sw;
        const u8* s1 = src + (size_t)y1 * sw;
        const bool own_row = my < cy.own_end;
        for (int mx = cx.start + tx; mx < cx.end; mx += 32) {
            const u8 v = resize_px(s0, s1, sw, 0, mx, xofs1, xw1, b0, b1, exact);
            m[my - cy.start][mx - cx.start] = v;
            if (own_row && mx < cx.own_end) mid[(size_t)my * mw + mx] = v;
        }
    }
    __syncthreads();

    const int y = dy0 + ty, xs = dx0 + tx * 4;
    if (y >= dy1 || xs >= dx1) return;
    const int y0 = (int)yofs2[y], y1 = min(y0 + 1, mh - 1);
    const u32 b0 = yw2[2 * y], b1 = yw2[2 * y + 1];
    const u8* s0 = m[y0 - cy.start];
    const u8* s1 = m[y1 - cy.start];
    u8* out = dst + (size_t)y * dw;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int x = xs + j;
        if (x >= dx1) break;
        out[x] = resize_px(s0, s1, mw, cx.start, x, xofs2, xw2, b0, b1, exact);
    }
}
