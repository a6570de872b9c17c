// Deterministic keypoint compaction (no atomics): an ordered scan over the per-row survivor
// counts written by fast_harris, so that the compacted candidates of every level come out in
// raster order (y, then x) on every run, exactly the order of the CPU's fast::detect.
//
// Count layout: for each level, for each image row y, one count per tile column, i.e. the
// row-count array is already in raster order. scan_tile_rows scans the TILE_H * tiles_x
// counts of one tile row (one block each); scan_levels scans the tile-row totals of every
// level (one block, a warp per level) and writes the header {total, count[l]..., base[l]...}.
#include "common.cuh"

extern "C" __global__ void scan_tile_rows(const LevelDesc* __restrict__ levels, int nlev,
                                          const u32* __restrict__ rc, u32* __restrict__ rc_off,
                                          u32* __restrict__ tr_total) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ u32 sh[32];
    const int tr = blockIdx.x;
    const LevelDesc L = levels[level_of_tile_row(levels, nlev, tr)];
    const int local = tr - L.tr_start;
    const int n = TILE_H * L.tiles_x;
    const int base = L.rc_start + local * n;
    u32 carry = 0;
    for (int i0 = 0; i0 < n; i0 += blockDim.x) {
        int i = i0 + threadIdx.x;
        u32 v = i < n ? rc[base + i] : 0u;
        u32 tot;
        u32 ex = block_exclusive_scan(v, sh, &tot);
        if (i < n) rc_off[base + i] = carry + ex;
        carry += tot;
    }
    if (threadIdx.x == 0) tr_total[tr] = carry;
}

// Block: 1024 threads, one warp per level (config: at most 32 levels). The levels' scans run
// side by side, then one thread turns the level totals into bases (a scan of the levels one
// after the other took ~11 us of a 1080p frame: 8 block-wide scans, each with its barriers).
extern "C" __global__ void scan_levels(const LevelDesc* __restrict__ levels, int nlev,
                                       const u32* __restrict__ tr_total, u32* __restrict__ tr_base,
                                       u32* __restrict__ header) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ u32 level_total[32], level_base[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    LevelDesc L;
    if (warp < nlev) {
        L = levels[warp];
        u32 carry = 0;
        for (int i0 = 0; i0 < L.tiles_y; i0 += 32) {
            const int i = i0 + lane;
            const u32 v = i < L.tiles_y ? tr_total[L.tr_start + i] : 0u;
            u32 x = v;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const u32 y = __shfl_up_sync(0xffffffffu, x, o);
                if (lane >= o) x += y;
            }
            if (i < L.tiles_y) tr_base[L.tr_start + i] = carry + x - v;
            carry += __shfl_sync(0xffffffffu, x, 31);
        }
        if (lane == 0) level_total[warp] = carry;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 running = 0;
        for (int l = 0; l < nlev; ++l) {
            level_base[l] = running;
            header[1 + l] = level_total[l];
            header[1 + nlev + l] = running;
            running += level_total[l];
        }
        header[0] = running;
    }
    __syncthreads();
    if (warp < nlev && level_base[warp] != 0) {
        for (int i = lane; i < L.tiles_y; i += 32) tr_base[L.tr_start + i] += level_base[warp];
    }
}
