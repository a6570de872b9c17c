// ORB rBRIEF descriptors on the GPU: twin of src/cpu/describe.rs, whose "Note: descriptor
// semantics" defines every rounding used here (blur, centre, rotation, samples, border).
// Host side: src/cuda/describe.rs. `ORB_PATTERN` (256 x {x1, y1, x2, y2}, signed bytes) is
// generated into the translation unit from src/cpu/orb_pattern.rs, the one copy of the table.
//
// orb_blur: the 7x7 float separable blur of every level (grid: the tiles of all levels), from
//   a (TH + 6) x (TW + 6) byte tile in shared memory with REFLECT_101 borders, the row pass
//   into a float tile, then the column pass. 32x32 output per block: the halo costs 42%
//   extra loads instead of 2.4x with 32x8 tiles.
// orb_describe: one warp per keypoint record; lane j evaluates test pair 32k + j for k = 0..7
//   and a ballot packs each group of 32 bits, which is descriptor word k (bytes 4k..4k+3,
//   bit j of byte i = pair 8i + j, little-endian): no shared memory, no atomics, and the
//   pattern reads of a warp are 128 contiguous bytes.
#include "common.cuh"

#define DESC_MAX_LEVELS 32
#define OB_TW 32
#define OB_TH 32
#define OB_R 3

// Level geometry by value (mirrors `DescLevels` in src/cuda/describe.rs).
struct DescLevels {
    int w[DESC_MAX_LEVELS], h[DESC_MAX_LEVELS], off[DESC_MAX_LEVELS];
    int tiles_x[DESC_MAX_LEVELS], tile_start[DESC_MAX_LEVELS];
    float scale[DESC_MAX_LEVELS];  // ORB's layer scale (cpu::pyramid::level_scale)
};

// k = getGaussianKernel(7, 2, CV_32F) taps 0..3 (the rest mirrored).
extern "C" __global__ void orb_blur(const u8* __restrict__ pyr, u8* __restrict__ blurred, DescLevels L,
                         int nlev, float4 k) {
    __shared__ u8 raw[OB_TH + 2 * OB_R][OB_TW + 2 * OB_R];
    __shared__ float rows[OB_TH + 2 * OB_R][OB_TW];
    const int tile = blockIdx.x;
    int l = 0;
    while (l + 1 < nlev && tile >= L.tile_start[l + 1]) ++l;
    const int w = L.w[l], h = L.h[l];
    const int lt = tile - L.tile_start[l];
    const int x0 = (lt % L.tiles_x[l]) * OB_TW, y0 = (lt / L.tiles_x[l]) * OB_TH;
    const u8* src = pyr + L.off[l];
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    for (int i = tid; i < (OB_TH + 2 * OB_R) * (OB_TW + 2 * OB_R); i += nthreads) {
        const int r = i / (OB_TW + 2 * OB_R), c = i % (OB_TW + 2 * OB_R);
        const int y = reflect101(y0 + r - OB_R, h), x = reflect101(x0 + c - OB_R, w);
        raw[r][c] = __ldg(src + (size_t)y * w + x);
    }
    __syncthreads();
    const float kt[7] = {k.x, k.y, k.z, k.w, k.z, k.y, k.x};
    for (int i = tid; i < (OB_TH + 2 * OB_R) * OB_TW; i += nthreads) {
        const int r = i / OB_TW, c = i % OB_TW;
        float s = 0.0f;
#pragma unroll
        for (int t = 0; t < 7; ++t) s = __fmaf_rn((float)raw[r][c + t], kt[t], s);
        rows[r][c] = s;
    }
    __syncthreads();
    u8* dst = blurred + L.off[l];
    for (int i = tid; i < OB_TH * OB_TW; i += nthreads) {
        const int r = i / OB_TW, c = i % OB_TW;
        const int y = y0 + r, x = x0 + c;
        if (y >= h || x >= w) continue;
        float s = __fmul_rn(rows[r + OB_R][c], kt[3]);
#pragma unroll
        for (int j = 1; j <= 3; ++j)
            s = __fmaf_rn(__fadd_rn(rows[r + OB_R + j][c], rows[r + OB_R - j][c]), kt[3 + j], s);
        dst[(size_t)y * w + x] = (u8)fminf(fmaxf(rintf(s), 0.0f), 255.0f);
    }
}

// Records: {x | y << 16 (level coordinates), FAST score, response bits, angle bits}, levels
// one after the other as the header {total, count[l]..., base[l]...} says. `use_angle` 0:
// orientation is off and the angle is -1 (cpu::to_keypoint). Output: 8 words per record.
extern "C" __global__ void orb_describe(const u8* __restrict__ pyr, const u8* __restrict__ blurred,
                             DescLevels L, int nlev, const u32* __restrict__ header,
                             const uint4* __restrict__ recs, int use_angle,
                             u32* __restrict__ out) {
    const int lane = threadIdx.x & 31;
    const u32 i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (i >= header[0]) return;  // warp-uniform
    int l = 0;
    while (l + 1 < nlev && i >= header[1 + nlev + l + 1]) ++l;
    const uint4 rec = recs[i];
    const int w = L.w[l], h = L.h[l];
    // Centre as OpenCV recovers it from the level-0 point: round(pt * (1 / scale)).
    const float s = L.scale[l], inv = __fdiv_rn(1.0f, s);
    const int cx = __float2int_rn(__fmul_rn(__fmul_rn((float)(rec.x & 0xffffu), s), inv));
    const int cy = __float2int_rn(__fmul_rn(__fmul_rn((float)(rec.x >> 16), s), inv));
    const float angle = use_angle ? __uint_as_float(rec.w) : -1.0f;
    const double t = (double)__fmul_rn(angle, __uint_as_float(0x3c8efa35u));  // (float)(pi/180)
    const float a = (float)cos(t), b = (float)sin(t);
    const u8* raw = pyr + L.off[l];
    const u8* blur = blurred + L.off[l];
    u32 word = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const char4 p = reinterpret_cast<const char4*>(ORB_PATTERN)[32 * k + lane];
        int v[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float px = (float)(e ? p.z : p.x), py = (float)(e ? p.w : p.y);
            const int x = cx + __float2int_rn(__fsub_rn(__fmul_rn(px, a), __fmul_rn(py, b)));
            const int y = cy + __float2int_rn(__fadd_rn(__fmul_rn(px, b), __fmul_rn(py, a)));
            v[e] = (x >= 0 && y >= 0 && x < w && y < h)
                       ? __ldg(blur + (size_t)y * w + x)
                       : __ldg(raw + (size_t)reflect101(y, h) * w + reflect101(x, w));
        }
        const u32 bits = __ballot_sync(0xffffffffu, v[0] < v[1]);
        if (lane == k) word = bits;
    }
    if (lane < 8) out[(size_t)i * 8 + lane] = word;
}
