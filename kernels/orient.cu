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

// ic_angle by a whole warp: lane j takes the patch columns u = j - half (+ 32 k when the
// patch is wider than a warp) over all rows, so each row's reads are one coalesced segment;
// the moments are integer sums, the same in any order. Every lane returns the angle. (The
// unrolled rows keep 8 loads in flight: one warp per corner is latency-bound.)
__device__ float ic_angle_warp(const u8* img, int w, int x, int y, int half,
                               const int* __restrict__ umax, float4 p, float eps) {
    const u8* c = img + (size_t)y * w + x;
    int m10 = 0, m01 = 0;
    for (int u = (int)(threadIdx.x & 31) - half; u <= half; u += 32) {
        const int au = abs(u);
#pragma unroll 8
        for (int v = -half; v <= half; ++v) {
            const int d = v == 0 ? half : __ldg(umax + abs(v));
            if (au <= d) {
                const int px = c[(ptrdiff_t)v * w + u];
                m10 += u * px;
                m01 += v * px;
            }
        }
    }
    m10 = warp_sum_i32(m10);
    m01 = warp_sum_i32(m01);
    return fast_atan2_deg((float)m01, (float)m10, p, eps);
}

// Block: 8 warps, one tile each. Grid: ceil(ntiles / 8). (A block per tile left most of
// 25k tiny blocks idle: a 1080p pyramid's tiles mostly hold 0-3 survivors.)
extern "C" __global__ void gather_orient(const u8* __restrict__ pyr, const LevelDesc* __restrict__ levels,
                                         int nlev, int ntiles, int cap, const u32* __restrict__ rc,
                                         const u32* __restrict__ rc_off, const u32* __restrict__ tr_base,
                                         const uint2* __restrict__ slots, int orient, int half,
                                         const int* __restrict__ umax, float4 atan_p, float eps,
                                         uint4* __restrict__ out, u32 out_cap) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ u32 rp_all[8][TILE_H];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int tile = blockIdx.x * 8 + warp;
    if (tile >= ntiles) return;  // warp-uniform
    const LevelDesc L = levels[level_of_tile(levels, nlev, tile)];
    const int lt = tile - L.tile_start;
    const int tile_x = lt % L.tiles_x, tile_y = lt / L.tiles_x;
    // Row counts of the tile (lanes 0..7) and their exclusive prefix.
    const u32 n = lane < TILE_H ? rc[L.rc_start + (tile_y * TILE_H + lane) * L.tiles_x + tile_x] : 0u;
    u32 incl = n;
#pragma unroll
    for (int o = 1; o < TILE_H; o <<= 1) {
        const u32 y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
    }
    u32* rp = rp_all[warp];
    if (lane < TILE_H) rp[lane] = incl - n;
    const u32 count = min(__shfl_sync(0xffffffffu, incl, TILE_H - 1), (u32)cap);
    __syncwarp();
    const u8* img = pyr + L.img_off;
    const u32 base = tr_base[L.tr_start + tile_y];
    for (u32 i = lane; i < count; i += 32) {
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
