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
    wait_for_previous_kernel();  // note "programmatic dependent launch"
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
    wait_for_previous_kernel();  // note "programmatic dependent launch"
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

// canny_classify's tile: 32 x CANNY_TH pixels, each thread of the (32, 8) block CANNY_ROWS of
// them (rows ty, ty + 8, ...), so that a block's fixed work (its set-up, the window's halo,
// the magnitude ring, three barriers) is shared by more pixels, and uf_merge has fewer tile
// borders to join (change 39).
#define CANNY_ROWS 2
#define CANNY_TH (CANNY_ROWS * TILE_H)
// Gray window of a tile: halo 2 (Sobel, then NMS on the magnitudes).
#define CANNY_GW (TILE_W + 4)
#define CANNY_GH (CANNY_TH + 4)
// Magnitude window: halo 1.
#define CANNY_MW (TILE_W + 2)
#define CANNY_MH (CANNY_TH + 2)

// 3x3 Sobel at (cx, cy) of the gray window `g` (rows CANNY_GW apart).
__device__ __forceinline__ void sobel3(const u8* g, int cx, int cy, int& dx, int& dy) {
    const u8* a = g + (cy - 1) * CANNY_GW + cx;  // the row above
    const u8* b = a + CANNY_GW;
    const u8* c = b + CANNY_GW;
    dx = (a[1] + 2 * b[1] + c[1]) - (a[-1] + 2 * b[-1] + c[-1]);
    dy = (c[-1] + 2 * c[0] + c[1]) - (a[-1] + 2 * a[0] + a[1]);
}

__device__ __forceinline__ int canny_magnitude(int dx, int dy, int l2) {
    return l2 ? dx * dx + dy * dy : abs(dx) + abs(dy);
}

// OpenCV's fixed-point NMS of a pixel of magnitude m > low with gradient (xs, ys) against its
// neighbours in `mag` (rows CANNY_MW apart, `mp` at the pixel), then the double threshold.
__device__ __forceinline__ u8 canny_class(const int* mp, int m, int xs, int ys, int high) {
    const int ax = abs(xs);
    const int ay = abs(ys) << CANNY_SHIFT;
    const int tg22x = ax * TG22;
    bool keep;
    if (ay < tg22x) {
        keep = m > mp[-1] && m >= mp[1];
    } else if (ay > tg22x + (ax << (CANNY_SHIFT + 1))) {
        keep = m > mp[-CANNY_MW] && m >= mp[CANNY_MW];
    } else if ((xs ^ ys) < 0) {
        keep = m > mp[-CANNY_MW + 1] && m > mp[CANNY_MW - 1];
    } else {
        keep = m > mp[-CANNY_MW - 1] && m > mp[CANNY_MW + 1];
    }
    return keep ? (m > high ? CLS_STRONG : CLS_WEAK) : CLS_NONE;
}

// Block (32, 8); grid (ceil(w/32), ceil(h/CANNY_TH)). Each thread computes its pixels'
// gradients (kept for the NMS) and magnitudes; the first 2 * (34 + CANNY_TH) threads then
// the magnitude ring around the tile. Before change 38 every thread walked the window by a
// flat index (a division per byte and per magnitude) and the NMS computed the gradient a
// second time.
extern "C" __global__ void canny_classify(const u8* __restrict__ img, int w, int h, int l2, int low,
                                          int high, u8* __restrict__ cls, int* __restrict__ label) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ __align__(4) u8 g[CANNY_GH][CANNY_GW];
    __shared__ int mag[CANNY_MH][CANNY_MW];
    const int x0 = blockIdx.x * TILE_W, y0 = blockIdx.y * CANNY_TH;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TILE_W + tx;
    if (x0 >= 2 && y0 >= 2 && x0 + TILE_W + 2 <= w && y0 + CANNY_TH + 2 <= h) {
        // Inside the image (all but the border tiles): a word at a time, no clamping.
        load_window_words(img, w, h, x0 - 2, y0 - 2, CANNY_GW, CANNY_GH, &g[0][0]);
    } else {
        // Replicated border (cv::Canny's Sobel).
        for (int r = ty; r < CANNY_GH; r += TILE_H) {
            const u8* row = img + (size_t)clampi(y0 - 2 + r, 0, h - 1) * w;
            for (int c = tx; c < CANNY_GW; c += TILE_W)
                g[r][c] = row[clampi(x0 - 2 + c, 0, w - 1)];
        }
    }
    __syncthreads();
    const int x = x0 + tx;
    int xs[CANNY_ROWS], ys[CANNY_ROWS], m[CANNY_ROWS];
#pragma unroll
    for (int k = 0; k < CANNY_ROWS; ++k) {
        const int r = ty + k * TILE_H;  // tile row
        sobel3(&g[0][0], tx + 2, r + 2, xs[k], ys[k]);
        m[k] = x < w && y0 + r < h ? canny_magnitude(xs[k], ys[k], l2) : 0;
        mag[r + 1][tx + 1] = m[k];
    }
    if (tid < 2 * CANNY_MW + 2 * CANNY_TH) {
        // The ring: the top row, the bottom row, then the left and right columns between.
        int rx, ry;
        if (tid < CANNY_MW) {
            rx = tid, ry = 0;
        } else if (tid < 2 * CANNY_MW) {
            rx = tid - CANNY_MW, ry = CANNY_MH - 1;
        } else {
            const int k = tid - 2 * CANNY_MW;
            rx = k < CANNY_TH ? 0 : CANNY_MW - 1, ry = 1 + (k & (CANNY_TH - 1));
        }
        const int px = x0 - 1 + rx, py = y0 - 1 + ry;
        int v = 0;
        if (px >= 0 && py >= 0 && px < w && py < h) {
            int dx, dy;
            sobel3(&g[0][0], rx + 1, ry + 1, dx, dy);
            v = canny_magnitude(dx, dy, l2);
        }
        mag[ry][rx] = v;
    }
    __syncthreads();
    // The tile's own components first, by union-find in shared memory (the same algorithm
    // as below on tile-local indices); uf_merge then joins only across tile borders. A run
    // of candidates along a row (a warp's ballot) starts as one set, every pixel pointing
    // at the run's first one, so only the links to the row above remain: the first pixel of
    // a run joins the runs above it and its diagonals, every other pixel only a run that
    // starts above its right neighbour (the runs above it that its left neighbour touches
    // are joined already). Before, every candidate joined each candidate neighbour
    // (docs/performance.md, change 38).
    __shared__ int loc[TILE_W * CANNY_TH];
    __shared__ u32 rows[CANNY_TH];
    u8 c[CANNY_ROWS];
    int start[CANNY_ROWS];
#pragma unroll
    for (int k = 0; k < CANNY_ROWS; ++k) {
        const int r = ty + k * TILE_H;
        c[k] = CLS_NONE;
        if (x < w && y0 + r < h && m[k] > low)
            c[k] = canny_class(&mag[r + 1][tx + 1], m[k], xs[k], ys[k], high);
        const u32 run = __ballot_sync(0xffffffffu, c[k] != CLS_NONE);
        const u32 gaps = ~run & ((1u << tx) - 1u);  // non-candidates left of this pixel
        start[k] = gaps ? 32 - __clz(gaps) : 0;
        loc[r * TILE_W + tx] = c[k] != CLS_NONE ? r * TILE_W + start[k] : -1;
        if (tx == 0) rows[r] = run;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < CANNY_ROWS; ++k) {
        const int r = ty + k * TILE_H, me = r * TILE_W + tx;
        if (c[k] != CLS_NONE && r > 0) {
            const u32 up = rows[r - 1];
            const int q = me - TILE_W;
            const bool left = tx > 0 && ((up >> (tx - 1)) & 1u);
            const bool mid = (up >> tx) & 1u;
            const bool right = tx + 1 < TILE_W && ((up >> (tx + 1)) & 1u);
            if (start[k] == tx) {
                if (left) uf_union(loc, me, q - 1);
                if (mid && !left) uf_union(loc, me, q);
            }
            if (right && !mid) uf_union(loc, me, q + 1);
        }
    }
    __syncthreads();
    if (x >= w) return;
#pragma unroll
    for (int k = 0; k < CANNY_ROWS; ++k) {
        const int r = ty + k * TILE_H, y = y0 + r;
        if (y >= h) return;
        const size_t idx = (size_t)y * w + x;
        cls[idx] = c[k];
        if (c[k] != CLS_NONE) {  // candidates only (the note at the top)
            const int root = uf_find(loc, r * TILE_W + tx);  // inside the image: so is its root
            label[idx] = (y0 + root / TILE_W) * w + (x0 + root % TILE_W);
        }
    }
}

// Union of every candidate pixel with its candidate neighbours left, up-left, up, up-right
// (the other four are covered from the other side) in other tiles: canny_classify joined
// those of the same tile. Only a tile's top row and its left and right columns have such
// neighbours: block 32 + 2 * (CANNY_TH - 1) threads = one tile's border pixels (lanes 0..31
// the top row, then the left column below it, then the right one), grid (ceil(w/32),
// ceil(h/CANNY_TH)), so that no thread is launched for the pixels inside a tile.
extern "C" __global__ void uf_merge(int* __restrict__ label, const u8* __restrict__ cls, int w,
                                    int h) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int k = threadIdx.x;
    int tx, ty;
    if (k < TILE_W) {
        tx = k, ty = 0;
    } else if (k < TILE_W + CANNY_TH - 1) {
        tx = 0, ty = k - TILE_W + 1;
    } else if (k < TILE_W + 2 * (CANNY_TH - 1)) {
        tx = TILE_W - 1, ty = k - (TILE_W + CANNY_TH - 1) + 1;
    } else {
        return;
    }
    const int x = blockIdx.x * TILE_W + tx, y = blockIdx.y * CANNY_TH + ty;
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
// A pixel per thread: with 4 per thread (one class word, out early when all 4 are NONE) the
// finds of a thread's candidates ran one after the other and the 1080p launch took 12-17 us
// instead of 10-11 (run 125).
extern "C" __global__ void uf_resolve(int* __restrict__ label, u8* __restrict__ cls, int w, int h) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
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

// The edge map, packed to one bit per pixel (8x less to bring to the host, which unpacks it
// to 0/255 bytes): word `y * words_per_row + x / 32` holds pixels x..x+31 of row y, bit i =
// pixel x + i. A word per thread, a warp 32 words (1024 pixels) of one row (blockDim = 32 x
// TILE_H), so that a warp's words are one 128-byte store: `bits` may be pinned host memory
// that the device maps (src/cuda/canny.rs), written over PCIe with no copy after it
// (docs/performance.md, change 47). The classes are read 16 at a time where rows are whole
// 16-byte blocks (w % 16 == 0), 4 where w % 4 == 0, else byte by byte; nothing more is read
// for 4 classes that are all NONE (most of a frame). Pixels past the row's end read as 0.
// (Four pixels per thread and 8 lanes OR-ing their bits took 6.4-7.3 us at 1080p, change 40.)
extern "C" __global__ void uf_final(const int* __restrict__ label, const u8* __restrict__ cls, int w,
                                    int h, int words_per_row, u32* __restrict__ bits) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int word = blockIdx.x * 32 + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (y >= h || word >= words_per_row) return;
    const int x0 = word * 32, n = min(32, w - x0);
    const size_t p0 = (size_t)y * w + x0;
    // Bits of the pixels j in 4k..4k+3 whose classes are the bytes of `c4`.
    const auto four = [&](u32 c4, int k) -> u32 {
        u32 e = 0;
        if (c4 == 0u) return 0u;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const size_t p = p0 + 4 * k + j;
            if (((c4 >> (8 * j)) & 0xffu) != CLS_NONE && cls[label[p]] == CLS_EDGE_ROOT) e |= 1u << (4 * k + j);
        }
        return e;
    };
    u32 e = 0;
    if (n == 32 && (w & 15) == 0) {
        const uint4 a = *(const uint4*)(cls + p0), b = *(const uint4*)(cls + p0 + 16);
        e = four(a.x, 0) | four(a.y, 1) | four(a.z, 2) | four(a.w, 3) | four(b.x, 4) |
            four(b.y, 5) | four(b.z, 6) | four(b.w, 7);
    } else if (n == 32 && (w & 3) == 0) {
#pragma unroll
        for (int k = 0; k < 8; ++k) e |= four(*(const u32*)(cls + p0 + 4 * k), k);
    } else {
        for (int j = 0; j < n; ++j)
            if (cls[p0 + j] != CLS_NONE && cls[label[p0 + j]] == CLS_EDGE_ROOT) e |= 1u << j;
    }
    bits[(size_t)y * words_per_row + word] = e;
}
