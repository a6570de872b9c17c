// Canny (GPU twin of src/cpu/canny.rs and src/cpu/blur.rs).
//
// 1. Optional Gaussian pre-blur: OpenCV's bit-exact fixed-point separable filter
//    (blur_h: 8 fraction bits in u16, blur_v: 16 fraction bits, round half up),
//    BORDER_REFLECT_101.
// 2. canny_classify: one fused tiled kernel for 3x3 Sobel (replicated border), the integer
//    magnitude (L1 or squared L2), OpenCV's fixed-point NMS and the double threshold, into
//    classes NONE / WEAK / STRONG, and the union-find labels of candidate pixels.
// 3. Hysteresis, exact: connected components of the candidate pixels (8-connectivity) by a
//    lock-free union-find (atomicMin on roots), first inside each tile in shared memory
//    (canny_classify), then across tile borders (uf_merge); every component that holds a
//    STRONG pixel is an edge. A fixed number of launches, no iteration count to guess.
//
// Note (labels of candidates only): canny_classify writes `label` only where the class is a
// candidate (WEAK or STRONG); elsewhere it keeps whatever an earlier frame left. Every
// reader tests the class first (1 byte instead of 4 per pixel: the full-frame passes read
// `cls`, not `label`), and a candidate's label only ever points at candidates, so no stale
// label is read. uf_resolve turns candidates into EDGE_ROOT, never into NONE or back, so
// the test is stable while it runs.
#include "common.cuh"

#define CLS_NONE 0
#define CLS_WEAK 1
#define CLS_STRONG 2
#define CLS_EDGE_ROOT 3  // root of a component with a strong pixel (set by uf_resolve)
#define CANNY_SHIFT 15
#define TG22 13573

extern "C" __global__ void blur_h(const u8* __restrict__ src, int w, int h, const u32* __restrict__ k,
                                  int ksize, u16* __restrict__ tmp) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int r = ksize / 2;
    const u8* row = src + (size_t)y * w;
    u32 acc = 0;
    for (int i = 0; i < ksize; ++i) acc += (u32)row[reflect101(x - r + i, w)] * k[i];
    tmp[(size_t)y * w + x] = (u16)acc;
}

extern "C" __global__ void blur_v(const u16* __restrict__ tmp, int w, int h, const u32* __restrict__ k,
                                  int ksize, u8* __restrict__ dst) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int r = ksize / 2;
    u32 acc = 1u << 15;
    for (int i = 0; i < ksize; ++i) acc += (u32)tmp[(size_t)reflect101(y - r + i, h) * w + x] * k[i];
    dst[(size_t)y * w + x] = (u8)(acc >> 16);
}

__device__ __forceinline__ int uf_find(const int* L, int x) {
    const volatile int* V = L;
    int p = V[x];
    while (p != x) {
        x = p;
        p = V[x];
    }
    return x;
}

// Root of x, halving the path on the way (each visited node is pointed at its grandparent):
// for the unions only, while labels are nothing but links.
//
// Note (path halving beside concurrent unions): every link points from a larger index to a
// smaller one (uf_union links with atomicMin; a halving store writes a grandparent, smaller
// still), so no store can make a cycle, and every store keeps a node inside its own set.
// A halving store can overwrite an atomicMin on the same node only when that node was no
// longer a root (it read a parent other than itself first); uf_union then sees the old
// parent returned by its atomicMin and retries from there, so no union is lost. It can also
// overwrite any other store to that node with an ancestor: harmless while the labels are
// links, wrong once a label must be the root itself (uf_resolve writes roots for uf_final,
// so uf_resolve must not halve: it did, and 1-5 edge pixels of a frame went missing).
// Without the halving, chains along long edges grew one tile root per tile and every find
// walked them (docs/performance.md, change 16).
__device__ __forceinline__ int uf_find_halving(int* L, int x) {
    volatile int* V = L;
    int p = V[x];
    while (p != x) {
        const int gp = V[p];
        if (gp == p) return p;
        V[x] = gp;
        x = gp;
        p = V[x];
    }
    return x;
}

__device__ __forceinline__ void uf_union(int* L, int a, int b) {
    bool done;
    do {
        a = uf_find_halving(L, a);
        b = uf_find_halving(L, b);
        if (a < b) {
            int old = atomicMin(&L[b], a);
            done = old == b;
            b = old;
        } else if (b < a) {
            int old = atomicMin(&L[a], b);
            done = old == a;
            a = old;
        } else {
            done = true;
        }
    } while (!done);
}

// Block (32, 8); grid (ceil(w/32), ceil(h/8)).
extern "C" __global__ void canny_classify(const u8* __restrict__ img, int w, int h, int l2, int low,
                                          int high, u8* __restrict__ cls, int* __restrict__ label) {
    const int GW = TILE_W + 4, GH = TILE_H + 4;  // gray tile: halo 2 (Sobel + NMS)
    const int MW = TILE_W + 2, MH = TILE_H + 2;  // magnitude tile: halo 1
    __shared__ u8 g[GH][GW];
    __shared__ int mag[MH][MW];
    const int x0 = blockIdx.x * TILE_W, y0 = blockIdx.y * TILE_H;
    const int tid = threadIdx.y * TILE_W + threadIdx.x;
    for (int i = tid; i < GW * GH; i += TILE_THREADS) {
        int gx = clampi(x0 - 2 + i % GW, 0, w - 1), gy = clampi(y0 - 2 + i / GW, 0, h - 1);
        g[i / GW][i % GW] = img[(size_t)gy * w + gx];
    }
    __syncthreads();
    for (int i = tid; i < MW * MH; i += TILE_THREADS) {
        int mx = i % MW, my = i / MW;
        int px = x0 - 1 + mx, py = y0 - 1 + my;
        int m = 0;
        if (px >= 0 && py >= 0 && px < w && py < h) {
            int cx = mx + 1, cy = my + 1;
            int dx = (g[cy - 1][cx + 1] + 2 * g[cy][cx + 1] + g[cy + 1][cx + 1]) -
                     (g[cy - 1][cx - 1] + 2 * g[cy][cx - 1] + g[cy + 1][cx - 1]);
            int dy = (g[cy + 1][cx - 1] + 2 * g[cy + 1][cx] + g[cy + 1][cx + 1]) -
                     (g[cy - 1][cx - 1] + 2 * g[cy - 1][cx] + g[cy - 1][cx + 1]);
            m = l2 ? dx * dx + dy * dy : abs(dx) + abs(dy);
        }
        mag[my][mx] = m;
    }
    __syncthreads();
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = x0 + tx, y = y0 + ty;
    const bool inside = x < w && y < h;
    const int mx = tx + 1, my = ty + 1, cx = tx + 2, cy = ty + 2;
    const int m = mag[my][mx];
    u8 c = CLS_NONE;
    if (inside && m > low) {
        int xs = (g[cy - 1][cx + 1] + 2 * g[cy][cx + 1] + g[cy + 1][cx + 1]) -
                 (g[cy - 1][cx - 1] + 2 * g[cy][cx - 1] + g[cy + 1][cx - 1]);
        int ys = (g[cy + 1][cx - 1] + 2 * g[cy + 1][cx] + g[cy + 1][cx + 1]) -
                 (g[cy - 1][cx - 1] + 2 * g[cy - 1][cx] + g[cy - 1][cx + 1]);
        int ax = abs(xs);
        int ay = abs(ys) << CANNY_SHIFT;
        int tg22x = ax * TG22;
        bool keep;
        if (ay < tg22x) {
            keep = m > mag[my][mx - 1] && m >= mag[my][mx + 1];
        } else if (ay > tg22x + (ax << (CANNY_SHIFT + 1))) {
            keep = m > mag[my - 1][mx] && m >= mag[my + 1][mx];
        } else if ((xs ^ ys) < 0) {
            keep = m > mag[my - 1][mx + 1] && m > mag[my + 1][mx - 1];
        } else {
            keep = m > mag[my - 1][mx - 1] && m > mag[my + 1][mx + 1];
        }
        if (keep) c = m > high ? CLS_STRONG : CLS_WEAK;
    }
    // The tile's own components first, by union-find in shared memory (the same algorithm
    // as below on tile-local indices); uf_merge then joins only across tile borders.
    __shared__ int loc[TILE_THREADS];
    const int me = ty * TILE_W + tx;
    loc[me] = c != CLS_NONE ? me : -1;
    __syncthreads();
    if (c != CLS_NONE) {
        if (tx > 0 && loc[me - 1] >= 0) uf_union(loc, me, me - 1);
        if (ty > 0) {
            const int q = me - TILE_W;
            if (tx > 0 && loc[q - 1] >= 0) uf_union(loc, me, q - 1);
            if (loc[q] >= 0) uf_union(loc, me, q);
            if (tx + 1 < TILE_W && loc[q + 1] >= 0) uf_union(loc, me, q + 1);
        }
    }
    __syncthreads();
    if (!inside) return;
    const size_t idx = (size_t)y * w + x;
    cls[idx] = c;
    if (c != CLS_NONE) {  // candidates only (the note at the top)
        const int r = uf_find(loc, me);  // a tile pixel inside the image: its root is too
        label[idx] = (y0 + r / TILE_W) * w + (x0 + r % TILE_W);
    }
}

// Union of every candidate pixel with its candidate neighbours left, up-left, up, up-right
// (the other four are covered from the other side) in other tiles: canny_classify joined
// those of the same tile. Only a tile's top row and its left and right columns have such
// neighbours: block 64 = one tile's border pixels (lanes 0..31 the top row, 32..38 the left
// column below it, 39..45 the right one; the rest idle), grid (ceil(w/32), ceil(h/8)), so
// that no thread is launched for the 82 % of pixels inside a tile.
extern "C" __global__ void uf_merge(int* __restrict__ label, const u8* __restrict__ cls, int w,
                                    int h) {
    const int k = threadIdx.x;
    int tx, ty;
    if (k < TILE_W) {
        tx = k, ty = 0;
    } else if (k < TILE_W + TILE_H - 1) {
        tx = 0, ty = k - TILE_W + 1;
    } else if (k < TILE_W + 2 * (TILE_H - 1)) {
        tx = TILE_W - 1, ty = k - (TILE_W + TILE_H - 1) + 1;
    } else {
        return;
    }
    const int x = blockIdx.x * TILE_W + tx, y = blockIdx.y * TILE_H + ty;
    if (x >= w || y >= h) return;
    int p = y * w + x;
    if (cls[p] == CLS_NONE) return;
    if (x > 0 && cls[p - 1] != CLS_NONE) uf_union(label, p, p - 1);
    if (y > 0) {
        int q = p - w;
        if (x > 0 && cls[q - 1] != CLS_NONE) uf_union(label, p, q - 1);
        if (cls[q] != CLS_NONE) uf_union(label, p, q);
        if (x + 1 < w && cls[q + 1] != CLS_NONE) uf_union(label, p, q + 1);
    }
}

// Path compression (label = root) and marking of roots of components with a strong pixel.
extern "C" __global__ void uf_resolve(int* __restrict__ label, u8* __restrict__ cls, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int p = y * w + x;
    if (((volatile u8*)cls)[p] == CLS_NONE) return;
    int r = uf_find(label, p);
    label[p] = r;
    // cls[p] may be turned from STRONG/WEAK into EDGE_ROOT by another thread here: both
    // STRONG and EDGE_ROOT read as >= STRONG, so the outcome does not depend on timing.
    if (((volatile u8*)cls)[p] >= CLS_STRONG) cls[r] = CLS_EDGE_ROOT;
}

// The edge map, packed to one bit per pixel (8x less to download; the host unpacks it to
// 0/255 bytes): word `y * words_per_row + x / 32` holds pixels x..x+31 of row y, bit i =
// pixel x + i. One warp is one row of 32 pixels (blockDim = 32 x TILE_H): its ballot is the
// word. Pixels past the row's end read as 0.
extern "C" __global__ void uf_final(const int* __restrict__ label, const u8* __restrict__ cls, int w,
                                    int h, int words_per_row, u32* __restrict__ bits) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (y >= h) return;  // the whole warp: it shares y
    bool e = false;
    if (x < w && cls[y * w + x] != CLS_NONE) e = cls[label[y * w + x]] == CLS_EDGE_ROOT;
    u32 m = __ballot_sync(0xffffffffu, e);
    if ((threadIdx.x & 31) == 0) bits[(size_t)y * words_per_row + (x >> 5)] = m;
}
