// Encoding decode + gray conversion (GPU twin of src/cpu/decode.rs). The raw message bytes
// are uploaded as they came; every encoding is converted here.
#include "common.cuh"

// Encoding codes (src/cuda/decode.rs `encoding_code`).
#define ENC_MONO8 0
#define ENC_MONO16 1
#define ENC_RGB8 2
#define ENC_BGR8 3
#define ENC_RGBA8 4
#define ENC_BGRA8 5
#define ENC_UYVY 6
#define ENC_YUYV 7

// cv::cvtColor RGB2GRAY on 8-bit images: fixed-point weights (the CPU's GRAY_R/G/B and
// GRAY_SHIFT from src/cpu/rgb_gray.rs, passed in as `wt` = {r, g, b, shift}).
__device__ __forceinline__ u8 gray_from_rgb(u32 r, u32 g, u32 b, uint4 wt) {
    return (u8)((r * wt.x + g * wt.y + b * wt.z + (1u << (wt.w - 1))) >> wt.w);
}

__device__ __forceinline__ u8 gray_from_mono16(u32 v) {
    // convertTo(CV_8U, 1/256): round half to even, saturate.
    u32 q = v >> 8, r = v & 0xffu;
    u32 up = (r > 128u || (r == 128u && (q & 1u))) ? 1u : 0u;
    u32 o = q + up;
    return (u8)(o > 255u ? 255u : o);
}

extern "C" __global__ void decode_gray(const u8* __restrict__ raw, int step, int w, int h,
                                       int enc, int big_endian, uint4 wt, u8* __restrict__ out) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const u8* row = raw + (size_t)y * step;
    u8 g;
    switch (enc) {
    case ENC_MONO8: g = row[x]; break;
    case ENC_MONO16: {
        u32 a = row[2 * x], b = row[2 * x + 1];
        g = gray_from_mono16(big_endian ? ((a << 8) | b) : ((b << 8) | a));
        break;
    }
    case ENC_RGB8: g = gray_from_rgb(row[3 * x], row[3 * x + 1], row[3 * x + 2], wt); break;
    case ENC_BGR8: g = gray_from_rgb(row[3 * x + 2], row[3 * x + 1], row[3 * x], wt); break;
    case ENC_RGBA8: g = gray_from_rgb(row[4 * x], row[4 * x + 1], row[4 * x + 2], wt); break;
    case ENC_BGRA8: g = gray_from_rgb(row[4 * x + 2], row[4 * x + 1], row[4 * x], wt); break;
    case ENC_UYVY: g = row[2 * x + 1]; break;
    default: g = row[2 * x]; break;  // ENC_YUYV
    }
    out[(size_t)y * w + x] = g;
}

// A packed mono8 frame read from mapped host memory (cuda.zero_copy): 16 bytes per thread,
// so that a warp reads 512 contiguous bytes per bus request instead of 32. Both pointers
// are 16-byte aligned (the host checks; else decode_gray does the copy).
extern "C" __global__ void copy_frame16(const u8* __restrict__ src, u8* __restrict__ dst,
                                        unsigned long long n) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    unsigned long long i = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) * 16ull;
    if (i + 16ull <= n) {
        *(uint4*)(dst + i) = *(const uint4*)(src + i);
    } else {
        for (; i < n; ++i) dst[i] = src[i];
    }
}
