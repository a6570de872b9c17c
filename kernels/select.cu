// Per-level budget selection on the GPU: GPU twin of `cpu::select_level` for
// `select.spread: none` (ORB's path), i.e. `select::retain_best_with_ties(2n)` on the FAST
// score (Harris score only), then `select::retain_best(n)` on the response, then the kept
// corners in (y, x) order, then their orientation.
//
// Input: the compacted candidates of every level (`cand`, raster order per level, from
// gather_orient in orient.cu: {x | y << 16, FAST score, response bits, angle bits}) and the
// candidate header {total, count[l]..., base[l]...} of compact.cu.
//
// select_level (one block per level, deterministic, no atomics order dependence):
//   1. the 2n pre-cut: a 256-bin histogram of the u8 FAST score gives the cut score s*, the
//      largest s with #{score >= s} >= 2n; every candidate with score >= s* is kept (that is
//      exactly the set retain_best_with_ties keeps: all ties of the 2n-th score);
//   2. the top n by (response desc, y asc, x asc): every candidate has a distinct u64 key
//      (order-preserving u32 of the float response << 32 | ~(x | y << 16)); a radix select
//      (8 bits per pass, most significant first) finds the n-th largest key; keep key >= it;
//   3. ordered compaction (block scan over the candidates in raster order) of the indices
//      of the kept candidates into `sel_idx` (at the level's candidate base) and the count.
// orient_kept (grid: levels x blocks): level bases from the kept counts, orientation of the
// kept corners only (one warp each), and the final records + header {total, count[l]..., base[l]...}.
#include "common.cuh"

#define SEL_MAX_LEVELS 32

// Budget per level, by value (kernel parameter).
struct SelParams {
    u32 n[SEL_MAX_LEVELS];
};

// Rust's f32::total_cmp order as an unsigned integer order.
__device__ __forceinline__ u32 float_order_key(u32 f) {
    return (f & 0x80000000u) ? ~f : (f | 0x80000000u);
}

// Best first = largest key: response descending, then (y, x) ascending.
__device__ __forceinline__ u64 rank_key(uint4 c) {
    return ((u64)float_order_key(c.z) << 32) | (u64)(~c.x);
}

// Called by warp 0 only: scanning bins from 255 down, the bin where the running count
// reaches `need` (1 <= need <= sum of the bins); *above = the count in higher bins.
__device__ __forceinline__ void find_bin_from_top(const u32* hist, u32 need, u32* bin, u32* above) {
    const int lane = threadIdx.x & 31;
    u32 s = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) s += hist[255 - 8 * lane - j];
    u32 incl = s;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
    }
    const u32 ball = __ballot_sync(0xffffffffu, incl >= need);
    const int first = __ffs(ball) - 1;
    if (lane == first) {
        u32 c = incl - s;
        for (int j = 0; j < 8; ++j) {
            const int b = 255 - 8 * lane - j;
            if (c + hist[b] >= need) {
                *bin = (u32)b;
                *above = c;
                break;
            }
            c += hist[b];
        }
    }
}

// Block: 1024 threads (a multiple of 32). Grid: one block per level.
extern "C" __global__ void select_level(const u32* __restrict__ header, int nlev, SelParams P,
                                        int precut, const uint4* __restrict__ cand,
                                        u32* __restrict__ sel_idx, u32* __restrict__ kept) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ u32 hist[256];
    __shared__ u32 sh[32];
    __shared__ u32 s_bin, s_above;
    const int l = blockIdx.x;
    const u32 count = header[1 + l], base = header[1 + nlev + l];
    const u32 n = P.n[l];
    const uint4* c = cand + base;

    bool none = n == 0;
    u32 score_cut = 0;  // keep: FAST score >= score_cut
    u64 thresh = 0;     // and rank key >= thresh
    u32 m = count;      // candidates left after the pre-cut
    if (!none && precut && count > 2 * n) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        for (u32 i = threadIdx.x; i < count; i += blockDim.x) atomicAdd(&hist[c[i].y & 255u], 1u);
        __syncthreads();
        if (threadIdx.x < 32) find_bin_from_top(hist, 2 * n, &s_bin, &s_above);
        __syncthreads();
        score_cut = s_bin;
        m = s_above + hist[s_bin];
        __syncthreads();
    }
    if (!none && m > n) {
        u32 need = n;
        u64 prefix = 0;
        for (int shift = 56; shift >= 0; shift -= 8) {
            const u64 hi_mask = shift == 56 ? 0ull : (~0ull << (shift + 8));
            for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
            __syncthreads();
            for (u32 i = threadIdx.x; i < count; i += blockDim.x) {
                const uint4 v = c[i];
                if ((v.y & 255u) < score_cut) continue;
                const u64 key = rank_key(v);
                if ((key & hi_mask) == prefix) atomicAdd(&hist[(u32)(key >> shift) & 255u], 1u);
            }
            __syncthreads();
            if (threadIdx.x < 32) find_bin_from_top(hist, need, &s_bin, &s_above);
            __syncthreads();
            const u32 b = s_bin;
            need -= s_above;
            prefix |= (u64)b << shift;
            const bool done = hist[b] == need;  // the whole bucket is kept (keys are distinct)
            __syncthreads();
            if (done) break;
        }
        thresh = prefix;
    }

    // Ordered compaction of the kept candidates (raster order kept).
    u32 carry = 0;
    for (u32 i0 = 0; i0 < count; i0 += blockDim.x) {
        const u32 i = i0 + threadIdx.x;
        bool keep = false;
        if (i < count && !none) {
            const uint4 v = c[i];
            keep = (v.y & 255u) >= score_cut && rank_key(v) >= thresh;
        }
        u32 tot;
        const u32 ex = block_exclusive_scan(keep ? 1u : 0u, sh, &tot);
        if (keep) sel_idx[base + carry + ex] = base + i;
        carry += tot;
    }
    if (threadIdx.x == 0) kept[l] = carry;
}

// Grid: (levels, blocks per level). Writes kp[] (levels one after the other, raster order
// inside a level) and kp_header {total, count[l]..., base[l]...}.
extern "C" __global__ void orient_kept(const u8* __restrict__ pyr, const LevelDesc* __restrict__ levels,
                                       int nlev, const u32* __restrict__ header,
                                       const u32* __restrict__ kept, const u32* __restrict__ sel_idx,
                                       const uint4* __restrict__ cand, int orient, int half,
                                       const int* __restrict__ umax, float4 atan_p, float eps,
                                       uint4* __restrict__ kp, u32* __restrict__ kp_header) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ u32 s_base;
    const int l = blockIdx.x;
    if (threadIdx.x == 0) {
        u32 b = 0;
        for (int i = 0; i < l; ++i) b += kept[i];
        s_base = b;
        if (blockIdx.y == 0) {
            kp_header[1 + l] = kept[l];
            kp_header[1 + nlev + l] = b;
            if (l == nlev - 1) kp_header[0] = b + kept[l];
        }
    }
    __syncthreads();
    const u32 k = kept[l];
    const u32 out_base = s_base;
    const LevelDesc L = levels[l];
    const u8* img = pyr + L.img_off;
    const u32 cbase = header[1 + nlev + l];
    const u32 warps = blockDim.x >> 5, lane = threadIdx.x & 31;
    for (u32 j = blockIdx.y * warps + (threadIdx.x >> 5); j < k; j += gridDim.y * warps) {
        const uint4 v = cand[sel_idx[cbase + j]];
        const float a = orient ? ic_angle_warp(img, L.w, (int)(v.x & 0xffffu), (int)(v.x >> 16), half,
                                               umax, atan_p, eps)
                               : -1.0f;
        if (lane == 0) kp[out_base + j] = make_uint4(v.x, v.y, v.z, __float_as_uint(a));
    }
}

// The frame's results into pinned host memory that the device maps, in one launch: the
// header, the kept records and (`desc` not null) their descriptors, only as many as the
// header counts. Three copies sized for the capacity (2000 records and descriptors where a
// 1080p frame keeps ~800) took ~7 us after the descriptors (docs/performance.md, change 46).
// Grid-stride over 16-byte words; the host reads them after its sync.
extern "C" __global__ void copy_results(const u32* __restrict__ header, int nlev, u32 cap,
                                        const uint4* __restrict__ kp, const uint4* __restrict__ desc,
                                        u32* __restrict__ host_header, uint4* __restrict__ host_kp,
                                        uint4* __restrict__ host_desc) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const u32 n = min(header[0], cap);
    const u32 tid = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
    if (tid < (u32)(1 + 2 * nlev)) host_header[tid] = header[tid];
    const u32 words = n + (desc != nullptr ? 2 * n : 0u);
    for (u32 k = tid; k < words; k += step) {
        if (k < n) host_kp[k] = kp[k];
        else host_desc[k - n] = desc[k - n];
    }
}

