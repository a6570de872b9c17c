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

// Block: 8 warps, GATHER_TILES consecutive tiles each (lane 8t + r reads row r's count of
// the warp's tile t). Grid: ceil(ntiles / (8 * GATHER_TILES)). A 1080p pyramid's 25k tiles
// mostly hold 0-3 survivors: with a block per tile most of the blocks idled, with a warp
// per tile the warps took three waves of the GPU, each warp a chain of dependent loads for
// a tile that mostly held nothing (docs/performance.md, change 45).
#define GATHER_TILES 4
extern "C" __global__ void gather_orient(const u8* __restrict__ pyr, const LevelDesc* __restrict__ levels,
                                         int nlev, int ntiles, int cap, const u32* __restrict__ rc,
                                         const u32* __restrict__ rc_off, const u32* __restrict__ tr_base,
                                         const uint2* __restrict__ slots, int orient, int half,
                                         const int* __restrict__ umax, float4 atan_p, float eps,
                                         uint4* __restrict__ out, u32 out_cap) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int first = (blockIdx.x * 8 + warp) * GATHER_TILES;
    if (first >= ntiles) return;  // warp-uniform
    // Lanes 8t..8t+7: tile t's level, position and row counts.
    const int row = lane & (TILE_H - 1);
    const int tile = first + lane / TILE_H;
    const bool valid = tile < ntiles;
    const int l = valid ? level_of_tile(levels, nlev, tile) : 0;
    const int lt = tile - levels[l].tile_start, tiles_x = levels[l].tiles_x;
    const int tile_x = lt % tiles_x, tile_y = lt / tiles_x;
    const int rc_row = levels[l].rc_start + (tile_y * TILE_H + row) * tiles_x + tile_x;
    const u32 n = valid ? rc[rc_row] : 0u;
    // The exclusive prefix of the rows within each tile (segments of TILE_H lanes).
    u32 incl = n;
#pragma unroll
    for (int o = 1; o < TILE_H; o <<= 1) {
        const u32 y = __shfl_up_sync(0xffffffffu, incl, o);
        if (row >= o) incl += y;
    }
    const u32 row_prefix = incl - n;
    // Each tile's survivors (its segment's last lane), and the rows' places in the level:
    // the tile row's base plus the row's offset.
    const u32 count = min(__shfl_sync(0xffffffffu, incl, lane | (TILE_H - 1)), (u32)cap);
    const u32 any = __ballot_sync(0xffffffffu, count > 0 && row == 0);
    if (any == 0) return;  // warp-uniform: most warps end here
    const u32 row_base = n > 0 ? tr_base[levels[l].tr_start + tile_y] + rc_off[rc_row] : 0u;
    const u8* img = pyr + levels[l].img_off;
    const int w = levels[l].w;
    for (u32 tiles = any; tiles != 0; tiles &= tiles - 1) {
        const int seg = __ffs(tiles) - 1;  // lane 8t of tile t
        const int t_tile = first + seg / TILE_H;
        const u32 t_count = __shfl_sync(0xffffffffu, count, seg);
        const int t_x = __shfl_sync(0xffffffffu, tile_x, seg);
        const int t_y = __shfl_sync(0xffffffffu, tile_y, seg);
        const int t_w = __shfl_sync(0xffffffffu, w, seg);
        const u8* t_img = (const u8*)__shfl_sync(0xffffffffu, (unsigned long long)img, seg);
        for (u32 i0 = 0; i0 < t_count; i0 += 32) {
            const u32 i = i0 + lane;
            u32 ly = 0;
            uint2 rec = make_uint2(0u, 0u);
            if (i < t_count) {
                rec = slots[(size_t)t_tile * cap + i];
                ly = (rec.x & 0xffffu) / TILE_W;
            }
            // Every lane asks (the shuffles are warp-wide): row ly's base and prefix.
            const u32 base = __shfl_sync(0xffffffffu, row_base, seg + (int)ly);
            const u32 rp = __shfl_sync(0xffffffffu, row_prefix, seg + (int)ly);
            if (i < t_count) {
                const u32 idx = base + (i - rp);
                const int x = t_x * TILE_W + (int)((rec.x & 0xffffu) % TILE_W);
                const int y = t_y * TILE_H + (int)ly;
                const float angle = orient ? ic_angle(t_img, t_w, x, y, half, umax, atan_p, eps) : -1.0f;
                if (idx < out_cap)
                    out[idx] = make_uint4((u32)x | ((u32)y << 16), rec.x >> 16, rec.y, __float_as_uint(angle));
            }
        }
    }
}
