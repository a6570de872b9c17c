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

// The most pyramid levels (pyramid.levels; MAX_LEVELS in src/levels.rs).
#define MAX_LEVELS 32

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

// Note (programmatic dependent launch): on sm_90 and later the host launches every kernel
// with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (`cuda.programmatic_launch`,
// src/cuda/context.rs): the next kernel in the stream is launched as soon as every block of
// the one before it has exited, without waiting for that kernel's completion and memory
// flush to be processed first. Its blocks may so start before their inputs are visible:
// every kernel's first statement is wait_for_previous_kernel() (griddepcontrol.wait), which
// holds the block until the previous kernel has completed with its writes visible, and
// returns at once for a kernel launched without the attribute. Nothing before it touches
// global memory, so every read and write keeps the stream's order; a kernel's completion
// implies its predecessor's, so the order holds across several kernels too (a unit test in
// src/cuda/context.rs checks that every kernel starts so). No kernel triggers its dependents
// early (griddepcontrol.launch_dependents at its start): then the next kernel's blocks took
// SM slots while they waited, beside Canny's and the other pipelines' work: the detection
// +0.011 ms at 1080p, four pipelines -20 % (run 130; docs/performance.md, change 42).
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// cv::borderInterpolate(p, len, BORDER_REFLECT_101) (src/cpu/blur.rs reflect101).
__device__ __forceinline__ int reflect101(int p, int len) {
    if (len == 1) return 0;
    while (p < 0 || p >= len) p = p < 0 ? -p : 2 * len - 2 - p;
    return p;
}

// Exact float of a byte without the conversion unit (I2F runs at a quarter of the FMA rate
// on sm_90): 2^23 + b has b in its low mantissa bits.
__device__ __forceinline__ float u8_to_float(u32 b) {
    return __fsub_rn(__int_as_float(0x4B000000 | b), 8388608.0f);
}

__device__ __forceinline__ void store_px(u8* d, u32 b) { *d = (u8)b; }
__device__ __forceinline__ void store_px(float* d, u32 b) { *d = u8_to_float(b); }
// The 4 pixels of a word `v` (little-endian) to d[0..3]: one store (d 4-byte aligned for
// bytes, 16-byte aligned for floats).
__device__ __forceinline__ void store_word(u8* d, u32 v) { *(u32*)d = v; }
__device__ __forceinline__ void store_word(float* d, u32 v) {
    *(float4*)d = make_float4(u8_to_float(v & 0xffu), u8_to_float((v >> 8) & 0xffu),
                              u8_to_float((v >> 16) & 0xffu), u8_to_float(v >> 24));
}

// Rows of the window a thread loads before it stores any (load_window_reflect101).
#define WINDOW_ROW_BATCH 6

// Copies the tw x th window of `img` (w x h, row pitch w) whose top-left pixel is (gx0, gy0)
// into `dst` (shared, row pitch tw; bytes, or their floats), BORDER_REFLECT_101 outside the
// image. Rows go to the block's y threads and columns to its x threads (no division per
// byte), and a window that lies inside the image (nearly every tile) skips the border
// arithmetic. Called by every thread of the block; the caller synchronises.
//
// With 32 x threads and tw <= 64 (every caller: FAST's region, the descriptor's patch) each
// thread has at most two columns, reflected once, and issues the loads of WINDOW_ROW_BATCH
// rows before it stores any: a store that follows its own load waits the whole global-load
// latency, one such wait per row. Those waits drew ~28 % of fast_harris's stall samples
// (run 85) but other warps issued meanwhile: batching them made the detection only 1-2 %
// faster (docs/performance.md, change 32).
template <typename T>
__device__ __forceinline__ void load_window_reflect101(const u8* __restrict__ img, int w, int h,
                                                       int gx0, int gy0, int tw, int th, T* dst) {
    const bool inside = gx0 >= 0 && gy0 >= 0 && gx0 + tw <= w && gy0 + th <= h;
    if (blockDim.x == 32 && tw <= 64) {
        const int c = threadIdx.x;
        const bool two = c + 32 < tw;
        const int xa = inside ? gx0 + c : reflect101(gx0 + c, w);
        const int xb = !two ? xa : inside ? gx0 + c + 32 : reflect101(gx0 + c + 32, w);
        const int step = blockDim.y;
        for (int r0 = threadIdx.y; r0 < th; r0 += WINDOW_ROW_BATCH * step) {
            u32 va[WINDOW_ROW_BATCH], vb[WINDOW_ROW_BATCH];
#pragma unroll
            for (int k = 0; k < WINDOW_ROW_BATCH; ++k) {
                const int r = r0 + k * step;
                if (r < th) {
                    const int gy = inside ? gy0 + r : reflect101(gy0 + r, h);
                    const u8* row = img + (size_t)gy * w;
                    va[k] = __ldg(row + xa);
                    vb[k] = two ? __ldg(row + xb) : 0u;
                }
            }
#pragma unroll
            for (int k = 0; k < WINDOW_ROW_BATCH; ++k) {
                const int r = r0 + k * step;
                if (r < th) {
                    store_px(dst + r * tw + c, va[k]);
                    if (two) store_px(dst + r * tw + c + 32, vb[k]);
                }
            }
        }
        return;
    }
    for (int r = threadIdx.y; r < th; r += blockDim.y) {
        const int gy = inside ? gy0 + r : reflect101(gy0 + r, h);
        const u8* row = img + (size_t)gy * w;
        T* out = dst + r * tw;
        for (int c = threadIdx.x; c < tw; c += blockDim.x)
            store_px(out + c, __ldg(row + (inside ? gx0 + c : reflect101(gx0 + c, w))));
    }
}

// The 4 bytes at `p` (any alignment), funnel-shifted out of the two aligned words that hold
// them; the second is read only when `p` is unaligned, so no word past p + 3 is read.
__device__ __forceinline__ u32 ldg_word_unaligned(const u8* p) {
    const u32* a = (const u32*)((size_t)p & ~(size_t)3);
    const u32 shift = ((u32)(size_t)p & 3u) * 8u;
    const u32 lo = __ldg(a);
    const u32 hi = shift != 0 ? __ldg(a + 1) : lo;
    return __funnelshift_r(lo, hi, shift);
}

// load_window_reflect101 for a window whose width tw is a multiple of 4 (at most 64) into
// `dst` (4-byte aligned for bytes, 16-byte aligned for floats), by a (32, y) block: a window
// that lies inside the image horizontally (for FAST every window but those of a level's first
// and last tile columns) is copied a word of 4 pixels at a time (ldg_word_unaligned,
// store_word); half-warps take rows, rows outside the image are reflected as there. Other
// windows take load_window_reflect101. Per-byte loads and their 64-bit addresses were ~330
// instructions per warp of fast_harris, a third of the kernel's (run 98), and ~26 % of
// orb_describe's (run 110; docs/performance.md, changes 35 and 37).
template <typename T>
__device__ __forceinline__ void load_window_words(const u8* __restrict__ img, int w, int h,
                                                  int gx0, int gy0, int tw, int th, T* dst) {
    if (blockDim.x != 32 || tw > 64 || (tw & 3) != 0 || gx0 < 0 || gx0 + tw > w) {
        load_window_reflect101(img, w, h, gx0, gy0, tw, th, dst);
        return;
    }
    const int c = threadIdx.x & 15, nw = tw >> 2;
    if (c >= nw) return;
    T* d = dst + 4 * c;
    const int r0 = 2 * threadIdx.y + (threadIdx.x >> 4), rstep = 2 * blockDim.y;
    if (gy0 >= 0 && gy0 + th <= h) {
        // Rows inside too (nearly every window): one pointer stepped down the rows.
        const u8* p = img + (size_t)(gy0 + r0) * w + gx0 + 4 * c;
        const size_t pstep = (size_t)rstep * w;
#pragma unroll 2
        for (int r = r0; r < th; r += rstep, p += pstep) store_word(d + r * tw, ldg_word_unaligned(p));
        return;
    }
    for (int r = r0; r < th; r += rstep)
        store_word(d + r * tw,
                   ldg_word_unaligned(img + (size_t)reflect101(gy0 + r, h) * w + gx0 + 4 * c));
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

// Where a block of a per-tile kernel (grid: every tile of every level) works: the level, its
// descriptor and the tile's position in it.
struct TilePos {
    int l;             // level
    LevelDesc L;       // its descriptor
    int tile_x, tile_y;  // tile column and row within the level
    int x0, y0;        // level coordinates of the tile's top-left pixel
};
__device__ __forceinline__ TilePos tile_pos(const LevelDesc* lv, int nlev, int tile) {
    TilePos p;
    p.l = level_of_tile(lv, nlev, tile);
    p.L = lv[p.l];
    const int lt = tile - p.L.tile_start;
    p.tile_x = lt % p.L.tiles_x;
    p.tile_y = lt / p.L.tiles_x;
    p.x0 = p.tile_x * TILE_W;
    p.y0 = p.tile_y * TILE_H;
    return p;
}

// Sum of row_n[0..rows) (rows <= 32) for a whole converged warp: lane r reads row r, one
// warp reduction adds them (a loop over the rows was 7 % of fast_harris's instructions).
__device__ __forceinline__ u32 row_prefix(const u32* row_n, int rows) {
    const int lane = threadIdx.x & 31;
    u32 v = lane < rows ? row_n[lane] : 0u;
#if __CUDA_ARCH__ >= 800
    return __reduce_add_sync(0xffffffffu, v);
#else
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
#endif
}

// Ordered compaction inside a (32, 8) tile, warp ty being tile row ty: writes the row's
// survivor count to `row_counts` (for scan_tile_rows in compact.cu) and returns each
// survivor's slot in tile-raster order (slots >= `cap` are to be dropped); `row_n` (TILE_H
// u32 of shared memory) then holds the row counts. Called by every thread of the block.
__device__ __forceinline__ u32 tile_slot(bool keep, const TilePos& p, u32* row_n,
                                         u32* __restrict__ row_counts) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const u32 ballot = __ballot_sync(0xffffffffu, keep);
    const u32 rank = __popc(ballot & ((1u << tx) - 1u));
    if (tx == 0) {
        row_n[ty] = __popc(ballot);
        row_counts[p.L.rc_start + (p.tile_y * TILE_H + ty) * p.L.tiles_x + p.tile_x] = __popc(ballot);
    }
    __syncthreads();
    return row_prefix(row_n, ty) + rank;
}

// tile_slot, then each survivor's {word0, word1} to its slot.
__device__ __forceinline__ void compact_tile(bool keep, u32 word0, u32 word1, const TilePos& p,
                                             int tile, int cap, u32* row_n,
                                             u32* __restrict__ row_counts,
                                             uint2* __restrict__ slots) {
    const u32 slot = tile_slot(keep, p, row_n, row_counts);
    if (keep && slot < (u32)cap) slots[(size_t)tile * cap + slot] = make_uint2(word0, word1);
}

// Sum of `v` over the 32 lanes of a converged warp, returned to every lane.
__device__ __forceinline__ int warp_sum_i32(int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_add_sync(0xffffffffu, v);
#else
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
#endif
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

// Hamming distance of two 256-bit binary descriptors, each held as two uint4 (bytes 0..15,
// 16..31).
__device__ __forceinline__ u32 hamming256(uint4 a0, uint4 a1, uint4 b0, uint4 b1) {
    return __popc(a0.x ^ b0.x) + __popc(a0.y ^ b0.y) + __popc(a0.z ^ b0.z) + __popc(a0.w ^ b0.w) +
           __popc(a1.x ^ b1.x) + __popc(a1.y ^ b1.y) + __popc(a1.z ^ b1.z) + __popc(a1.w ^ b1.w);
}

// Minimum of `v` over the 32 lanes of a converged warp, returned to every lane (one
// redux.sync instruction on sm_80+, a butterfly of shuffles before).
__device__ __forceinline__ u32 warp_min_u32(u32 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    u32 r;
    asm volatile("redux.sync.min.u32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(v));
    return r;
#else
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
#endif
}
