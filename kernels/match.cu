// Brute-force Hamming matching of 256-bit descriptors: GPU twin of src/matching/cpu.rs,
// identical results (host side: src/cuda/matcher.rs).
//
// A neighbour is one u32 key, distance << 23 | index, so the lowest key is the nearest
// neighbour with ties to the lower index, whatever the order of evaluation: every
// reduction below (per-thread top-2, merge of the splits, atomicMin on the reverse keys) is
// a min over keys, hence deterministic.
//
//   match_knn    grid (query tiles, train splits), MATCH_THREADS threads, one query per
//                thread (its 32 bytes in registers). The split's train descriptors pass
//                through shared memory one tile at a time; every thread reads the same
//                descriptor at once (a broadcast). Each thread keeps its query's two lowest
//                keys over the split. With cross_check, each train descriptor's lowest key
//                over the block's queries (warp min, then shared atomicMin) is merged into
//                `reverse` with one global atomicMin per tile entry (`reverse` preset to
//                all ones by the host).
//   match_merge  one thread per query: the two lowest keys over every split's pair.
#include "common.cuh"

#define MATCH_THREADS 128
#define MATCH_INDEX_BITS 23
#define MATCH_NO_KEY 0xffffffffu

// Adds key k to the two lowest keys (b1 <= b2); MATCH_NO_KEY changes nothing
// (insert2 in src/matching/mod.rs).
__device__ __forceinline__ void knn2_insert(u32 k, u32& b1, u32& b2) {
    const u32 hi = max(k, b1);
    b1 = min(k, b1);
    b2 = min(hi, b2);
}

// query: n descriptors, train: m descriptors (two uint4 each). Split s covers train
// [s * split_len, min(m, (s + 1) * split_len)); its result for query q goes to
// partial[s * n + q].
extern "C" __global__ void __launch_bounds__(MATCH_THREADS)
    match_knn(const uint4* __restrict__ query, const uint4* __restrict__ train, int n, int m,
              int split_len, int cross_check, uint2* __restrict__ partial,
              u32* __restrict__ reverse) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    __shared__ uint4 lo[MATCH_THREADS], hi[MATCH_THREADS];
    __shared__ u32 col[MATCH_THREADS];
    const int t = threadIdx.x, lane = t & 31;
    const int q = blockIdx.x * MATCH_THREADS + t;
    const bool active = q < n;
    // Threads past the last query still take part in the warp minima, with keys that can
    // never win: tag | anything == MATCH_NO_KEY.
    uint4 a0 = make_uint4(0, 0, 0, 0), a1 = a0;
    if (active) {
        a0 = query[2 * q];
        a1 = query[2 * q + 1];
    }
    const u32 tag = active ? (u32)q : MATCH_NO_KEY;
    const int j_begin = blockIdx.y * split_len;
    const int j_end = min(m, j_begin + split_len);
    u32 b1 = MATCH_NO_KEY, b2 = MATCH_NO_KEY;
    for (int base = j_begin; base < j_end; base += MATCH_THREADS) {
        const int count = min(MATCH_THREADS, j_end - base);  // uniform over the block
        __syncthreads();  // the previous tile is consumed and its column minima flushed
        if (t < count) {
            lo[t] = train[2 * (base + t)];
            hi[t] = train[2 * (base + t) + 1];
        }
        col[t] = MATCH_NO_KEY;
        __syncthreads();
        if (cross_check) {
            for (int g = 0; g < count; g += 32) {
                // Lane k keeps the warp's minimum for train g + k: one shared atomic per
                // lane per 32 descriptors.
                u32 mine = MATCH_NO_KEY;
#pragma unroll
                for (int k = 0; k < 32; ++k) {
                    if (g + k < count) {
                        const int j = g + k;
                        const u32 d = hamming256(a0, a1, lo[j], hi[j]) << MATCH_INDEX_BITS;
                        knn2_insert(d | (u32)(base + j), b1, b2);
                        const u32 c = warp_min_u32(d | tag);
                        if (lane == k) mine = c;
                    }
                }
                if (g + lane < count) atomicMin(&col[g + lane], mine);
            }
            __syncthreads();
            if (t < count && col[t] != MATCH_NO_KEY) atomicMin(&reverse[base + t], col[t]);
        } else {
#pragma unroll 8
            for (int j = 0; j < count; ++j) {
                const u32 d = hamming256(a0, a1, lo[j], hi[j]) << MATCH_INDEX_BITS;
                knn2_insert(d | (u32)(base + j), b1, b2);
            }
        }
    }
    if (active) partial[(size_t)blockIdx.y * n + q] = make_uint2(b1, b2);
}

// knn[q] = the two lowest keys of partial[s * n + q] over the splits s.
extern "C" __global__ void match_merge(const uint2* __restrict__ partial, int n, int splits,
                                       uint2* __restrict__ knn) {
    wait_for_previous_kernel();  // note "programmatic dependent launch"
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= n) return;
    u32 b1 = MATCH_NO_KEY, b2 = MATCH_NO_KEY;
    for (int s = 0; s < splits; ++s) {
        const uint2 p = partial[(size_t)s * n + q];
        knn2_insert(p.x, b1, b2);
        knn2_insert(p.y, b1, b2);
    }
    knn[q] = make_uint2(b1, b2);
}
