// goodFeaturesToTrack on the GPU (the scaled Sobel derivatives and the products' row sums
// come from the dense Harris kernels, kernels/harris.cu): the twin of cpu/gftt.rs up to the
// sort, which the host does on the few candidates.
//   gftt_boxsum      one thread per column and product: OpenCV's running column sums of the row sums
//                    (f64: add the new row, round to f32, subtract the oldest), the three f32
//                    box sums out; rows loaded GFTT_AHEAD at a time ahead of the chain, and
//                    nothing else in the loop, since a column is one thread's serial chain
//   gftt_eig         the minimum eigenvalue of every pixel (cv::cornerMinEigenVal: every step
//                    rounded, nothing fused)
//   gftt_max         the map's maximum over the mask (atomicMax on an order-preserving key)
//   gftt_discs       VINS's mask from the kept tracks' discs (the mask set to 255 before; their
//                    count and radius read from memory): blocks over the discs, threads over
//                    the rows, each row's span (half-width by row offset, from
//                    the host's table of cv::circle's filled disc) clipped to the image and zeroed
//   gftt_candidates  IPP's threshold (v < max * quality + FLT_EPSILON zeroed), the 3x3
//                    dilation, strict local-maximum test (v == dilated, v != 0) inside the
//                    one-pixel border and the mask; survivors appended as (value bits, index)
#include "common.cuh"

__device__ __forceinline__ u32 gftt_key(float v) {
    const u32 f = __float_as_uint(v);
    return (f & 0x80000000u) ? ~f : (f | 0x80000000u);
}

__device__ __forceinline__ float gftt_unkey(u32 k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

#define GFTT_AHEAD 32

extern "C" __global__ void gftt_boxsum(int w, int h, int block, const double* __restrict__ sxx,
                                       const double* __restrict__ sxy, const double* __restrict__ syy,
                                       float* __restrict__ oa, float* __restrict__ ob,
                                       float* __restrict__ oc) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    // blockIdx.y picks the product: the three chains of a column are independent.
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= w) return;
    const double* __restrict__ src = blockIdx.y == 0 ? sxx : blockIdx.y == 1 ? sxy : syy;
    float* __restrict__ dst = blockIdx.y == 0 ? oa : blockIdx.y == 1 ? ob : oc;
    const int anchor = block / 2, rows = h + block - 1;
    double s = 0.0;
    int py = 0;
    for (; py < block - 1 && py < rows; ++py) s = __dadd_rn(s, src[(size_t)reflect101(py - anchor, h) * w + x]);
    // Row py adds the row sums of row py - anchor (reflected), writes output row
    // py + 1 - block and subtracts that row's first input row.
    for (; py + GFTT_AHEAD <= rows; py += GFTT_AHEAD) {
        double nv[GFTT_AHEAD], ov[GFTT_AHEAD];
#pragma unroll
        for (int r = 0; r < GFTT_AHEAD; ++r) {
            nv[r] = src[(size_t)reflect101(py + r - anchor, h) * w + x];
            ov[r] = src[(size_t)reflect101(py + r + 1 - block - anchor, h) * w + x];
        }
#pragma unroll
        for (int r = 0; r < GFTT_AHEAD; ++r) {
            const double a0 = __dadd_rn(s, nv[r]);
            dst[(size_t)(py + r + 1 - block) * w + x] = __double2float_rn(a0);
            s = __dsub_rn(a0, ov[r]);
        }
    }
    for (; py < rows; ++py) {
        const double a0 = __dadd_rn(s, src[(size_t)reflect101(py - anchor, h) * w + x]);
        dst[(size_t)(py + 1 - block) * w + x] = __double2float_rn(a0);
        s = __dsub_rn(a0, src[(size_t)reflect101(py + 1 - block - anchor, h) * w + x]);
    }
}

extern "C" __global__ void gftt_eig(const float* __restrict__ sa, const float* __restrict__ sb,
                                    const float* __restrict__ sc, float* __restrict__ eig, int n) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float a = sa[i], b = sb[i], c = sc[i];
    const float ah = __fmul_rn(a, 0.5f), ch = __fmul_rn(c, 0.5f), t = __fsub_rn(ah, ch);
    eig[i] = __fsub_rn(__fadd_rn(ah, ch), __fsqrt_rn(__fadd_rn(__fmul_rn(t, t), __fmul_rn(b, b))));
}

extern "C" __global__ void gftt_max(const float* __restrict__ eig, const u8* __restrict__ mask, int n,
                                    u32* __restrict__ maxkey) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    u32 best = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (!mask || mask[i]) best = max(best, gftt_key(eig[i]));
    for (int o = 16; o > 0; o >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, o));
    if ((threadIdx.x & 31) == 0 && best) atomicMax(maxkey, best);
}

extern "C" __global__ void gftt_candidates(const float* __restrict__ eig, const u8* __restrict__ mask,
                                           int w, int h, const u32* __restrict__ maxkey, double quality,
                                           uint2* __restrict__ out, u32* __restrict__ count, int cap) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= w * h) return;
    const int x = i % w, y = i / w;
    if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1) return;
    if (mask && !mask[i]) return;
    const u32 mk = *maxkey;
    const double mx = mk ? (double)gftt_unkey(mk) : 0.0;
    const float thr = __fadd_rn(__double2float_rn(__dmul_rn(mx, quality)), 1.1920929e-07f);
    const float v = eig[i] < thr ? 0.0f : eig[i];
    if (v == 0.0f) return;
    float dil = 0.0f;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            const float u = eig[i + dy * w + dx];
            dil = fmaxf(dil, u < thr ? 0.0f : u);
        }
    if (v != dil) return;
    const u32 slot = atomicAdd(count, 1u);
    if ((int)slot < cap) out[slot] = make_uint2(__float_as_uint(v), (u32)i);
}

extern "C" __global__ void gftt_discs(const int* __restrict__ discs, u8* __restrict__ mask, int w, int h) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    // discs: [n, radius, n centres' (x, y), the span table's radius + 1 half-widths], so that
    // a graph's replay reads each frame's count from memory. Blocks stride over the discs,
    // threads over the rows.
    const int n = discs[0], radius = discs[1];
    const int2* __restrict__ centers = reinterpret_cast<const int2*>(discs + 2);
    const int* __restrict__ spans = discs + 2 + 2 * n;
    for (int k = blockIdx.x; k < n; k += gridDim.x) {
        const int2 c = centers[k];
        for (int r = threadIdx.x; r <= 2 * radius; r += blockDim.x) {
            const int dy = r - radius;
            const int y = c.y + dy, half = spans[dy < 0 ? -dy : dy];
            if (y < 0 || y >= h || half < 0) continue;
            const int a = max(c.x - half, 0), b = min(c.x + half, w - 1);
            u8* row = mask + (size_t)y * w;
            for (int x = a; x <= b; ++x) row[x] = 0;
        }
    }
}
