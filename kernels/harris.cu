// Dense Harris (cv::cornerHarris) + 3x3 NMS + quality threshold: GPU twin of
// harris::dense_response / dense_corners, bit for bit. Every level of the pyramid at once.
//
// The CPU reference reproduces OpenCV's rounding schedule, which depends on the SIMD loop
// that produced a pixel; each output's operations are replayed here in the same order with
// explicit intrinsics (the module is compiled with --fmad=false):
//   harris_sobel   Sobel dx, dy (f32): row filter (FMA from 0 in tap order for x < w - w%64,
//                  else mul then add), column filter (centre tap, then mirrored pairs summed
//                  or differenced, FMA where x < w - w%16, or everywhere for ksize 3).
//   harris_rowsum  products dx^2, dx*dy, dy^2 (f32) and their block-wide row sums in f64
//                  (tap order, BORDER_REFLECT_101).
//   harris_colsum  one thread per column: OpenCV's running column sum in f64 (add the new
//                  row, round to f32, subtract the oldest), row after row, exactly the CPU's
//                  sequence; then the response with the flat-index-dependent formula (or, with
//                  mode 1, the smaller eigenvalue for goodFeaturesToTrack), and the level
//                  maximum (atomicMax on an order-preserving key: order independent).
//   harris_nms     strict 3x3 maxima above quality * max, inside the border; the survivors
//                  go through the same ordered compaction as FAST (row counts + tile slots,
//                  then scan_tile_rows / scan_levels / gather_orient of compact.cu/orient.cu).
#include "common.cuh"

struct DenseParams {
    float sm[7];  // smoothing kernel, pre-scaled
    float de[7];  // derivative kernel
    int ksize;
    int block;
    float k;
    double kd;    // k as the double the user wrote (shortest decimal form of the f32)
    float quality;
    int border;
    int mode;     // 0: Harris response (cv::cornerHarris); 1: the smaller eigenvalue
                  // (cv::cornerMinEigenVal, for goodFeaturesToTrack: kernels/gftt.cu)
};

__device__ __forceinline__ float row_filter_at(const u8* row, int w, int x, const float* kern, int K) {
    const int r = K / 2;
    if (x < w - w % 64) {
        float d = 0.0f;
        for (int j = 0; j < K; ++j) d = __fmaf_rn((float)row[reflect101(x + j - r, w)], kern[j], d);
        return d;
    }
    float d = __fmul_rn((float)row[reflect101(x - r, w)], kern[0]);
    for (int j = 1; j < K; ++j) d = __fadd_rn(d, __fmul_rn((float)row[reflect101(x + j - r, w)], kern[j]));
    return d;
}

// Block (32, 8), grid: every tile of every level. gx, gy indexed by img_off + y * w + x.
extern "C" __global__ void harris_sobel(const u8* __restrict__ pyr, const LevelDesc* __restrict__ levels,
                                        int nlev, DenseParams P, float* __restrict__ gx,
                                        float* __restrict__ gy) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int tile = blockIdx.x;
    const LevelDesc L = levels[level_of_tile(levels, nlev, tile)];
    const int lt = tile - L.tile_start;
    const int x = (lt % L.tiles_x) * TILE_W + threadIdx.x;
    const int y = (lt / L.tiles_x) * TILE_H + threadIdx.y;
    if (x >= L.w || y >= L.h) return;
    const u8* img = pyr + L.img_off;
    const int K = P.ksize, r = K / 2;
    float rd[7], rs[7];
    for (int i = 0; i < K; ++i) {
        const u8* row = img + (size_t)reflect101(y + i - r, L.h) * L.w;
        rd[i] = row_filter_at(row, L.w, x, P.de, K);
        rs[i] = row_filter_at(row, L.w, x, P.sm, K);
    }
    const bool fused = K == 3 || x < L.w - L.w % 16;
    float dx = __fmul_rn(rd[r], P.sm[r]);
    float dy = __fmul_rn(rs[r], P.de[r]);
    for (int j = 1; j <= r; ++j) {
        const float s = __fadd_rn(rd[r + j], rd[r - j]);
        const float a = __fsub_rn(rs[r + j], rs[r - j]);
        if (fused) {
            dx = __fmaf_rn(s, P.sm[r + j], dx);
            dy = __fmaf_rn(a, P.de[r + j], dy);
        } else {
            dx = __fadd_rn(dx, __fmul_rn(s, P.sm[r + j]));
            dy = __fadd_rn(dy, __fmul_rn(a, P.de[r + j]));
        }
    }
    const size_t i = (size_t)L.img_off + (size_t)y * L.w + x;
    gx[i] = dx;
    gy[i] = dy;
}

// Block (32, 8), grid: every tile of every level. Row sums of the three products (f64).
// Also resets the level maxima (read by harris_colsum, a later launch).
extern "C" __global__ void harris_rowsum(const LevelDesc* __restrict__ levels, int nlev, DenseParams P,
                                         const float* __restrict__ gx, const float* __restrict__ gy,
                                         double* __restrict__ sxx, double* __restrict__ sxy,
                                         double* __restrict__ syy, u32* __restrict__ maxkey) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int tile = blockIdx.x;
    const int l = level_of_tile(levels, nlev, tile);
    const LevelDesc L = levels[l];
    if (tile == L.tile_start && threadIdx.x == 0 && threadIdx.y == 0) maxkey[l] = 0u;
    const int lt = tile - L.tile_start;
    const int x = (lt % L.tiles_x) * TILE_W + threadIdx.x;
    const int y = (lt / L.tiles_x) * TILE_H + threadIdx.y;
    if (x >= L.w || y >= L.h) return;
    const size_t row = (size_t)L.img_off + (size_t)y * L.w;
    const int anchor = P.block / 2;
    double a = 0.0, b = 0.0, c = 0.0;
    for (int j = 0; j < P.block; ++j) {
        const int sx = reflect101(x + j - anchor, L.w);
        const float dx = gx[row + sx], dy = gy[row + sx];
        const double pa = (double)__fmul_rn(dx, dx), pb = (double)__fmul_rn(dx, dy),
                     pc = (double)__fmul_rn(dy, dy);
        if (j == 0) {
            a = pa; b = pb; c = pc;
        } else {
            a = __dadd_rn(a, pa); b = __dadd_rn(b, pb); c = __dadd_rn(c, pc);
        }
    }
    sxx[row + x] = a;
    sxy[row + x] = b;
    syy[row + x] = c;
}

__device__ __forceinline__ u32 resp_order_key(float v) {
    const u32 f = __float_as_uint(v);
    return (f & 0x80000000u) ? ~f : (f | 0x80000000u);
}

// Block 128, grid (levels, column blocks of the widest level): one thread per column.
extern "C" __global__ void harris_colsum(const LevelDesc* __restrict__ levels, int nlev, DenseParams P,
                                         const double* __restrict__ sxx, const double* __restrict__ sxy,
                                         const double* __restrict__ syy, float* __restrict__ resp,
                                         u32* __restrict__ maxkey) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int l = blockIdx.x;
    const LevelDesc L = levels[l];
    const int x = blockIdx.y * blockDim.x + threadIdx.x;
    if (x >= L.w) return;
    const int w = L.w, h = L.h, block = P.block, anchor = block / 2;
    const size_t base = (size_t)L.img_off + x;
    const long long n = (long long)w * h;
    const long long end8 = n - n % 8, end4 = n - n % 4;
    double sa = 0.0, sb = 0.0, sc = 0.0;
    u32 best = 0;
    for (int py = 0; py < h + block - 1; ++py) {
        const size_t inew = base + (size_t)reflect101(py - anchor, h) * w;
        const double na = sxx[inew], nb = sxy[inew], nc = syy[inew];
        if (py < block - 1) {
            sa = __dadd_rn(sa, na); sb = __dadd_rn(sb, nb); sc = __dadd_rn(sc, nc);
            continue;
        }
        const int y = py + 1 - block;
        const size_t iold = base + (size_t)reflect101(y - anchor, h) * w;
        const double a0 = __dadd_rn(sa, na), b0 = __dadd_rn(sb, nb), c0 = __dadd_rn(sc, nc);
        const float a = __double2float_rn(a0), b = __double2float_rn(b0), c = __double2float_rn(c0);
        sa = __dsub_rn(a0, sxx[iold]);
        sb = __dsub_rn(b0, sxy[iold]);
        sc = __dsub_rn(c0, syy[iold]);
        const long long fi = (long long)y * w + x;
        const float det = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, b));
        const float tr = __fadd_rn(a, c);
        float v;
        if (P.mode == 1) {
            // calcMinEigenVal: every step rounded, nothing fused (cpu/gftt.rs).
            const float ah = __fmul_rn(a, 0.5f), ch = __fmul_rn(c, 0.5f), t = __fsub_rn(ah, ch);
            v = __fsub_rn(__fadd_rn(ah, ch), __fsqrt_rn(__fadd_rn(__fmul_rn(t, t), __fmul_rn(b, b))));
        } else if (fi < end8) {
            v = __fsub_rn(det, __fmul_rn(P.k, __fmul_rn(tr, tr)));
        } else if (fi < end4) {
            v = __fsub_rn(det, __fmul_rn(__fmul_rn(P.k, tr), tr));
        } else {
            const double t = (double)tr;
            v = __double2float_rn(__dsub_rn((double)det, __dmul_rn(__dmul_rn(P.kd, t), t)));
        }
        resp[base + (size_t)y * w] = v;
        if (!isnan(v)) best = max(best, resp_order_key(v));
    }
    atomicMax(&maxkey[l], best);
}

// Block (32, 8), grid: every tile of every level. Same outputs as fast_harris (row counts
// and per-tile slots {local | 0 << 16, response bits}) for the ordered compaction.
extern "C" __global__ void harris_nms(const LevelDesc* __restrict__ levels, int nlev, DenseParams P,
                                      const float* __restrict__ resp, const u32* __restrict__ maxkey,
                                      int cap, u32* __restrict__ row_counts, uint2* __restrict__ slots) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int tile = blockIdx.x;
    const TilePos p = tile_pos(levels, nlev, tile);
    const LevelDesc& L = p.L;
    const int l = p.l;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = p.x0 + tx, y = p.y0 + ty;
    const u32 mk = maxkey[l];
    const float maxv = __uint_as_float((mk & 0x80000000u) ? (mk & 0x7fffffffu) : ~mk);
    bool keep = false;
    float v = 0.0f;
    if (x < L.w && y < L.h && mk != 0u && maxv > 0.0f) {
        const float* R = resp + L.img_off;
        v = R[(size_t)y * L.w + x];
        keep = v > __fmul_rn(P.quality, maxv);
        for (int ny = max(y - 1, 0); keep && ny <= min(y + 1, L.h - 1); ++ny)
            for (int nx = max(x - 1, 0); nx <= min(x + 1, L.w - 1); ++nx)
                if ((nx != x || ny != y) && R[(size_t)ny * L.w + nx] >= v) { keep = false; break; }
        const int b = P.border;
        keep = keep && x >= b && y >= b && x + b < L.w && y + b < L.h;
    }
    __shared__ u32 row_n[TILE_H];
    compact_tile(keep, (u32)(ty * TILE_W + tx), __float_as_uint(v), p, tile, cap, row_n, row_counts,
                 slots);
}
