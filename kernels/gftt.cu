// goodFeaturesToTrack's selection on the GPU (the minimum-eigenvalue map comes from the
// dense Harris kernels with mode 1, kernels/harris.cu): the twin of cpu/gftt.rs up to the
// sort, which the host does on the few candidates.
//   gftt_max         the map's maximum over the mask (atomicMax on an order-preserving key)
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
