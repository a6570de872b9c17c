// ORB rBRIEF descriptors on the GPU: twin of src/cpu/describe.rs, whose "Note: descriptor
// semantics" defines every rounding used here (blur, centre, rotation, samples, border).
// Host side: src/cuda/describe.rs. `ORB_PATTERN` (256 x {x1, y1, x2, y2}, signed bytes) is
// generated into the translation unit from src/cpu/orb_pattern.rs, the one copy of the table.
//
// orb_describe: one block per keypoint record, the blur fused in. Every sample of a
//   keypoint lies within DESC_R of its centre, so the block loads the raw 43x43 patch around
//   it (REFLECT_101 borders, as floats), blurs its 37x37 middle with the CPU's separable 7x7
//   float filter in the CPU's order of operations (row pass, then column pass), and thread j
//   evaluates test pair j from shared memory; a warp's ballot is descriptor word k (bytes
//   4k..4k+3, bit j of byte i = pair 8i + j, little-endian). This replaced a blur of the
//   whole pyramid (6.4 Mpixel at 1080p, 48 us on an H100) by ~2000 patches of 1369 pixels.
#include "common.cuh"

#define DESC_MAX_LEVELS 32
#define OB_R 3       // blur radius (7 taps)
#define DESC_R 18    // largest sample offset: |rint(x cos - y sin)| <= 13 sqrt(2) for pattern
                     // coordinates in [-13, 13] (checked where the pattern is generated)
#define DESC_P (2 * DESC_R + 1)       // blurred patch side
#define DESC_RAW (DESC_P + 2 * OB_R)  // raw patch side
#define DESC_RAW_PITCH 44             // its row pitch in floats: whole words of 4 pixels (11)
#define BLUR_RUN 8                    // outputs per thread in each pass of the blur
#define BLUR_SEGS 5                   // runs per row (row pass) and per column (column pass)
#define BLUR_ROWS_PITCH 40            // the row pass's pitch in floats: BLUR_SEGS runs

// Level geometry by value (mirrors `DescLevels` in src/cuda/describe.rs).
struct DescLevels {
    int w[DESC_MAX_LEVELS], h[DESC_MAX_LEVELS], off[DESC_MAX_LEVELS];
    float scale[DESC_MAX_LEVELS];  // ORB's layer scale (cpu::pyramid::level_scale)
};

// Records: {x | y << 16 (level coordinates), FAST score, response bits, angle bits}, levels
// one after the other as the header {total, count[l]..., base[l]...} says. `use_angle` 0:
// orientation is off and the angle is -1 (cpu::to_keypoint). `k`: getGaussianKernel(7, 2,
// CV_32F) taps 0..3 (the rest mirrored). Block (32, 8); grid: at least the record count.
// Output: 8 words per record.
// `angle_mode`: 0 no orientation (angle -1, cpu::to_keypoint), 1 the record's angle, 2 the
// orientation computed here from the raw patch (ORB's intensity centroid, integer moments
// reduced over the block, as ic_angle; needs half < DESC_R + OB_R) and stored into the
// record: the selection then skips its own orientation pass.
// `flags` bit 0 (`describe.blur: orb_slam3`): `k` holds OpenCV's fixed-point taps (integers, 8
// fraction bits, summing to 256) and the blur is its bit-exact path (cpu::blur): every
// partial sum of the same two passes is an integer below 2^24 (<= 255 * 256 * 256), so
// exact in f32 whatever the order, and the result is rounded as OpenCV rounds it,
// (v + 2^15) >> 16. Bit 1 (`describe.fma`): the rotated offsets as GCC contracts them,
// fma(px, a, -(py*b)) and fma(px, b, py*a) (cpu::describe::rotate).
extern "C" __global__ void orb_describe(const u8* __restrict__ pyr, DescLevels L, int nlev,
                                        const u32* __restrict__ header, uint4* __restrict__ recs,
                                        int angle_mode, float4 k, int flags, int half,
                                        const int* __restrict__ umax, float4 atan_p, float eps,
                                        u32* __restrict__ out) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ __align__(16) float raw[DESC_RAW + 1][DESC_RAW_PITCH];
    __shared__ __align__(16) float rows[DESC_RAW][BLUR_ROWS_PITCH];
    __shared__ u8 blur[DESC_P][DESC_P];
    const u32 i = blockIdx.x;
    if (i >= header[0]) return;  // block-uniform
    int l = 0;
    while (l + 1 < nlev && i >= header[1 + nlev + l + 1]) ++l;
    const uint4 rec = recs[i];
    const int w = L.w[l], h = L.h[l];
    // Centre as OpenCV recovers it from the level-0 point: round(pt * (1 / scale)).
    const float s = L.scale[l], inv = __fdiv_rn(1.0f, s);
    const int cx = __float2int_rn(__fmul_rn(__fmul_rn((float)(rec.x & 0xffffu), s), inv));
    const int cy = __float2int_rn(__fmul_rn(__fmul_rn((float)(rec.x >> 16), s), inv));

    const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    // The rotation's cosine and sine, by one thread (in double, ~80 instructions that every
    // thread repeated); the barriers below publish them. With the moments' loop below: 18.6
    // -> 17.7 M instructions for 2000 keypoints, ~1 us of ~27 (run 109).
    __shared__ float s_cos, s_sin;
    const auto set_rotation = [&](float angle) {
        const double t = (double)__fmul_rn(angle, __uint_as_float(0x3c8efa35u));  // (float)(pi/180)
        s_cos = (float)cos(t);
        s_sin = (float)sin(t);
    };
    if (angle_mode != 2 && tid == 0) set_rotation(angle_mode == 1 ? __uint_as_float(rec.w) : -1.0f);

    // The raw patch, its rows DESC_RAW_PITCH apart (whole words of 4 pixels).
    load_window_words(pyr + L.off[l], w, h, cx - DESC_R - OB_R, cy - DESC_R - OB_R, DESC_RAW_PITCH,
                      DESC_RAW, &raw[0][0]);
    __syncthreads();
    // The blur's two passes, each thread a run of BLUR_RUN outputs that reads its inputs once
    // (a row segment, then a column segment): every output is still the CPU's own chain of
    // operations (note "descriptor semantics"), only the loops around it changed. Before,
    // each output re-read its 7 inputs and divided its flat index: 7.7 M instructions for
    // 2000 keypoints at 1080p (run 144).
    const float kt[7] = {k.x, k.y, k.z, k.w, k.z, k.y, k.x};
    if (tid < DESC_RAW * BLUR_SEGS) {
        // Row pass: row r, columns c0 .. c0 + BLUR_RUN - 1 from raw columns c0 .. c0 + 15
        // (the last segment's outputs past DESC_P are never stored; the spare raw row keeps
        // its reads inside the array).
        const int r = tid / BLUR_SEGS, c0 = (tid % BLUR_SEGS) * BLUR_RUN;
        float in[BLUR_RUN + 8];
        const float4* src = reinterpret_cast<const float4*>(&raw[r][c0]);
#pragma unroll
        for (int q = 0; q < (BLUR_RUN + 8) / 4; ++q) {
            const float4 f = src[q];
            in[4 * q] = f.x, in[4 * q + 1] = f.y, in[4 * q + 2] = f.z, in[4 * q + 3] = f.w;
        }
        float out[BLUR_RUN];
#pragma unroll
        for (int j = 0; j < BLUR_RUN; ++j) {
            float acc = 0.0f;
#pragma unroll
            for (int t = 0; t < 7; ++t) acc = __fmaf_rn(in[j + t], kt[t], acc);
            out[j] = acc;
        }
        float4* dst = reinterpret_cast<float4*>(&rows[r][c0]);
#pragma unroll
        for (int q = 0; q < BLUR_RUN / 4; ++q)
            dst[q] = make_float4(out[4 * q], out[4 * q + 1], out[4 * q + 2], out[4 * q + 3]);
    }
    __syncthreads();
    if (tid < DESC_P * BLUR_SEGS) {
        // Column pass: column c, rows r0 .. r0 + BLUR_RUN - 1 (those below DESC_P) from
        // row-pass rows r0 .. r0 + BLUR_RUN + 5.
        const int c = tid % DESC_P, r0 = (tid / DESC_P) * BLUR_RUN;
        float in[BLUR_RUN + 6];
#pragma unroll
        for (int j = 0; j < BLUR_RUN + 6; ++j) in[j] = rows[min(r0 + j, DESC_RAW - 1)][c];
#pragma unroll
        for (int j = 0; j < BLUR_RUN; ++j) {
            float acc = __fmul_rn(in[j + OB_R], kt[3]);
#pragma unroll
            for (int d = 1; d <= 3; ++d)
                acc = __fmaf_rn(__fadd_rn(in[j + OB_R + d], in[j + OB_R - d]), kt[3 + d], acc);
            if (r0 + j < DESC_P)
                blur[r0 + j][c] = (flags & 1) ? (u8)(((u32)acc + 32768u) >> 16)
                                        : (u8)fminf(fmaxf(rintf(acc), 0.0f), 255.0f);
        }
    }
    __syncthreads();

    __shared__ int moments[2][8];
    if (angle_mode == 2) {  // block-uniform
        // The keypoint (x, y) is the patch's centre (cx, cy) up to float rounding in the
        // round trip through level 0 (ox, oy: 0 in practice; the host keeps half <=
        // DESC_R + OB_R - 1 so that one pixel of it fits).
        const int ox = (int)(rec.x & 0xffffu) - cx, oy = (int)(rec.x >> 16) - cy;
        // Lanes take the columns u, warps the rows v: no division by the runtime side per
        // pixel.
        int m10 = 0, m01 = 0;
        for (int v = (tid >> 5) - half; v <= half; v += nthreads >> 5) {
            const int d = v == 0 ? half : __ldg(umax + abs(v));
            for (int u = (tid & 31) - half; u <= half; u += 32) {
                if (abs(u) <= d) {
                    const int px = (int)raw[DESC_R + OB_R + oy + v][DESC_R + OB_R + ox + u];
                    m10 += u * px;
                    m01 += v * px;
                }
            }
        }
        m10 = warp_sum_i32(m10);
        m01 = warp_sum_i32(m01);
        if ((tid & 31) == 0) {
            moments[0][tid >> 5] = m10;
            moments[1][tid >> 5] = m01;
        }
        __syncthreads();
        if (tid == 0) {
            int a10 = 0, a01 = 0;
            for (int w8 = 0; w8 < nthreads / 32; ++w8) {
                a10 += moments[0][w8];
                a01 += moments[1][w8];
            }
            const float angle = fast_atan2_deg((float)a01, (float)a10, atan_p, eps);
            recs[i].w = __float_as_uint(angle);
            set_rotation(angle);
        }
        __syncthreads();
    }
    const float a = s_cos, b = s_sin;
    const char4 p = reinterpret_cast<const char4*>(ORB_PATTERN)[tid];  // 256 threads: pair tid
    int v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const float px = (float)(e ? p.z : p.x), py = (float)(e ? p.w : p.y);
        const bool fused = flags & 2;
        const int dx = __float2int_rn(fused ? __fmaf_rn(px, a, -__fmul_rn(py, b))
                                            : __fsub_rn(__fmul_rn(px, a), __fmul_rn(py, b)));
        const int dy = __float2int_rn(fused ? __fmaf_rn(px, b, __fmul_rn(py, a))
                                            : __fadd_rn(__fmul_rn(px, b), __fmul_rn(py, a)));
        const int x = cx + dx, y = cy + dy;
        // Inside the level: the blurred pixel; outside: the raw pixel at the reflected place
        // (which is what the raw patch holds there).
        v[e] = (x >= 0 && y >= 0 && x < w && y < h) ? (int)blur[DESC_R + dy][DESC_R + dx]
                                                    : (int)raw[DESC_R + OB_R + dy][DESC_R + OB_R + dx];
    }
    const u32 bits = __ballot_sync(0xffffffffu, v[0] < v[1]);
    if ((tid & 31) == 0) out[(size_t)i * 8 + (tid >> 5)] = bits;
}
