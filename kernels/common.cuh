// Shared device helpers for every kernel of gpu_features. The host concatenates this
// header and the .cu files into one NVRTC translation unit (see src/cuda/context.rs), so
// each .cu's `#include "common.cuh"` line is dropped there.
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Output tile of the tiled kernels (FAST+Harris, Canny): one warp per tile row.
#define TILE_W 32
#define TILE_H 8
#define TILE_THREADS (TILE_W * TILE_H)

// One pyramid level as the detection kernels see it (mirrors `LevelDesc` in
// src/cuda/fast_harris.rs; all ints).
struct LevelDesc {
    int w, h;          // level size
    int img_off;       // byte offset of the level in the pyramid buffer
    int tiles_x, tiles_y;
    int tile_start;    // first global tile index of this level
    int tr_start;      // first global tile-row index of this level
    int rc_start;      // first row-count entry of this level (TILE_H * tiles_x per tile row)
};

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// cv::borderInterpolate(p, len, BORDER_REFLECT_101) (src/cpu/blur.rs reflect101).
__device__ __forceinline__ int reflect101(int p, int len) {
    if (len == 1) return 0;
    while (p < 0 || p >= len) p = p < 0 ? -p : 2 * len - 2 - p;
    return p;
}

// Level of a global tile (or tile-row) index: levels are few (<= 32), a scan is enough.
__device__ __forceinline__ int level_of_tile(const LevelDesc* lv, int nlev, int tile) {
    int l = 0;
    while (l + 1 < nlev && tile >= lv[l + 1].tile_start) ++l;
    return l;
}
__device__ __forceinline__ int level_of_tile_row(const LevelDesc* lv, int nlev, int tr) {
    int l = 0;
    while (l + 1 < nlev && tr >= lv[l + 1].tr_start) ++l;
    return l;
}

// Exclusive prefix sum over a block of blockDim.x threads (a multiple of 32, <= 1024).
// `sh` must hold 32 u32. Returns the exclusive prefix of `v`; `*total` gets the block sum.
__device__ __forceinline__ u32 block_exclusive_scan(u32 v, u32* sh, u32* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    u32 x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) sh[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 s = lane < nwarps ? sh[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            u32 y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += y;
        }
        sh[lane] = s;  // inclusive warp-sum prefix
    }
    __syncthreads();
    u32 warp_base = warp > 0 ? sh[warp - 1] : 0;
    *total = sh[nwarps - 1];
    __syncthreads();  // sh may be reused by the caller
    return warp_base + x - v;
}
