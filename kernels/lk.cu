// Pyramidal Lucas-Kanade (cv::buildOpticalFlowPyramid + cv::calcOpticalFlowPyrLK): the GPU
// twin of src/cpu/lk.rs, bit for bit (the module is compiled with --fmad=false; divisions
// and square roots are IEEE-rounded).
//
//   lk_border    a level's border of `pad` pixels as BORDER_REFLECT_101 of its interior
//   lk_pyrdown   cv::pyrDown of a level's interior, read through its reflected border
//   lk_scharr    calcScharrDeriv (int16 pairs) of a level's interior; the derivative buffer's
//                border stays zero (set once when allocated)
//   lk_track     one warp per point, every level from the top down in one launch. The window
//                and its gradients are interpolated in integers by the whole warp; the f32 sums
//                are OpenCV's SIMD loop's chains, one lane per chain: for the 2x2 matrix, lanes
//                0-3 / 4-7 / 8-11 sum Ix^2 / IxIy / Iy^2 over the columns j, j+4 of each block
//                of 8, lanes 12-14 the scalar tail's columns; for the mismatch vector, lanes 0-7
//                the eight pair sums of the two 4-lane accumulators, lanes 8-9 the tail. The
//                lanes' partial sums are combined as the CPU combines them.
#include "common.cuh"

#define LK_MAX_LEVELS 8

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

// Dynamic shared memory per warp: iwin[win*win] int, gx[win*win] int, gy[win*win] int,
// it[win*win] int.
extern "C" __global__ void lk_track(LkPyr prev, LkPyr next, const float2* __restrict__ prev_pts,
                                    const float2* __restrict__ init, float4* __restrict__ out,
                                    LkArgs P) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    extern __shared__ int lk_smem[];
    const int warps = blockDim.x / 32;
    const int wid = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int pt = blockIdx.x * warps + wid;
    if (pt >= P.n) return;
    const int win = P.win, area = win * win;
    int* iwin = lk_smem + (size_t)wid * 4 * area;
    int* gxw = iwin + area;
    int* gyw = gxw + area;
    int* itw = gyw + area;
    const float half = (float)(win - 1) * 0.5f;
    const int blocks = win >= 8 ? (win - 8) / 8 + 1 : 0;
    const int simd_end = blocks * 8;
    const unsigned full = 0xffffffffu;

    bool status = true;
    float err = 0.0f;
    float2 np = make_float2(0.0f, 0.0f);
    if (P.use_initial) np = init[pt];
    const float2 pp = prev_pts[pt];

    for (int level = P.max_level; level >= 0; --level) {
        const LkLevel I = prev.lv[level], J = next.lv[level];
        const float scale = (float)(1.0 / (double)(1 << level));
        float px = __fmul_rn(pp.x, scale), py = __fmul_rn(pp.y, scale);
        float nx, ny;
        if (level == P.max_level) {
            if (P.use_initial) { nx = __fmul_rn(np.x, scale); ny = __fmul_rn(np.y, scale); }
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
        for (int k = lane; k < area; k += 32) {
            const int x = k % win, y = k / win;
            const u8* s = ib + (size_t)y * I.stride + x;
            iwin[k] = lk_descale(s[0] * w4[0] + s[1] * w4[1] + s[I.stride] * w4[2] + s[I.stride + 1] * w4[3], 9);
            const short* d = db + (size_t)y * I.dstride + 2 * x;
            gxw[k] = lk_descale(d[0] * w4[0] + d[2] * w4[1] + d[I.dstride] * w4[2] + d[I.dstride + 2] * w4[3], 14);
            gyw[k] = lk_descale(d[1] * w4[0] + d[3] * w4[1] + d[I.dstride + 1] * w4[2] + d[I.dstride + 3] * w4[3], 14);
        }
        __syncwarp();
        // The 2x2 matrix: 12 SIMD-lane chains and 3 tail chains.
        float acc = 0.0f;
        if (lane < 12) {
            const int kind = lane / 4, j = lane % 4;
            for (int y = 0; y < win; ++y)
                for (int b = 0; b < blocks; ++b)
                    for (int h2 = 0; h2 < 2; ++h2) {
                        const int k = y * win + b * 8 + h2 * 4 + j;
                        const float fx = (float)gxw[k], fy = (float)gyw[k];
                        const float v = kind == 0 ? __fmul_rn(fx, fx) : kind == 1 ? __fmul_rn(fx, fy) : __fmul_rn(fy, fy);
                        acc = __fadd_rn(acc, v);
                    }
        } else if (lane < 15) {
            const int kind = lane - 12;
            for (int y = 0; y < win; ++y)
                for (int x = simd_end; x < win; ++x) {
                    const int k = y * win + x;
                    const int a = gxw[k], b = gyw[k];
                    const int v = kind == 0 ? a * a : kind == 1 ? a * b : b * b;
                    acc = __fadd_rn(acc, (float)v);
                }
        }
        float q[12];
        for (int l = 0; l < 12; ++l) q[l] = __shfl_sync(full, acc, l);
        const float t11 = __shfl_sync(full, acc, 12), t12 = __shfl_sync(full, acc, 13), t22 = __shfl_sync(full, acc, 14);
        const float FLT_SCALE = 1.0f / 1048576.0f;
        const float a11 = __fmul_rn(__fadd_rn(t11, __fadd_rn(__fadd_rn(q[0], q[2]), __fadd_rn(q[1], q[3]))), FLT_SCALE);
        const float a12 = __fmul_rn(__fadd_rn(t12, __fadd_rn(__fadd_rn(q[4], q[6]), __fadd_rn(q[5], q[7]))), FLT_SCALE);
        const float a22 = __fmul_rn(__fadd_rn(t22, __fadd_rn(__fadd_rn(q[8], q[10]), __fadd_rn(q[9], q[11]))), FLT_SCALE);
        const float det = __fsub_rn(__fmul_rn(a11, a22), __fmul_rn(a12, a12));
        const float dm = __fsub_rn(a11, a22);
        const float disc = __fadd_rn(__fmul_rn(dm, dm), __fmul_rn(__fmul_rn(4.0f, a12), a12));
        const float min_eig = __fdiv_rn(__fsub_rn(__fadd_rn(a22, a11), __fsqrt_rn(disc)), (float)(2 * win * win));
        if (min_eig < P.min_eig || det < 1.1920929e-07f) {
            if (level == 0) status = false;
            __syncwarp();
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
            __syncwarp();
            for (int k = lane; k < area; k += 32) {
                const int x = k % win, y = k / win;
                const u8* s = jb + (size_t)y * J.stride + x;
                itw[k] = lk_descale(s[0] * v4[0] + s[1] * v4[1] + s[J.stride] * v4[2] + s[J.stride + 1] * v4[3], 9) - iwin[k];
            }
            __syncwarp();
            float bacc = 0.0f;
            if (lane < 8) {
                const int which = lane / 4, comp = lane % 4;
                const int kk = which * 2 + comp / 2;
                const bool ycomp = comp % 2 == 1;
                for (int y = 0; y < win; ++y)
                    for (int b = 0; b < blocks; ++b) {
                        const int k0 = y * win + b * 8 + kk, k1 = k0 + 4;
                        const int g0 = ycomp ? gyw[k0] : gxw[k0], g1 = ycomp ? gyw[k1] : gxw[k1];
                        bacc = __fadd_rn(bacc, (float)(itw[k0] * g0 + itw[k1] * g1));
                    }
            } else if (lane < 10) {
                const bool ycomp = lane == 9;
                for (int y = 0; y < win; ++y)
                    for (int x = simd_end; x < win; ++x) {
                        const int k = y * win + x;
                        bacc = __fadd_rn(bacc, (float)(itw[k] * (ycomp ? gyw[k] : gxw[k])));
                    }
            }
            float qb[8];
            for (int l = 0; l < 8; ++l) qb[l] = __shfl_sync(full, bacc, l);
            const float tb1 = __shfl_sync(full, bacc, 8), tb2 = __shfl_sync(full, bacc, 9);
            float sm[4];
            for (int l = 0; l < 4; ++l) sm[l] = __fadd_rn(qb[l], qb[l + 4]);
            const float ib1 = __fadd_rn(tb1, __fadd_rn(__fadd_rn(sm[0], 0.0f), __fadd_rn(sm[2], 0.0f)));
            const float ib2 = __fadd_rn(tb2, __fadd_rn(__fadd_rn(sm[1], 0.0f), __fadd_rn(sm[3], 0.0f)));
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
        __syncwarp();
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
                for (int k = lane; k < area; k += 32) {
                    const int x = k % win, y = k / win;
                    const u8* s = jb + (size_t)y * J.stride + x;
                    itw[k] = lk_descale(s[0] * v4[0] + s[1] * v4[1] + s[J.stride] * v4[2] + s[J.stride + 1] * v4[3], 9) - iwin[k];
                }
                __syncwarp();
                float e = 0.0f;
                if (lane == 0)
                    for (int k = 0; k < area; ++k) e = __fadd_rn(e, fabsf((float)itw[k]));
                e = __shfl_sync(full, e, 0);
                err = __fdiv_rn(__fmul_rn(e, 1.0f), (float)(32 * win * win));
            }
        }
        __syncwarp();
    }
    if (lane == 0) out[pt] = make_float4(np.x, np.y, status ? 1.0f : 0.0f, err);
}
