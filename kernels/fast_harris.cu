// Fused FAST-9/16 + NMS + ORB Harris score (GPU twin of src/cpu/fast.rs and
// harris::orb_score), one launch over every tile of every pyramid level.
//
// Each block loads one 32x8 output tile plus a halo into shared memory once. From that tile
// it runs the binary-encoded segment test (one 16-bit mask per polarity, doubled to 32 bits,
// 9-runs found by shifted ANDs; seed 001) and the OpenCV score on the tile and a one-pixel
// ring (for NMS), keeps strict 3x3 maxima, and computes the Harris response of the survivors
// from the same shared tile. Nothing is written to global memory but the survivors
// themselves: per tile row a count (for the ordered scan in compact.cu) and per tile the
// survivors in tile-raster order.
#include "common.cuh"

// OpenCV's circle (makeOffsets, pattern 16) as (dx, dy), src/cpu/fast.rs CIRCLE:
// (0,3) (1,3) (2,2) (3,1) (3,0) (3,-1) (2,-2) (1,-3) (0,-3) (-1,-3) (-2,-2) (-3,-1) (-3,0)
// (-3,1) (-2,2) (-1,3), as flat offsets for a tile of row pitch `tw`.
#define CIRCLE_OFFSETS(tw)                                                                   \
    {3 * (tw), 3 * (tw) + 1, 2 * (tw) + 2, (tw) + 3, 3, -(tw) + 3, -2 * (tw) + 2,           \
     -3 * (tw) + 1, -3 * (tw), -3 * (tw) - 1, -2 * (tw) - 2, -(tw) - 3, -3, (tw) - 3,        \
     2 * (tw) - 2, 3 * (tw) - 1}

__device__ __forceinline__ bool has_arc9(u32 mask16) {
    u32 m = mask16 | (mask16 << 16);
    u32 r2 = m & (m >> 1);
    u32 r4 = r2 & (r2 >> 2);
    u32 r8 = r4 & (r4 >> 4);
    return (r8 & (m >> 8)) != 0;
}

__device__ __forceinline__ bool is_corner(const int* p, int v, int t) {
    u32 bright = 0, dark = 0;
    for (int k = 0; k < 16; ++k) {
        bright |= (p[k] > v + t) ? (1u << k) : 0u;
        dark |= (p[k] < v - t) ? (1u << k) : 0u;
    }
    return has_arc9(bright) || has_arc9(dark);
}

// FAST score (0 = not a corner) at position (sx, sy) of an image with row pitch `tw`:
// OpenCV's cornerScore is the largest threshold at which the pixel is still a corner
// (max over 9-arcs of the smallest same-signed difference, minus 1). Being a corner is
// monotone in the threshold, so a binary search over [thr, 255) on the two 16-bit masks
// finds it exactly.
__device__ __forceinline__ u32 fast_score_at(const u8* t, int tw, int sx, int sy, int thr) {
    const u8* c = t + sy * tw + sx;
    const int off[16] = CIRCLE_OFFSETS(tw);
    const int v = c[0];
    int p[16];
    for (int k = 0; k < 16; ++k) p[k] = c[off[k]];
    if (!is_corner(p, v, thr)) return 0;
    int lo = thr, hi = 255;  // corner at lo; never a corner at 255
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (is_corner(p, v, mid)) lo = mid; else hi = mid;
    }
    return (u32)lo;
}

// ORB's Harris response (OpenCV HarrisResponses) at shared-tile position (sx, sy).
__device__ __forceinline__ float orb_harris_at(const u8* t, int tw, int sx, int sy, int bs,
                                               float k, float scale_sq_sq) {
    int r = bs / 2;
    int a = 0, b = 0, c = 0;
    for (int i = 0; i < bs; ++i) {
        const u8* row = t + (sy - r + i) * tw + (sx - r);
        for (int j = 0; j < bs; ++j) {
            const u8* p = row + j;
            int ix = (p[1] - p[-1]) * 2 + (p[-tw + 1] - p[-tw - 1]) + (p[tw + 1] - p[tw - 1]);
            int iy = (p[tw] - p[-tw]) * 2 + (p[tw - 1] - p[-tw - 1]) + (p[tw + 1] - p[-tw + 1]);
            a += ix * ix;
            b += iy * iy;
            c += ix * iy;
        }
    }
    float fa = (float)a, fb = (float)b, fc = (float)c;
    float s = __fadd_rn(fa, fb);
    float det = __fsub_rn(__fmul_rn(fa, fb), __fmul_rn(fc, fc));
    float tr = __fmul_rn(__fmul_rn(k, s), s);
    return __fmul_rn(__fsub_rn(det, tr), scale_sq_sq);
}

// Shared memory of the FAST kernels: the image tile, sized for the largest halo
// (harris_block_size 31 -> 16; `halo` is the one in use), and the FAST scores of the output
// tile and a one-pixel ring.
#define FAST_TILE_BYTES ((TILE_W + 32) * (TILE_H + 32))
#define FAST_SCORE_W (TILE_W + 2)
#define FAST_SCORE_BYTES (FAST_SCORE_W * (TILE_H + 2))

// Loads the tile of `p` and a `halo` around it into `t` (row pitch TILE_W + 2 * halo), then
// the FAST scores (at threshold `thr`) of the tile and a one-pixel ring into `sc` (row pitch
// FAST_SCORE_W). Outside the level the border is BORDER_REFLECT_101 as in ORB's padded
// pyramid (only Harris windows of keypoints closer than block_size/2 + 1 to the border read
// it; harris::orb_score does the same); pixels closer than 3 to the border are never corners
// (OpenCV tests [3, w-3) x [3, h-3)). Called by every thread of the (32, 8) block; both
// arrays are ready when it returns.
__device__ __forceinline__ void load_tile_and_scores(const u8* __restrict__ pyr, const TilePos& p,
                                                     int halo, int thr, u8* t, u8* sc) {
    const LevelDesc& L = p.L;
    const int x0 = p.x0, y0 = p.y0;
    const int tw = TILE_W + 2 * halo, th = TILE_H + 2 * halo;
    const u8* img = pyr + L.img_off;
    const int tid = threadIdx.y * TILE_W + threadIdx.x;
    for (int i = tid; i < tw * th; i += TILE_THREADS) {
        int gx = reflect101(x0 - halo + i % tw, L.w);
        int gy = reflect101(y0 - halo + i / tw, L.h);
        t[i] = img[gy * L.w + gx];
    }
    __syncthreads();

    const int sw = FAST_SCORE_W;
    for (int i = tid; i < sw * (TILE_H + 2); i += TILE_THREADS) {
        int px = x0 - 1 + i % sw, py = y0 - 1 + i / sw;
        u32 s = 0;
        if (px >= 3 && py >= 3 && px < L.w - 3 && py < L.h - 3)
            s = fast_score_at(t, tw, px - x0 + halo, py - y0 + halo, thr);
        sc[i] = (u8)s;
    }
    __syncthreads();
}

// Block: (32, 8). Grid: total tiles over all levels.
extern "C" __global__ void fast_harris(const u8* __restrict__ pyr, const LevelDesc* __restrict__ levels,
                                       int nlev, int threshold, int nms, int border, int harris,
                                       int block_size, float harris_k, float scale_sq_sq, int halo,
                                       int cap, u32* __restrict__ row_counts, uint2* __restrict__ slots) {
    __shared__ u8 t[FAST_TILE_BYTES];
    __shared__ u8 sc[FAST_SCORE_BYTES];
    __shared__ u32 row_n[TILE_H];
    const int tile = blockIdx.x;
    const TilePos p = tile_pos(levels, nlev, tile);
    const LevelDesc& L = p.L;
    load_tile_and_scores(pyr, p, halo, threshold, t, sc);

    const int sw = FAST_SCORE_W, tw = TILE_W + 2 * halo;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = p.x0 + tx, y = p.y0 + ty;
    const u8* srow = sc + (ty + 1) * sw + (tx + 1);
    u32 s = srow[0];
    bool keep = s > 0;
    if (keep && nms) {
        keep = s > srow[-1] && s > srow[1] && s > srow[-sw - 1] && s > srow[-sw] &&
               s > srow[-sw + 1] && s > srow[sw - 1] && s > srow[sw] && s > srow[sw + 1];
    }
    keep = keep && x >= border && y >= border && x + border < L.w && y + border < L.h;
    float resp = (float)s;
    if (keep && harris)
        resp = orb_harris_at(t, tw, tx + halo, ty + halo, block_size, harris_k, scale_sq_sq);
    compact_tile(keep, (u32)(ty * TILE_W + tx) | (s << 16), __float_as_uint(resp), p, tile, cap,
                 row_n, row_counts, slots);
}


// ---------------------------------------------------------------------------------------
// ORB-SLAM3's per-cell FAST with the low-threshold retry (GPU twin of
// cpu::cells::fast_in_cells). The windows' detectable parts tile [b, w-b) x [b, h-b)
// (b = max(border, 3)) into cells of cw x ch pixels; the CPU runs FAST on each window alone,
// at `ini`, and again at `lo` in a window where that found nothing. The FAST score does not
// depend on the threshold and a pixel is a corner at t (t >= 1) iff its score is >= t, so
// one pass at `lo` decides both: a pixel is kept by the window's NMS at either threshold iff
// its score is >= lo and beats every 8-neighbour of its own cell (neighbours in other cells
// or outside the area are outside the window's FAST region: never corners there), whatever
// the threshold. `fast_cells` keeps those pixels and flags the cells holding one with
// score >= ini; `cell_filter` then drops, per tile, the pixels below their cell's threshold
// (ini when flagged, else lo) and recounts the rows for the ordered compaction.

#define CELL_MAX_LEVELS 32

// Mirrors `CellParams` in src/cuda/fast_harris.rs.
struct CellParams {
    int b;    // max(border, 3): the detectable area is [b, w-b) x [b, h-b)
    int ini;  // detector.fast_threshold
    int lo;   // min(min_fast_threshold, fast_threshold): the scoring threshold
    int cw[CELL_MAX_LEVELS], ch[CELL_MAX_LEVELS];
    int cols[CELL_MAX_LEVELS], rows[CELL_MAX_LEVELS];  // 0: no window on this level
    int start[CELL_MAX_LEVELS];                        // first global cell of the level
};

// Global cell of (x, y) on level l, -1 outside the detectable area.
__device__ __forceinline__ int cell_of(const CellParams& cp, int l, int w, int h, int x, int y) {
    if (cp.cols[l] == 0 || x < cp.b || y < cp.b || x >= w - cp.b || y >= h - cp.b) return -1;
    return cp.start[l] + ((y - cp.b) / cp.ch[l]) * cp.cols[l] + (x - cp.b) / cp.cw[l];
}

// Block: (32, 8). Grid: total tiles over all levels. As fast_harris, but scores at cp.lo,
// NMS within each cell, and the per-cell flags (zeroed by the host before the launch).
extern "C" __global__ void fast_cells(const u8* __restrict__ pyr, const LevelDesc* __restrict__ levels,
                                      int nlev, CellParams cp, int nms, int harris, int block_size,
                                      float harris_k, float scale_sq_sq, int halo, int cap,
                                      u8* __restrict__ flags, u32* __restrict__ row_counts,
                                      uint2* __restrict__ slots) {
    __shared__ u8 t[FAST_TILE_BYTES];
    __shared__ u8 sc[FAST_SCORE_BYTES];
    __shared__ u32 row_n[TILE_H];
    const int tile = blockIdx.x;
    const TilePos p = tile_pos(levels, nlev, tile);
    const LevelDesc& L = p.L;
    const int l = p.l;
    load_tile_and_scores(pyr, p, halo, cp.lo, t, sc);

    const int sw = FAST_SCORE_W, tw = TILE_W + 2 * halo;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = p.x0 + tx, y = p.y0 + ty;
    const u8* srow = sc + (ty + 1) * sw + (tx + 1);
    u32 s = srow[0];
    int cell = s > 0 ? cell_of(cp, l, L.w, L.h, x, y) : -1;
    bool keep = cell >= 0;
    if (keep && nms) {
        for (int dy = -1; dy <= 1 && keep; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
                if (dx == 0 && dy == 0) continue;
                if (cell_of(cp, l, L.w, L.h, x + dx, y + dy) != cell) continue;
                if (!(s > srow[dy * sw + dx])) { keep = false; break; }
            }
    }
    if (keep && (int)s >= cp.ini) flags[cell] = 1;
    float resp = (float)s;
    if (keep && harris)
        resp = orb_harris_at(t, tw, tx + halo, ty + halo, block_size, harris_k, scale_sq_sq);
    compact_tile(keep, (u32)(ty * TILE_W + tx) | (s << 16), __float_as_uint(resp), p, tile, cap,
                 row_n, row_counts, slots);
}

// Block: 256 threads (>= cap). Grid: total tiles. Keeps, in order, the tile's slots whose
// score reaches their cell's threshold (ini in a flagged cell, else lo) and rewrites the
// tile's row counts.
extern "C" __global__ void cell_filter(const LevelDesc* __restrict__ levels, int nlev, CellParams cp,
                                       const u8* __restrict__ flags, int cap,
                                       u32* __restrict__ row_counts, uint2* __restrict__ slots) {
    __shared__ u32 sh[32];
    __shared__ u32 row_new[TILE_H];
    __shared__ u32 total;
    const int tile = blockIdx.x;
    const TilePos p = tile_pos(levels, nlev, tile);
    const LevelDesc& L = p.L;
    const int l = p.l, x0 = p.x0, y0 = p.y0;
    u32* rc = row_counts + L.rc_start + p.tile_y * TILE_H * L.tiles_x + p.tile_x;
    if (threadIdx.x < TILE_H) row_new[threadIdx.x] = 0;
    if (threadIdx.x == 0) {
        u32 n = 0;
        for (int r = 0; r < TILE_H; ++r) n += rc[r * L.tiles_x];
        total = n < (u32)cap ? n : (u32)cap;
    }
    __syncthreads();
    const u32 i = threadIdx.x;
    bool keep = false;
    uint2 v = make_uint2(0, 0);
    if (i < total) {
        v = slots[(size_t)tile * cap + i];
        const int pos = v.x & 0xffff, s = v.x >> 16;
        const int cell = cell_of(cp, l, L.w, L.h, x0 + pos % TILE_W, y0 + pos / TILE_W);
        keep = s >= (flags[cell] ? cp.ini : cp.lo);
        if (keep) atomicAdd(&row_new[pos / TILE_W], 1u);
    }
    u32 kept;
    const u32 r = block_exclusive_scan(keep ? 1u : 0u, sh, &kept);
    if (keep) slots[(size_t)tile * cap + r] = v;
    if (threadIdx.x < TILE_H) rc[threadIdx.x * L.tiles_x] = row_new[threadIdx.x];
}
