// Pyramid level from the previous one: cv::resize INTER_LINEAR / INTER_LINEAR_EXACT on 8-bit
// gray (GPU twin of src/cpu/pyramid.rs). The per-column / per-row taps and fixed-point
// weights are the CPU's own `ResizeTables`, uploaded once per resolution; only the
// arithmetic is here, in the same integer operations.
#include "common.cuh"

// One output pixel from its two source rows' taps: horizontal sums r0 (upper row) and r1
// (lower row), vertical weights b0 and b1.
template <bool EXACT>
__device__ __forceinline__ u8 resize_blend(u32 r0, u32 r1, u32 b0, u32 b1) {
    u32 v;
    if (EXACT) {
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
template <bool EXACT>
__device__ __forceinline__ u8 resize_px(const u8* s0, const u8* s1, int sw, int col0, int x,
                                        const u32* __restrict__ xofs, const u16* __restrict__ xw,
                                        u32 b0, u32 b1) {
    const int x0 = (int)xofs[x], x1 = min(x0 + 1, sw - 1);
    const u32 a0 = xw[2 * x], a1 = xw[2 * x + 1];
    const u32 r0 = s0[x0 - col0] * a0 + s0[x1 - col0] * a1;
    const u32 r1 = s1[x0 - col0] * a0 + s1[x1 - col0] * a1;
    return resize_blend<EXACT>(r0, r1, b0, b1);
}

// Note (four pixels from two rows of words): a thread's 4 neighbouring output pixels
// x4..x4+3 (x4 % 4 == 0) read source columns xofs[x4] .. xofs[x4 + 3] + 1, at most
// QUAD_SPAN bytes for the scales a pyramid uses (the taps move by at most 2 per pixel for
// scales up to 2). So each source row is read as 3 aligned words, shifted so that byte 0 is
// column xofs[x4], and each pixel's pair of bytes (x0, x1) comes out of those two words by
// one PRMT, its horizontal sum by one 2-way dot product (IDP.2A) with its weight pair; the
// 4 offsets and 4 weight pairs are one 16-byte load each (the tables are padded to whole
// quads on the host). Before, every pixel made 3 table loads and 4 byte loads with their 64-bit
// addresses: ~40 instructions per pixel, 2.4 M per launch at 1080p (run 144). The arithmetic
// is resize_px's, integer for integer. A wider quad (a larger scale) takes resize_px's path.
#define QUAD_SPAN 8

// Bytes 0..7 of row `s` from column `first`: 3 aligned word loads and 2 funnel shifts
// (reads up to 3 bytes before and 11 after `s + first`: the caller keeps them inside its
// buffer).
__device__ __forceinline__ uint2 row_bytes8(const u8* s, int first) {
    const u8* p = s + first;
    const u32 mis = (u32)((u64)p & 3u);
    const u32* a = (const u32*)(p - mis);  // pointer arithmetic: global or shared loads stay so
    const u32 sh = 8u * mis;
    const u32 w0 = a[0], w1 = a[1], w2 = a[2];
    return make_uint2(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh));
}

// Output pixels x4..x4+3 packed little-endian (note "four pixels from two rows of words"):
// rows s0 / s1 of a source `sw` wide whose columns start at `col0`, as in resize_px.
template <bool EXACT>
__device__ __forceinline__ u32 resize_quad(const u8* s0, const u8* s1, int sw, int col0, int x4,
                                           const u32* __restrict__ xofs, const u16* __restrict__ xw,
                                           u32 b0, u32 b1) {
    const uint4 o = *(const uint4*)(xofs + x4);
    const int first = (int)o.x;
    if ((int)o.w + 1 - first >= QUAD_SPAN) {
        u32 v = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j)
            v |= (u32)resize_px<EXACT>(s0, s1, sw, col0, x4 + j, xofs, xw, b0, b1) << (8 * j);
        return v;
    }
    const uint4 a = *(const uint4*)(xw + 2 * x4);  // the weight pairs as words (a0 | a1 << 16)
    const uint2 r0 = row_bytes8(s0, first - col0), r1 = row_bytes8(s1, first - col0);
    const u32 ox[4] = {o.x, o.y, o.z, o.w}, ax[4] = {a.x, a.y, a.z, a.w};
    u32 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int k = (int)ox[j] - first;                   // x0's byte
        const int k1 = min((int)ox[j] + 1, sw - 1) - first;  // x1's byte
        const u32 sel = (u32)k | ((u32)k1 << 4);
        const u32 h0 = __dp2a_lo(ax[j], __byte_perm(r0.x, r0.y, sel), 0u);
        const u32 h1 = __dp2a_lo(ax[j], __byte_perm(r1.x, r1.y, sel), 0u);
        v[j] = resize_blend<EXACT>(h0, h1, b0, b1);
    }
    return __byte_perm(__byte_perm(v[0], v[1], 0x0040), __byte_perm(v[2], v[3], 0x0040), 0x5410);
}

// Bytes j in [lo, hi) of the quad `v` to p[j]: one word store when all 4 go to an aligned
// place.
__device__ __forceinline__ void store_quad(u8* p, u32 v, int lo, int hi) {
    if (lo == 0 && hi >= 4 && ((u64)p & 3u) == 0) {
        *(u32*)p = v;
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (j >= lo && j < hi) p[j] = (u8)(v >> (8 * j));
}

// Block (32, 8); each thread 4 consecutive pixels of one output row (a warp 128), so that the
// table and source reads of 4 pixels are in flight together (at one pixel per thread every
// thread waited on its own chain of dependent loads, table then source), read as words (note
// "four pixels from two rows of words"). The source is never the pyramid's last level, so
// the words past a row's end are inside the pyramid's buffer.
// Grid (ceil(dw / 128), ceil(dh / 8)).
template <bool EXACT>
__device__ __forceinline__ void resize_linear_body(const u8* __restrict__ src, int sw, int sh,
                                                   u8* __restrict__ dst, int dw, int dh,
                                                   const u32* __restrict__ xofs,
                                                   const u16* __restrict__ xw,
                                                   const u32* __restrict__ yofs,
                                                   const u16* __restrict__ yw) {
    const int xs = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (xs >= dw || y >= dh) return;
    const int y0 = (int)yofs[y], y1 = min(y0 + 1, sh - 1);
    const u32 b0 = yw[2 * y], b1 = yw[2 * y + 1];
    const u8* s0 = src + (size_t)y0 * sw;
    const u8* s1 = src + (size_t)y1 * sw;
    store_quad(dst + (size_t)y * dw + xs, resize_quad<EXACT>(s0, s1, sw, 0, xs, xofs, xw, b0, b1),
               0, dw - xs);
}

// `exact` picks one of two compiled bodies (one uniform branch): as a runtime test inside
// the arithmetic both blends were issued, predicated.
extern "C" __global__ void resize_linear(const u8* __restrict__ src, int sw, int sh,
                                         u8* __restrict__ dst, int dw, int dh,
                                         const u32* __restrict__ xofs, const u16* __restrict__ xw,
                                         const u32* __restrict__ yofs, const u16* __restrict__ yw,
                                         int exact) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    if (exact)
        resize_linear_body<true>(src, sw, sh, dst, dw, dh, xofs, xw, yofs, yw);
    else
        resize_linear_body<false>(src, sw, sh, dst, dw, dh, xofs, xw, yofs, yw);
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
#define RESIZE2_THREADS (32 * RESIZE2_TH)  // block (32, RESIZE2_TH), 4 dst pixels per thread

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

// Phase 1 computes the region's mid pixels a quad per thread, the (row, quad) items of the
// whole region dealt out over the block's RESIZE2_THREADS threads (~40 quads a row: one warp per row
// left most lanes idle in its second pass); phase 2 the block's dst tile, a quad per thread.
template <bool EXACT>
__device__ __forceinline__ void resize_linear2_body(
    const u8* __restrict__ src, int sw, int sh, u8* __restrict__ mid, int mw, int mh,
    u8* __restrict__ dst, int dw, int dh, const u32* __restrict__ xofs1,
    const u16* __restrict__ xw1, const u32* __restrict__ yofs1, const u16* __restrict__ yw1,
    const u32* __restrict__ xofs2, const u16* __restrict__ xw2, const u32* __restrict__ yofs2,
    const u16* __restrict__ yw2, u8 (*m)[RESIZE2_MW + 4]) {
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;  // < RESIZE2_THREADS
    const int dx0 = blockIdx.x * RESIZE2_TW, dy0 = blockIdx.y * RESIZE2_TH;
    const int dx1 = min(dx0 + RESIZE2_TW, dw), dy1 = min(dy0 + RESIZE2_TH, dh);
    const MidSpan cx = mid_span(xofs2, dx0, dx1, dw, mw);
    const MidSpan cy = mid_span(yofs2, dy0, dy1, dh, mh);

    const int mx0 = cx.start & ~3;
    const u32 quads = (u32)(cx.end - mx0 + 3) >> 2;  // per region row, <= 50
    const u32 items = quads * (u32)(cy.end - cy.start);
    // item / quads by a multiply-high with ceil(2^32 / quads): exact while items * quads <
    // 2^32 (here < 2^14); quads == 1 has no such 32-bit factor.
    const u32 inv = 0xffffffffu / quads + 1u;
    for (u32 i = tid; i < items; i += RESIZE2_THREADS) {
        const u32 r = quads == 1u ? i : __umulhi(i, inv);
        const int mx = mx0 + 4 * (int)(i - r * quads);
        const int my = cy.start + (int)r;
        const int y0 = (int)yofs1[my], y1 = min(y0 + 1, sh - 1);
        const u32 b0 = yw1[2 * my], b1 = yw1[2 * my + 1];
        const u32 v = resize_quad<EXACT>(src + (size_t)y0 * sw, src + (size_t)y1 * sw, sw, 0,
                                         mx, xofs1, xw1, b0, b1);
        // Bytes before cx.start or past cx.end are never read by phase 2.
        *(u32*)&m[r][mx - mx0] = v;
        if (my < cy.own_end)
            store_quad(mid + (size_t)my * mw + mx, v, max(cx.start - mx, 0), min(cx.own_end - mx, 4));
    }
    __syncthreads();

    const int y = dy0 + ty, xs = dx0 + tx * 4;
    if (y >= dy1 || xs >= dx1) return;
    const int y0 = (int)yofs2[y], y1 = min(y0 + 1, mh - 1);
    const u32 b0 = yw2[2 * y], b1 = yw2[2 * y + 1];
    store_quad(dst + (size_t)y * dw + xs,
               resize_quad<EXACT>(m[y0 - cy.start], m[y1 - cy.start], mw, mx0, xs, xofs2, xw2, b0, b1),
               0, dx1 - xs);
}

// Block (32, 8). Grid (ceil(dw / 128), ceil(dh / 8)).
extern "C" __global__ void __launch_bounds__(RESIZE2_THREADS, 6) resize_linear2(const u8* __restrict__ src, int sw, int sh,
                                          u8* __restrict__ mid, int mw, int mh,
                                          u8* __restrict__ dst, int dw, int dh,
                                          const u32* __restrict__ xofs1, const u16* __restrict__ xw1,
                                          const u32* __restrict__ yofs1, const u16* __restrict__ yw1,
                                          const u32* __restrict__ xofs2, const u16* __restrict__ xw2,
                                          const u32* __restrict__ yofs2, const u16* __restrict__ yw2,
                                          int exact) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    // The region's columns start at cx.start rounded down to a quad, so that phase 1 stores
    // aligned words; a spare row keeps phase 2's word reads past the last row inside.
    __shared__ __align__(16) u8 m[RESIZE2_MH + 1][RESIZE2_MW + 4];
    if (exact)
        resize_linear2_body<true>(src, sw, sh, mid, mw, mh, dst, dw, dh, xofs1, xw1, yofs1, yw1,
                                  xofs2, xw2, yofs2, yw2, m);
    else
        resize_linear2_body<false>(src, sw, sh, mid, mw, mh, dst, dw, dh, xofs1, xw1, yofs1, yw1,
                                   xofs2, xw2, yofs2, yw2, m);
}
