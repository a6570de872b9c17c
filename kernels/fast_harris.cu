// Fused FAST-9/16 + NMS + ORB Harris score (GPU twin of src/cpu/fast.rs and
// harris::orb_score), one launch over every tile of every pyramid level.
//
// Each block loads one 32x8 output tile plus a halo into shared memory once. From that tile
// it runs the binary-encoded segment test (one 16-bit mask per polarity, doubled to 32 bits,
// 9-runs found by shifted ANDs; seed 001) behind OpenCV's opposite-pairs early test, and the
// OpenCV score (from arc minima, not a search over thresholds) on the tile and a one-pixel
// ring (for NMS), keeps strict 3x3 maxima, and computes the Harris response of the survivors
// from the same shared tile, one warp per survivor. Nothing is written to global memory but the survivors
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
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        bright |= (p[k] > v + t) ? (1u << k) : 0u;
        dark |= (p[k] < v - t) ? (1u << k) : 0u;
    }
    return has_arc9(bright) || has_arc9(dark);
}

// 1: brighter than v + t, 2: darker than v - t, 0: neither.
__device__ __forceinline__ u32 polarity(int q, int v, int t) {
    return (q > v + t ? 1u : 0u) | (q < v - t ? 2u : 0u);
}

// Largest over the 16 starts k of the smallest of d[k..k+8] (circular), the minima by
// doubling: 4 mins per start, not 8.
__device__ __forceinline__ int best_arc9(const int* d) {
    int m2[16], m4[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) m2[k] = min(d[k], d[(k + 1) & 15]);
#pragma unroll
    for (int k = 0; k < 16; ++k) m4[k] = min(m2[k], m2[(k + 2) & 15]);
    int best = -256;
#pragma unroll
    for (int k = 0; k < 16; ++k) best = max(best, min(min(m4[k], m4[(k + 4) & 15]), d[(k + 8) & 15]));
    return best;
}

// Whether (sx, sy) of an image with row pitch `tw` is a FAST corner at `thr`. An exact
// shortcut first: every 9-arc holds one pixel of each opposite pair (k, k + 8), so a pixel
// where some pair has neither pixel of a common polarity is no corner (OpenCV's own early
// test; most pixels stop there after 8 of the 16 reads).
__device__ __forceinline__ bool fast_corner_at(const u8* t, int tw, int sx, int sy, int thr) {
    const u8* c = t + sy * tw + sx;
    const int off[16] = CIRCLE_OFFSETS(tw);
    const int v = c[0];
    int p[16];
#pragma unroll
    for (int k = 0; k < 16; k += 2) p[k] = c[off[k]];
    u32 d = 3u;
#pragma unroll
    for (int k = 0; k < 8; k += 2) d &= polarity(p[k], v, thr) | polarity(p[k + 8], v, thr);
    if (d == 0) return false;
#pragma unroll
    for (int k = 1; k < 16; k += 2) p[k] = c[off[k]];
    return is_corner(p, v, thr);
}

// FAST score of a corner at (sx, sy): OpenCV's cornerScore, the largest threshold at which
// the pixel is still a corner. A pixel is a corner at t iff some 9-arc lies entirely above
// v + t or entirely below v - t, so that threshold is the best arc's smallest same-signed
// difference minus 1 (never above 254), found from arc minima rather than by a search over
// thresholds.
__device__ __forceinline__ u32 fast_corner_score(const u8* t, int tw, int sx, int sy) {
    const u8* c = t + sy * tw + sx;
    const int off[16] = CIRCLE_OFFSETS(tw);
    const int v = c[0];
    // One polarity after the other keeps fewer registers live.
    int d[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) d[k] = (int)c[off[k]] - v;
    const int up = best_arc9(d);
#pragma unroll
    for (int k = 0; k < 16; ++k) d[k] = -d[k];
    const int best = max(up, best_arc9(d));
    return (u32)(best - 1);
}

// ORB's Harris response (OpenCV HarrisResponses) at shared-tile position (sx, sy), by a
// whole warp: lane j sums the window's pixels j, j + 32, ... (integer sums, so the order
// does not change them) and every lane returns the response.
__device__ __forceinline__ float orb_harris_warp(const u8* t, int tw, int sx, int sy, int bs,
                                                 float k, float scale_sq_sq) {
    const int r = bs / 2;
    int a = 0, b = 0, c = 0;
    for (int i = threadIdx.x & 31; i < bs * bs; i += 32) {
        const u8* p = t + (sy - r + i / bs) * tw + (sx - r + i % bs);
        int ix = (p[1] - p[-1]) * 2 + (p[-tw + 1] - p[-tw - 1]) + (p[tw + 1] - p[tw - 1]);
        int iy = (p[tw] - p[-tw]) * 2 + (p[tw - 1] - p[-tw - 1]) + (p[tw + 1] - p[-tw + 1]);
        a += ix * ix;
        b += iy * iy;
        c += ix * iy;
    }
    a = warp_sum_i32(a);
    b = warp_sum_i32(b);
    c = warp_sum_i32(c);
    float fa = (float)a, fb = (float)b, fc = (float)c;
    float s = __fadd_rn(fa, fb);
    float det = __fsub_rn(__fmul_rn(fa, fb), __fmul_rn(fc, fc));
    float tr = __fmul_rn(__fmul_rn(k, s), s);
    return __fmul_rn(__fsub_rn(det, tr), scale_sq_sq);
}

// fast_cells' ordered compaction of its tile's survivors (tile_slot) with their response:
// the FAST score, or with `harris` ORB's Harris response, computed afterwards by whole warps
// over the compacted list (a survivor per warp instead of a survivor per thread, whose 49+
// window reads stalled its whole warp). `list`: TILE_THREADS u32 of shared memory.
// fast_harris does the same for its FAST_GROUP tiles with one barrier (see there).
__device__ __forceinline__ void compact_scored(bool keep, u32 s, const TilePos& p, int tile, int cap,
                                               int harris, const u8* t, int tw, int halo, int t_row0,
                                               int bs, float k, float sss, u32* row_n, u32* list,
                                               u32* __restrict__ row_counts,
                                               uint2* __restrict__ slots) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const u32 word0 = (u32)(ty * TILE_W + tx) | (s << 16);
    const u32 slot = tile_slot(keep, p, row_n, row_counts);
    if (!harris) {
        if (keep && slot < (u32)cap)
            slots[(size_t)tile * cap + slot] = make_uint2(word0, __float_as_uint((float)s));
        return;
    }
    if (keep && slot < (u32)cap) list[slot] = word0;
    const u32 n = min(row_prefix(row_n, TILE_H), (u32)cap);
    __syncthreads();
    for (u32 i = ty; i < n; i += TILE_H) {
        const u32 w0 = list[i], pos = w0 & 0xffffu;
        const float resp = orb_harris_warp(t, tw, (int)(pos % TILE_W) + halo,
                                           t_row0 + (int)(pos / TILE_W) + halo, bs, k, sss);
        if (tx == 0) slots[(size_t)tile * cap + i] = make_uint2(w0, __float_as_uint(resp));
    }
}

// fast_harris runs FAST_GROUP tiles stacked vertically per block (a 32x64 region): the
// fixed work of a block (level lookup, barriers, lists) and the one-pixel NMS ring (10 %
// extra tests instead of 33 %) are shared by 8 tiles. The tiles keep their own slots and row
// counts, so the compaction after it is unchanged. fast_cells runs one tile per block.
// Measured on the H100 at 1080p (docs/performance.md, changes 13 and 18): 1 tile 119 us,
// 4 tiles 91-109, 8 tiles 102 (-6 % against 4 in the same call), 16 tiles 115 (too few
// blocks for the small levels).
#define FAST_GROUP 8

// Shared memory of the FAST kernels: the image region, sized for the largest halo
// (harris_block_size 31 -> 16; `halo` is the one in use), and the FAST scores of the output
// region and a one-pixel ring (rounded up to 16 bytes: zeroed by 16-byte stores).
#define FAST_TILE_BYTES ((TILE_W + 32) * (FAST_GROUP * TILE_H + 32))
#define FAST_SCORE_W (TILE_W + 2)
#define FAST_SCORE_BYTES (((FAST_SCORE_W * (FAST_GROUP * TILE_H + 2)) + 15) & ~15)
// Words of the bit set of the score rows that hold a corner (load_tile_and_scores).
#define CORNER_ROW_WORDS ((FAST_GROUP * TILE_H + 2 + 31) / 32)

// Row pitch of the FAST kernels' shared region: its width TILE_W + 2 * halo rounded up to
// whole words, so that the compass pass reads 4 pixels per load.
__device__ __forceinline__ int tile_pitch(int halo) { return (TILE_W + 2 * halo + 3) & ~3; }

// The compass pass takes 4 neighbouring positions per thread: COMPASS_GROUPS words per region
// row (from word (halo - 1) / 4, enough for the scored columns halo - 1 .. halo + 32 at every
// halo from 4 to 16), each warp listing its passes in its own segment of COMPASS_SEG entries:
// up to 4 per lane in each of the rounds of TILE_THREADS groups over fast_harris's largest
// region (FAST_GROUP tiles and the NMS ring: 3 rounds).
#define COMPASS_GROUPS 10
#define COMPASS_ROUNDS \
    ((COMPASS_GROUPS * (FAST_GROUP * TILE_H + 2) + TILE_THREADS - 1) / TILE_THREADS)
#define COMPASS_SEG (COMPASS_ROUNDS * 32 * 4)

// Note (compass test in 16-bit lanes): a necessary condition for a FAST corner at t, from 4
// of the 16 reads: every 9-arc holds two neighbouring compass points (circle positions 0, 4,
// 8, 12), so some polarity must hold at two neighbouring compass points. compass4 tests 4
// neighbouring positions at once, from the words holding their centres `c` and their
// neighbours 3 rows down (`up`, circle position 0), 3 columns right (`ev`), 3 rows up (`dn`)
// and 3 columns left (`wv`); bit j of the result is the test at byte j. A word's even bytes
// and its odd bytes are spread into two 16-bit lanes each (one PRMT), so that with
// t1 = (t + 1) in both lanes
//     q + (0x8000 - t1 - v)  has bit 15 set iff q >= v + t + 1  (q brighter than v + t),
//     (0x8000 - t1 + v) - q  has bit 15 set iff q <= v - t - 1  (q darker than v - t):
// every lane value stays within 0x7e01..0x80ff for pixels and t in 0..255, so no carry or
// borrow crosses a lane, and one add or subtract tests two pixels (checked for every v, q
// and t by the unit test compass_lanes_brighter_and_darker_are_exact). "Some polarity at two
// neighbouring compass points" is (n | s) & (e | w) per polarity.
__device__ __forceinline__ u32 compass4(u32 c, u32 up, u32 ev, u32 dn, u32 wv, u32 t1) {
    const u32 H = 0x80008000u;
    u32 p[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const u32 sel = half ? 0x4341u : 0x4240u;  // bytes 1, 3 or 0, 2 into the low lane bytes
        const u32 v = __byte_perm(c, 0, sel), n = __byte_perm(up, 0, sel);
        const u32 e = __byte_perm(ev, 0, sel), s = __byte_perm(dn, 0, sel);
        const u32 w = __byte_perm(wv, 0, sel);
        const u32 kb = H - t1 - v, kd = H - t1 + v;
        const u32 bright = ((n + kb) | (s + kb)) & ((e + kb) | (w + kb));
        const u32 dark = ((kd - n) | (kd - s)) & ((kd - e) | (kd - w));
        p[half] = (bright | dark) & H;
    }
    // Bit 15 of the even lanes is byte 0, bit 31 byte 2; of the odd lanes bytes 1 and 3.
    return ((p[0] >> 15) | (p[1] >> 14) | (p[0] >> 29) | (p[1] >> 28)) & 0xfu;
}

// Loads the `rows` rows from tile `p`'s top-left (TILE_H, or FAST_GROUP tiles) and a `halo`
// around them into `t` (row pitch tile_pitch(halo), 4-byte aligned), then the FAST scores
// (at threshold `thr`) of those rows and a one-pixel ring into `sc` (row pitch
// FAST_SCORE_W, 4-byte aligned), and with MARK_ROWS bit r of `corner_rows` (shared,
// CORNER_ROW_WORDS words) set for every row r of `sc` that holds a corner (fast_cells
// passes false and null: it does not read them). Outside the level the border is
// BORDER_REFLECT_101 as in ORB's padded pyramid (only Harris windows of keypoints closer
// than block_size/2 + 1 to the border read it; harris::orb_score does the same); pixels
// closer than 3 to the border are never corners (OpenCV tests [3, w-3) x [3, h-3)). Only
// pixels at least `border - 1` from the level's borders are scored (the survivors, at least
// `border` away, and their NMS neighbours); the other scores stay 0. Called by every thread
// of the (32, 8) block; the three arrays are ready when it returns.
//
// Three passes over shrinking lists, so that no warp runs a costly test for one pixel among
// 32 that needs it: the compass test at every position (4 neighbouring positions per thread
// from 5 word loads, two pixels per add: note "compass test in 16-bit lanes"; with one
// position and 5 byte loads per thread it was 46 % of fast_harris's instructions, run 93),
// the full corner test on the positions that pass it, the score of the corners. Each warp
// keeps its own list (no shared atomics for the lists, no barrier between the passes;
// docs/performance.md, change 33).
template <bool MARK_ROWS>
__device__ __forceinline__ void load_tile_and_scores(const u8* __restrict__ pyr, const TilePos& p,
                                                     int rows, int halo, int thr, int border, u8* t,
                                                     u8* sc, u32* corner_rows) {
    const LevelDesc& L = p.L;
    const int x0 = p.x0, y0 = p.y0;
    const int tw = tile_pitch(halo), th = rows + 2 * halo;
    const int sw = FAST_SCORE_W, srows = rows + 2;
    const int tid = threadIdx.y * TILE_W + threadIdx.x, lane = threadIdx.x;
    uint4* sc128 = (uint4*)sc;  // FAST_SCORE_BYTES is whole 16-byte words
    for (int k = tid; k < (sw * srows + 15) / 16; k += TILE_THREADS) sc128[k] = make_uint4(0, 0, 0, 0);
    if (MARK_ROWS && tid < CORNER_ROW_WORDS) corner_rows[tid] = 0;
    load_window_words(pyr + L.img_off, L.w, L.h, x0 - halo, y0 - halo, tw, th, t);
    __syncthreads();

    __shared__ u16 cand[TILE_H][COMPASS_SEG];
    u16* seg = cand[threadIdx.y];
    const u32 below = (1u << lane) - 1u;
    const u32* t32 = (const u32*)t;
    const int wpr = tw / 4, g0 = (halo - 1) >> 2;
    // Only the band [lo, hi) of each axis is scored: the pixels a survivor can be (at least
    // `border` from the level's borders) and their NMS neighbours, never closer than 3.
    const int lo = max(3, border - 1), hi_x = min(L.w - 3, L.w - border + 1);
    const int hi_y = min(L.h - 3, L.h - border + 1);
    const int row_lo = clampi(lo - (y0 - 1), 0, srows), row_hi = clampi(hi_y - (y0 - 1), 0, srows);
    const int groups = COMPASS_GROUPS * row_hi;
    const u32 t1 = (u32)(thr + 1) * 0x00010001u;
    u32 n = 0;  // the warp's listed positions (the same in every lane)
    for (int k0 = COMPASS_GROUPS * row_lo + threadIdx.y * 32; k0 < groups; k0 += TILE_THREADS) {
        const int k = k0 + lane;
        u32 pass = 0;  // bit j: the position of byte j passes
        int i0 = 0;    // its sc index, minus j
        if (k < groups) {
            const int row = k / COMPASS_GROUPS, g = g0 + k % COMPASS_GROUPS;
            const int col0 = 4 * g - halo + 1;  // sc column of byte 0
            i0 = row * sw + col0;
            const u32* r = t32 + (row - 1 + halo) * wpr + g;
            const u32 c = r[0], up = r[3 * wpr], dn = r[-3 * wpr];
            const u32 wv = __funnelshift_r(r[-1], c, 8), ev = __funnelshift_r(c, r[1], 24);
            // Bytes j in [jmin, jmax] are scored positions inside the band.
            const int jmin = min(4, max(max(0, -col0), lo + 1 - x0 - col0));
            const int jmax = max(-1, min(min(3, FAST_SCORE_W - 1 - col0), hi_x - x0 - col0));
            const u32 valid = (0xfu << jmin) & (0xfu >> (3 - jmax));
            pass = compass4(c, up, ev, dn, wv, t1) & valid;
        }
        // The lane's 0-4 passes go after those of the lanes below it: its offset from the
        // ballots of its count's three bits.
        const u32 cnt = __popc(pass);
        const u32 b0 = __ballot_sync(0xffffffffu, cnt & 1u);
        const u32 b1 = __ballot_sync(0xffffffffu, cnt & 2u);
        const u32 b2 = __ballot_sync(0xffffffffu, cnt & 4u);
        const u32 at = n + __popc(b0 & below) + 2 * __popc(b1 & below) + 4 * __popc(b2 & below);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if ((pass >> j) & 1u) seg[at + __popc(pass & ((1u << j) - 1u))] = (u16)(i0 + j);
        n += __popc(b0) + 2 * __popc(b1) + 4 * __popc(b2);
    }
    __syncwarp();
    // The full test; the corners overwrite the list from its start (never an entry not yet
    // read: every lane reads its entry before the ballot).
    u32 m = 0;
    for (u32 j0 = 0; j0 < n; j0 += 32) {
        const u32 j = j0 + lane;
        bool corner = false;
        int i = 0;
        if (j < n) {
            i = seg[j];
            corner = fast_corner_at(t, tw, i % sw - 1 + halo, i / sw - 1 + halo, thr);
        }
        const u32 ballot = __ballot_sync(0xffffffffu, corner);
        __syncwarp();
        if (corner) seg[m + __popc(ballot & below)] = (u16)i;
        m += __popc(ballot);
    }
    __syncwarp();
    for (u32 j = lane; j < m; j += 32) {
        const int i = seg[j];
        const int r = i / sw;
        sc[i] = (u8)fast_corner_score(t, tw, i % sw - 1 + halo, r - 1 + halo);
        if (MARK_ROWS) atomicOr(&corner_rows[r >> 5], 1u << (r & 31));
    }
    __syncthreads();
}

// Which FAST_GROUP tiles block `b` of fast_harris covers: blocks enumerate, level after
// level, tile columns x groups of FAST_GROUP tile rows. `block_groups[b]` (from the host,
// once per resolution; mirrors `Detector::new` in src/cuda/fast_harris.rs) packs the block's
// level (bits 27-31), tile column (bits 14-26) and group row (bits 0-13), so that placing a
// block costs two loads: no walk over the level table, no division. Returns the first
// tile's position.
__device__ __forceinline__ TilePos group_pos(const LevelDesc* lv, const u32* block_groups, int b) {
    const u32 bg = block_groups[b];
    TilePos p;
    p.l = (int)(bg >> 27);
    p.L = lv[p.l];
    p.tile_x = (int)((bg >> 14) & 0x1fffu);
    p.tile_y = (int)(bg & 0x3fffu) * FAST_GROUP;
    p.x0 = p.tile_x * TILE_W;
    p.y0 = p.tile_y * TILE_H;
    return p;
}

// Block: (32, 8). Grid: sum over levels of tiles_x * ceil(tiles_y / FAST_GROUP). (6 blocks
// per SM: at most 40 registers, occupancy 75 % instead of 50 %.)
//
// After the scores, two passes over the block's tiles with one barrier between them (they
// cost ~100 instructions per warp and tile with three barriers per tile, run 93): warp ty
// takes row ty of every tile, first its NMS ballot (kept in shared memory) and the row's
// count, then, once every row's ballot is known, its survivors' slots (the counts of the
// tile's rows above it plus the rank in its own row) and their Harris responses, one
// survivor after the other by the whole warp. The second pass visits only the tiles whose
// row has survivors (one ballot over the row's 8 tiles).
extern "C" __global__ void __launch_bounds__(TILE_THREADS, 6) fast_harris(const u8* __restrict__ pyr, const LevelDesc* __restrict__ levels,
                                       const u32* __restrict__ block_groups, int threshold, int nms, int border, int harris,
                                       int block_size, float harris_k, float scale_sq_sq, int halo,
                                       int cap, u32* __restrict__ row_counts, uint2* __restrict__ slots) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ __align__(16) u8 t[FAST_TILE_BYTES];
    __shared__ __align__(16) u8 sc[FAST_SCORE_BYTES];
    __shared__ u32 kept[FAST_GROUP][TILE_H];  // the NMS ballot of each tile's rows
    __shared__ u32 corner_rows[CORNER_ROW_WORDS];
    const TilePos first = group_pos(levels, block_groups, blockIdx.x);
    const LevelDesc& L = first.L;
    const int tiles = min(FAST_GROUP, L.tiles_y - first.tile_y);
    load_tile_and_scores<true>(pyr, first, tiles * TILE_H, halo, threshold, border, t, sc,
                               corner_rows);

    const int sw = FAST_SCORE_W, tw = tile_pitch(halo);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = first.x0 + tx;
    const bool x_inside = x >= border && x + border < L.w;
    // A row without a corner keeps nothing, so the warp visits only the tiles whose row ty
    // holds one (lane `sub` tests tile sub's bit of corner_rows; one ballot): a loop over
    // all 8 tiles took ~20 instructions per tile even where it skipped the row, 4.0 of
    // fast_harris's 22.3 M at 1080p (run 150; docs/performance.md, changes 41 and 52).
    if (tx < FAST_GROUP) kept[tx][ty] = 0;
    __syncwarp();
    const int my_row = tx * TILE_H + ty + 1;  // tile tx's row ty in `sc`
    const bool has_corner =
        tx < tiles && ((corner_rows[my_row >> 5] >> (my_row & 31)) & 1u) != 0u;
    u32 count = 0;  // lane `sub`: the survivors of tile sub's row ty
    for (u32 busy = __ballot_sync(0xffffffffu, has_corner); busy != 0; busy &= busy - 1) {
        const int sub = __ffs(busy) - 1;
        const int y = first.y0 + sub * TILE_H + ty;
        const int r = sub * TILE_H + ty + 1;  // the row in `sc`
        bool keep = false;
        if (y >= border && y + border < L.h) {
            const u8* srow = sc + r * sw + (tx + 1);
            const u32 s = srow[0];
            keep = x_inside && s > 0;
            if (keep && nms) {
                keep = s > srow[-1] && s > srow[1] && s > srow[-sw - 1] && s > srow[-sw] &&
                       s > srow[-sw + 1] && s > srow[sw - 1] && s > srow[sw] && s > srow[sw + 1];
            }
        }
        const u32 ballot = __ballot_sync(0xffffffffu, keep);
        if (tx == 0) kept[sub][ty] = ballot;
        if (tx == sub) count = __popc(ballot);
    }
    if (tx < tiles)
        row_counts[L.rc_start + ((first.tile_y + tx) * TILE_H + ty) * L.tiles_x + first.tile_x] = count;
    __syncthreads();

    // Lane `sub` holds tile sub's ballot of row ty; only the tiles whose row has survivors
    // are visited.
    const u32 mine = tx < tiles ? kept[tx][ty] : 0u;
    const u32 below = (1u << tx) - 1u;
    for (u32 busy = __ballot_sync(0xffffffffu, mine != 0); busy != 0; busy &= busy - 1) {
        const int sub = __ffs(busy) - 1;
        u32 row = __shfl_sync(0xffffffffu, mine, sub);
        const u32 above = (u32)warp_sum_i32(tx < ty ? __popc(kept[sub][tx]) : 0);
        const int tile = L.tile_start + (first.tile_y + sub) * L.tiles_x + first.tile_x;
        uint2* out = slots + (size_t)tile * cap;
        const u8* srow = sc + (sub * TILE_H + ty + 1) * sw + 1;
        if (!harris) {
            const u32 slot = above + __popc(row & below);
            if ((row >> tx) & 1u && slot < (u32)cap) {
                const u32 s = srow[tx];
                out[slot] = make_uint2((u32)(ty * TILE_W + tx) | (s << 16), __float_as_uint((float)s));
            }
            continue;
        }
        for (u32 slot = above; row != 0 && slot < (u32)cap; ++slot) {
            const int bx = __ffs(row) - 1;
            row &= row - 1;
            const float resp = orb_harris_warp(t, tw, bx + halo, sub * TILE_H + ty + halo,
                                               block_size, harris_k, scale_sq_sq);
            if (tx == 0) out[slot] = make_uint2((u32)(ty * TILE_W + bx) | ((u32)srow[bx] << 16),
                                                __float_as_uint(resp));
        }
    }
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

// Mirrors `CellParams` in src/cuda/fast_harris.rs.
struct CellParams {
    int b;    // max(border, 3): the detectable area is [b, w-b) x [b, h-b)
    int ini;  // detector.fast_threshold
    int lo;   // min(min_fast_threshold, fast_threshold): the scoring threshold
    int cw[MAX_LEVELS], ch[MAX_LEVELS];
    int cols[MAX_LEVELS], rows[MAX_LEVELS];  // 0: no window on this level
    int start[MAX_LEVELS];                   // first global cell of the level
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
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ __align__(16) u8 t[FAST_TILE_BYTES];
    __shared__ __align__(16) u8 sc[FAST_SCORE_BYTES];
    __shared__ u32 row_n[TILE_H];
    __shared__ u32 list[TILE_THREADS];
    const int tile = blockIdx.x;
    const TilePos p = tile_pos(levels, nlev, tile);
    const LevelDesc& L = p.L;
    const int l = p.l;
    load_tile_and_scores<false>(pyr, p, TILE_H, halo, cp.lo, cp.b, t, sc, nullptr);

    const int sw = FAST_SCORE_W, tw = tile_pitch(halo);
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
    compact_scored(keep, s, p, tile, cap, harris, t, tw, halo, 0, block_size, harris_k,
                   scale_sq_sq, row_n, list, row_counts, slots);
}

// Block: 256 threads (>= cap). Grid: total tiles. Keeps, in order, the tile's slots whose
// score reaches their cell's threshold (ini in a flagged cell, else lo) and rewrites the
// tile's row counts.
extern "C" __global__ void cell_filter(const LevelDesc* __restrict__ levels, int nlev, CellParams cp,
                                       const u8* __restrict__ flags, int cap,
                                       u32* __restrict__ row_counts, uint2* __restrict__ slots) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
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
