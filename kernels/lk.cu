// Pyramidal Lucas-Kanade (cv::buildOpticalFlowPyramid + cv::calcOpticalFlowPyrLK): the GPU
// twin of src/cpu/lk.rs, bit for bit (the module is compiled with --fmad=false; divisions
// and square roots are IEEE-rounded).
//
//   lk_border    a level's border of `pad` pixels as BORDER_REFLECT_101 of its interior
//   lk_pyrdown   cv::pyrDown of a level's interior, read through its reflected border
//   lk_scharr    calcScharrDeriv (int16 pairs) of a level's interior; the derivative buffer's
//                border stays zero (set once when allocated)
//   lk_track     one block per point, every level from the top down in one launch, then (with
//                a flow-back level) the same point tracked back. The window and its gradients
//                are interpolated in integers by the block's warps, a row per warp with a lane
//                per column, and they write the terms of the f32 sums to shared memory;
//                then each sum is OpenCV's SIMD loop's chain, one lane per chain, adding only:
//                for the 2x2 matrix, lanes 0-3 / 4-7 / 8-11 sum Ix^2 / IxIy / Iy^2 over the
//                columns j, j+4 of each block of 8, lanes 12-14 the scalar tail's columns; for
//                the mismatch vector, lanes 0-7 the eight pair sums of the two 4-lane
//                accumulators, lanes 8-9 the tail. The lanes' partial sums are combined as the
//                CPU combines them. (A chain of up to 105 dependent adds is the floor of one
//                iteration: OpenCV's order allows no tree.)
#include "common.cuh"

#define LK_MAX_LEVELS 8
#define LK_MAX_THREADS 384  // mirrors MAX_WARPS * 32 in src/cuda/lk.rs

struct LkLevel {
    const u8* img;     // padded image, pixel (0, 0) at img + pad * stride + pad
    const short* der;  // padded (Ix, Iy) pairs, pixel (0, 0) at der + pad * dstride + 2 * pad
    int w, h, stride, dstride;
};

struct LkPyr {
    LkLevel lv[LK_MAX_LEVELS];
};

struct LkArgs {
    int win, pad, max_level, max_iter, use_initial, n;
    float min_eig;
    double eps;
    int back_level;  // the flow-back pass's top level, -1 for none
    int back_initial;  // 1: the back pass starts from the previous position (VINS's flow
                       // back), 0: from its own position (VINS-Fusion's stereo check)
    int chain;       // floats per chain in shared memory (a multiple of 4, 4 mod 32)
};

extern "C" __global__ void lk_border(u8* __restrict__ img, int w, int h, int pad, int stride) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int pw = w + 2 * pad, ph = h + 2 * pad;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= pw * ph) return;
    const int x = i % pw - pad, y = i / pw - pad;
    if (x >= 0 && x < w && y >= 0 && y < h) return;
    const int sx = reflect101(x, w), sy = reflect101(y, h);
    img[(size_t)(y + pad) * stride + x + pad] = img[(size_t)(sy + pad) * stride + sx + pad];
}

extern "C" __global__ void lk_pyrdown(const u8* __restrict__ src, int spad, int sstride,
                                      u8* __restrict__ dst, int dw, int dh, int dpad, int dstride) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= dw * dh) return;
    const int x = i % dw, y = i / dw;
    const u8* s0 = src + (size_t)spad * sstride + spad;
    int r[5];
    for (int k = 0; k < 5; ++k) {
        const u8* row = s0 + (size_t)(2 * y + k - 2) * sstride + 2 * x;
        r[k] = row[0] * 6 + (row[-1] + row[1]) * 4 + row[-2] + row[2];
    }
    const int v = r[2] * 6 + (r[1] + r[3]) * 4 + r[0] + r[4];
    dst[(size_t)(y + dpad) * dstride + x + dpad] = (u8)((v + 128) >> 8);
}

extern "C" __global__ void lk_scharr(const u8* __restrict__ img, int w, int h, int pad, int stride,
                                     short* __restrict__ der, int dstride) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= w * h) return;
    const int x = i % w, y = i / w;
    const u8* c = img + (size_t)(y + pad) * stride + x + pad;
    int t0[3], t1[3];
    for (int k = 0; k < 3; ++k) {
        const int a = c[k - 1 - stride], b = c[k - 1], d = c[k - 1 + stride];
        t0[k] = (a + d) * 3 + b * 10;
        t1[k] = d - a;
    }
    short* o = der + (size_t)(y + pad) * dstride + 2 * (x + pad);
    o[0] = (short)(t0[2] - t0[0]);
    o[1] = (short)((t1[2] + t1[0]) * 3 + t1[1] * 10);
}

__device__ __forceinline__ int lk_descale(int v, int n) { return (v + (1 << (n - 1))) >> n; }

__device__ __forceinline__ void lk_weights(float a, float b, int* w) {
    const float s = 16384.0f;
    w[0] = __float2int_rn(__fmul_rn(__fmul_rn(__fsub_rn(1.0f, a), __fsub_rn(1.0f, b)), s));
    w[1] = __float2int_rn(__fmul_rn(__fmul_rn(a, __fsub_rn(1.0f, b)), s));
    w[2] = __float2int_rn(__fmul_rn(__fmul_rn(__fsub_rn(1.0f, a), b), s));
    w[3] = 16384 - w[0] - w[1] - w[2];
}

// The f32 chains of OpenCV's SIMD loop, one per lane: the terms are computed by the whole
// block into shared memory first (T, `ch` floats per chain, ch = 4 mod 32 so that the
// lanes' 16-byte loads do not conflict), so that a chain lane only loads and adds.
__device__ __forceinline__ float lk_chain(const float* __restrict__ t, int n) {
    float acc = 0.0f;
    const float4* t4 = reinterpret_cast<const float4*>(t);
    int i = 0;
#pragma unroll 4
    for (; i + 4 <= n; i += 4) {
        const float4 v = t4[i >> 2];
        acc = __fadd_rn(acc, v.x);
        acc = __fadd_rn(acc, v.y);
        acc = __fadd_rn(acc, v.z);
        acc = __fadd_rn(acc, v.w);
    }
    for (; i < n; ++i) acc = __fadd_rn(acc, t[i]);
    return acc;
}

// A point's block, in dynamic shared memory: iwin, gx, gy (win * win ints each), the chains'
// terms T (15 * ch floats; the error pass reuses T for |I - J|) and the chains' results.
struct LkShared {
    int* iwin;
    int* gx;
    int* gy;
    float* T;
    float* sums;
    int ch;
};

// One point through the levels max_level..0 of prev -> next, as cv::calcOpticalFlowPyrLK:
// returns (x, y, status, err), the same in every thread of the block. The block's warps
// share the window's rows (row y to warp y % warps, column = lane); warp 0 runs the chains;
// every thread then computes the same update from the shared sums, so that the control flow
// stays uniform across the block's barriers.
__device__ __forceinline__ float4 lk_point(const LkPyr& prev, const LkPyr& next, float2 pp,
                                          bool use_initial, float2 np, int max_level,
                                          const LkArgs& P, const LkShared& S) {
    const int win = P.win, area = win * win, ch = S.ch;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const float half = (float)(win - 1) * 0.5f;
    const int blocks = win >= 8 ? (win - 8) / 8 + 1 : 0;
    const int simd_end = blocks * 8, tail = win - simd_end;
    const unsigned full = 0xffffffffu;
    float* T = S.T;
    bool status = true;
    float err = 0.0f;
    if (!use_initial) np = make_float2(0.0f, 0.0f);

    for (int level = max_level; level >= 0; --level) {
        const LkLevel I = prev.lv[level], J = next.lv[level];
        const float scale = (float)(1.0 / (double)(1 << level));
        float px = __fmul_rn(pp.x, scale), py = __fmul_rn(pp.y, scale);
        float nx, ny;
        if (level == max_level) {
            if (use_initial) { nx = __fmul_rn(np.x, scale); ny = __fmul_rn(np.y, scale); }
            else { nx = px; ny = py; }
        } else {
            nx = __fmul_rn(np.x, 2.0f); ny = __fmul_rn(np.y, 2.0f);
        }
        np = make_float2(nx, ny);
        px = __fsub_rn(px, half); py = __fsub_rn(py, half);
        const int ipx = (int)floorf(px), ipy = (int)floorf(py);
        if (ipx < -win || ipx >= I.w || ipy < -win || ipy >= I.h) {
            if (level == 0) { status = false; err = 0.0f; }
            continue;
        }
        int w4[4];
        lk_weights(__fsub_rn(px, (float)ipx), __fsub_rn(py, (float)ipy), w4);
        const u8* ib = I.img + (size_t)(P.pad + ipy) * I.stride + P.pad + ipx;
        const short* db = I.der + (size_t)(P.pad + ipy) * I.dstride + 2 * (P.pad + ipx);
        // The window, its gradients and the 2x2 matrix's terms.
        if (lane < win) {
            const int x = lane;
            for (int y = warp; y < win; y += warps) {
                const int k = y * win + x;
                const u8* s = ib + (size_t)y * I.stride + x;
                S.iwin[k] = lk_descale(s[0] * w4[0] + s[1] * w4[1] + s[I.stride] * w4[2] + s[I.stride + 1] * w4[3], 9);
                const short* d = db + (size_t)y * I.dstride + 2 * x;
                const int a = lk_descale(d[0] * w4[0] + d[2] * w4[1] + d[I.dstride] * w4[2] + d[I.dstride + 2] * w4[3], 14);
                const int b = lk_descale(d[1] * w4[0] + d[3] * w4[1] + d[I.dstride + 1] * w4[2] + d[I.dstride + 3] * w4[3], 14);
                S.gx[k] = a;
                S.gy[k] = b;
                if (x < simd_end) {
                    // chains 0-3 / 4-7 / 8-11: Ix^2 / IxIy / Iy^2 of columns j, j + 4 of each block.
                    const int j = x & 3, idx = (y * blocks + (x >> 3)) * 2 + ((x >> 2) & 1);
                    const float fx = (float)a, fy = (float)b;
                    T[j * ch + idx] = __fmul_rn(fx, fx);
                    T[(4 + j) * ch + idx] = __fmul_rn(fx, fy);
                    T[(8 + j) * ch + idx] = __fmul_rn(fy, fy);
                } else {
                    const int idx = y * tail + x - simd_end;
                    T[12 * ch + idx] = (float)(a * a);
                    T[13 * ch + idx] = (float)(a * b);
                    T[14 * ch + idx] = (float)(b * b);
                }
            }
        }
        __syncthreads();
        if (warp == 0 && lane < 15) S.sums[lane] = lk_chain(T + lane * ch, lane < 12 ? win * blocks * 2 : win * tail);
        __syncthreads();
        float q[15];
        for (int l = 0; l < 15; ++l) q[l] = S.sums[l];
        const float FLT_SCALE = 1.0f / 1048576.0f;
        const float a11 = __fmul_rn(__fadd_rn(q[12], __fadd_rn(__fadd_rn(q[0], q[2]), __fadd_rn(q[1], q[3]))), FLT_SCALE);
        const float a12 = __fmul_rn(__fadd_rn(q[13], __fadd_rn(__fadd_rn(q[4], q[6]), __fadd_rn(q[5], q[7]))), FLT_SCALE);
        const float a22 = __fmul_rn(__fadd_rn(q[14], __fadd_rn(__fadd_rn(q[8], q[10]), __fadd_rn(q[9], q[11]))), FLT_SCALE);
        const float det = __fsub_rn(__fmul_rn(a11, a22), __fmul_rn(a12, a12));
        const float dm = __fsub_rn(a11, a22);
        const float disc = __fadd_rn(__fmul_rn(dm, dm), __fmul_rn(__fmul_rn(4.0f, a12), a12));
        const float min_eig = __fdiv_rn(__fsub_rn(__fadd_rn(a22, a11), __fsqrt_rn(disc)), (float)(2 * win * win));
        if (min_eig < P.min_eig || det < 1.1920929e-07f) {
            if (level == 0) status = false;
            continue;
        }
        const float dinv = __fdiv_rn(1.0f, det);
        nx = __fsub_rn(nx, half); ny = __fsub_rn(ny, half);
        float pdx = 0.0f, pdy = 0.0f;
        for (int iter = 0; iter < P.max_iter; ++iter) {
            const int inx = (int)floorf(nx), iny = (int)floorf(ny);
            if (inx < -win || inx >= J.w || iny < -win || iny >= J.h) {
                if (level == 0) status = false;
                break;
            }
            int v4[4];
            lk_weights(__fsub_rn(nx, (float)inx), __fsub_rn(ny, (float)iny), v4);
            const u8* jb = J.img + (size_t)(P.pad + iny) * J.stride + P.pad + inx;
            // The mismatch terms: chains 0-7 the pair sums (I-J)*g of columns kk and kk + 4
            // (pair partner by shuffle), chains 8-9 the tail's products.
            for (int y = warp; y < win; y += warps) {
                int pxv = 0, pyv = 0;
                if (lane < win) {
                    const int k = y * win + lane;
                    const u8* s = jb + (size_t)y * J.stride + lane;
                    const int it = lk_descale(s[0] * v4[0] + s[1] * v4[1] + s[J.stride] * v4[2] + s[J.stride + 1] * v4[3], 9) - S.iwin[k];
                    pxv = it * S.gx[k];
                    pyv = it * S.gy[k];
                }
                const int pxn = __shfl_down_sync(full, pxv, 4), pyn = __shfl_down_sync(full, pyv, 4);
                if (lane < simd_end) {
                    const int kk = lane & 7;
                    if (kk < 4) {
                        const int L = (kk >> 1) * 4 + (kk & 1) * 2, idx = y * blocks + (lane >> 3);
                        T[L * ch + idx] = (float)(pxv + pxn);
                        T[(L + 1) * ch + idx] = (float)(pyv + pyn);
                    }
                } else if (lane < win) {
                    const int idx = y * tail + lane - simd_end;
                    T[8 * ch + idx] = (float)pxv;
                    T[9 * ch + idx] = (float)pyv;
                }
            }
            __syncthreads();
            if (warp == 0 && lane < 10) S.sums[lane] = lk_chain(T + lane * ch, lane < 8 ? win * blocks : win * tail);
            __syncthreads();
            float qb[10];
            for (int l = 0; l < 10; ++l) qb[l] = S.sums[l];
            float sm[4];
            for (int l = 0; l < 4; ++l) sm[l] = __fadd_rn(qb[l], qb[l + 4]);
            const float ib1 = __fadd_rn(qb[8], __fadd_rn(__fadd_rn(sm[0], 0.0f), __fadd_rn(sm[2], 0.0f)));
            const float ib2 = __fadd_rn(qb[9], __fadd_rn(__fadd_rn(sm[1], 0.0f), __fadd_rn(sm[3], 0.0f)));
            const float b1 = __fmul_rn(ib1, FLT_SCALE), b2 = __fmul_rn(ib2, FLT_SCALE);
            const float dx = __fmul_rn(__fsub_rn(__fmul_rn(a12, b2), __fmul_rn(a22, b1)), dinv);
            const float dy = __fmul_rn(__fsub_rn(__fmul_rn(a12, b1), __fmul_rn(a11, b2)), dinv);
            nx = __fadd_rn(nx, dx); ny = __fadd_rn(ny, dy);
            np = make_float2(__fadd_rn(nx, half), __fadd_rn(ny, half));
            const double dd = __dadd_rn(__dmul_rn((double)dx, (double)dx), __dmul_rn((double)dy, (double)dy));
            if (dd <= P.eps) break;
            if (iter > 0 && (double)fabsf(__fadd_rn(dx, pdx)) < 0.01 && (double)fabsf(__fadd_rn(dy, pdy)) < 0.01) {
                np = make_float2(__fsub_rn(np.x, __fmul_rn(dx, 0.5f)), __fsub_rn(np.y, __fmul_rn(dy, 0.5f)));
                break;
            }
            pdx = dx; pdy = dy;
        }
        if (status && level == 0) {
            // OpenCV's final mismatch pass; its bounds check can clear the status.
            const float fx = __fsub_rn(np.x, half), fy = __fsub_rn(np.y, half);
            const int inx = (int)floorf(fx), iny = (int)floorf(fy);
            if (inx < -win || inx >= J.w || iny < -win || iny >= J.h) {
                status = false;
            } else {
                int v4[4];
                lk_weights(__fsub_rn(fx, (float)inx), __fsub_rn(fy, (float)iny), v4);
                const u8* jb = J.img + (size_t)(P.pad + iny) * J.stride + P.pad + inx;
                if (lane < win)
                    for (int y = warp; y < win; y += warps) {
                        const int k = y * win + lane;
                        const u8* s = jb + (size_t)y * J.stride + lane;
                        const int it = lk_descale(s[0] * v4[0] + s[1] * v4[1] + s[J.stride] * v4[2] + s[J.stride + 1] * v4[3], 9) - S.iwin[k];
                        T[k] = fabsf((float)it);
                    }
                __syncthreads();
                if (threadIdx.x == 0) S.sums[0] = lk_chain(T, area);
                __syncthreads();
                err = __fdiv_rn(__fmul_rn(S.sums[0], 1.0f), (float)(32 * win * win));
            }
        }
    }
    return make_float4(np.x, np.y, status ? 1.0f : 0.0f, err);
}

// One block per point (its warps share each window's rows), every level from the top down
// in one launch; with P.back_level >= 0 the same block then tracks its point back (next ->
// prev, from the forward result, levels back_level..0; with P.back_initial the initial flow
// is the previous position: VINS's flow-back check) into out[n + i].
extern "C" __global__ void __launch_bounds__(LK_MAX_THREADS) lk_track(LkPyr prev, LkPyr next, const float2* __restrict__ prev_pts,
                                    const float2* __restrict__ init, float4* __restrict__ out,
                                    LkArgs P) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    extern __shared__ float4 lk_smem4[];
    const int pt = blockIdx.x;
    if (pt >= P.n) return;
    const int area = P.win * P.win;
    LkShared S;
    S.ch = P.chain;
    S.T = reinterpret_cast<float*>(lk_smem4);
    S.sums = S.T + 15 * S.ch;
    S.iwin = reinterpret_cast<int*>(S.sums + 16);
    S.gx = S.iwin + area;
    S.gy = S.gx + area;
    const float2 pp = prev_pts[pt];
    const float2 ip = P.use_initial ? init[pt] : make_float2(0.0f, 0.0f);
    const float4 f = lk_point(prev, next, pp, P.use_initial != 0, ip, P.max_level, P, S);
    if (threadIdx.x == 0) out[pt] = f;
    if (P.back_level >= 0) {
        float4 b = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (f.z != 0.0f) b = lk_point(next, prev, make_float2(f.x, f.y), P.back_initial != 0, pp, P.back_level, P, S);
        if (threadIdx.x == 0) out[P.n + pt] = b;
    }
}
