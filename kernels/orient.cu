// Intensity-centroid orientation (GPU twin of src/cpu/orient.rs), fused into the gather
// that writes the compacted candidates: out[i] = {x | y << 16, fast score, response bits,
// angle bits} in raster order per level, levels one after the other.
#include "common.cuh"

// cv::fastAtan2 with the CPU's float constants (p = {P1, P3, P5, P7}), no FMA.
__device__ __forceinline__ float fast_atan2_deg(float y, float x, float4 p, float eps) {
    float ax = fabsf(x), ay = fabsf(y);
    float c, a;
    bool steep = !(ax >= ay);
    c = steep ? __fdiv_rn(ax, __fadd_rn(ay, eps)) : __fdiv_rn(ay, __fadd_rn(ax, eps));
    float c2 = __fmul_rn(c, c);
    float poly = __fmul_rn(__fadd_rn(__fmul_rn(__fadd_rn(__fmul_rn(__fadd_rn(__fmul_rn(p.w, c2), p.z), c2), p.y), c2), p.x), c);
    a = steep ? __fsub_rn(90.0f, poly) : poly;
    if (x < 0.0f) a = __fsub_rn(180.0f, a);
    if (y < 0.0f) a = __fsub_rn(360.0f, a);
    return a;
}

__device__ float ic_angle(const u8* img, int w, int x, int y, int half, const int* __restrict__ umax,
                          float4 p, float eps) {
    const u8* c = img + (size_t)y * w + x;
    int m10 = 0, m01 = 0;
    for (int u = -half; u <= half; ++u) m10 += u * (int)c[u];
    for (int v = 1; v <= half; ++v) {
        int d = umax[v];
        int v_sum = 0;
        const u8* cp = c + v * w;
        const u8* cm = c - v * w;
        for (int u = -d; u <= d; ++u) {
            int plus = cp[u], minus = cm[u];
            v_sum += plus - minus;
            m10 += u * (plus + minus);
        }
        m01 += v * v_sum;
    }
    return fast_atan2_deg((float)m01, (float)m10, p, eps);
}

extern "C" __global__ void gather_orient(const u8* __restrict__ pyr, const LevelDesc* __restrict__ levels,
                                         int nlev, int cap, const u32* __restrict__ rc,
                                         const u32* __restrict__ rc_off, const u32* __restrict__ tr_base,
                                         const uint2* __restrict__ slots, int orient, int half,
                                         const int* __restrict__ umax, float4 atan_p, float eps,
                                         uint4* __restrict__ out, u32 out_cap) {
    __shared__ u32 rn[TILE_H], rp[TILE_H + 1];
    const int tile = blockIdx.x;
    const LevelDesc L = levels[level_of_tile(levels, nlev, tile)];
    const int lt = tile - L.tile_start;
    const int tile_x = lt % L.tiles_x, tile_y = lt / L.tiles_x;
    if (threadIdx.x < TILE_H)
        rn[threadIdx.x] = rc[L.rc_start + (tile_y * TILE_H + threadIdx.x) * L.tiles_x + tile_x];
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 a = 0;
        for (int r = 0; r < TILE_H; ++r) { rp[r] = a; a += rn[r]; }
        rp[TILE_H] = a;
    }
    __syncthreads();
    const u32 count = min(rp[TILE_H], (u32)cap);
    const u8* img = pyr + L.img_off;
    const u32 base = tr_base[L.tr_start + tile_y];
    for (u32 i = threadIdx.x; i < count; i += blockDim.x) {
        uint2 rec = slots[(size_t)tile * cap + i];
        u32 local = rec.x & 0xffffu;
        int ly = local / TILE_W, lx = local % TILE_W;
        u32 idx = base + rc_off[L.rc_start + (tile_y * TILE_H + ly) * L.tiles_x + tile_x] + (i - rp[ly]);
        int x = tile_x * TILE_W + lx, y = tile_y * TILE_H + ly;
        float angle = orient ? ic_angle(img, L.w, x, y, half, umax, atan_p, eps) : -1.0f;
        if (idx < out_cap)
            out[idx] = make_uint4((u32)x | ((u32)y << 16), rec.x >> 16, rec.y, __float_as_uint(angle));
    }
}
