// attention_warp.cu: decode attention with one warp per (sequence, head, key
// split), head size 64. Same contract as attention_decode_64 in attention.cu
// (fused KV append of the new token), but the splits are merged in-kernel,
// built for bandwidth at large batches:
//   - without key splits a block holds AW_WARPS heads of one sequence and
//     its warps never synchronise (attention_decode_warp_64: batches too
//     large for two splits at 24 warps an SM, over 132 with 12 heads on 132
//     SMs);
//   - with key splits a block holds one (sequence, head) and a warp per
//     split, which leave their partials in shared memory for warp 0 to
//     merge: no combine kernel, and no global counter or partial round trip
//     on the critical path. attention_decode_warp_splits_64 (128 registers,
//     up to 16 splits) serves small batches; attention_decode_warp_splits_r4_64
//     (80 registers, rounds of 16 keys, 2, 4 or 8 splits) gives batch
//     11-132 up to 24 warps an SM in one wave (batch 128: two splits, 3,072
//     warps);
//   - a lane group of 8 lanes reads one key as 16-byte pieces, four groups
//     read four consecutive keys (512 contiguous bytes per load instruction),
//     and each lane keeps R keys' K and V loads in flight per round (8, or 4
//     in the 80-register kernel);
//   - the next round's keys are requested as soon as this round's scores
//     are computed and its values as soon as this round's values are
//     summed (the same registers, no second buffer), and the block-table
//     lookups a round ahead of that.
#include "common.cuh"

#define AW_WARPS 4   // heads per block
#define AW_MAX_SPLITS 16  // maxDecodeSplits in forward.go; at most 32 (a lane per split)

// volatile: the first round's loads must stay ahead of grid_dep_wait.
__device__ __forceinline__ uint4 ld_kv(const half_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// SPLITS = false: grid (decode seqs, ceil(NH / AW_WARPS)), AW_WARPS * 32
// threads, one split. SPLITS = true: grid (decode seqs, NH), nsplit * 32
// threads (nsplit <= AW_MAX_SPLITS), warp w is split w.
template <bool SPLITS, int R = 8>  // R: keys per lane group per round (4R per warp)
__device__ __forceinline__ void attention_decode_warp_impl(half_t* out, const half_t* qkv, half_t* kc, half_t* vc,
                                                           const int* block_tables, int max_blocks,
                                                           const int* q_start, const int* ctx_len,
                                                           const int* new_from, const int* dec_seqs, int NH,
                                                           int B, float scale, int nsplit) {
    constexpr int HD = 64;
    // SPLITS: each split's [m, l, acc[HD]], rows of HD + 2 floats in the
    // dynamic shared memory (decodeShape sizes it, with room to spare).
    extern __shared__ float aw_sp[];
    grid_dep_launch();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane & 7, kq = lane >> 3;
    const int h = SPLITS ? blockIdx.y : blockIdx.y * AW_WARPS + warp;
    if (!SPLITS && h >= NH) return;  // a whole warp; nothing below synchronises the block
    const int s = dec_seqs[blockIdx.x], split = SPLITS ? warp : 0;
    const int C = NH * HD;
    // Keys p0..p are this step's tokens (p0 == p but for the rows of a short
    // chunk, attention.cu): read from qkv, never from the cache.
    const int t = q_start[s], p = ctx_len[s], p0 = new_from[s];
    const int* bt = block_tables + (size_t)s * max_blocks;
    const half_t* qrow = qkv + (size_t)t * 3 * C + h * HD;
    const int nkeys = p + 1;
    const int chunk = (((nkeys + nsplit - 1) / nsplit) + 15) & ~15;  // splits start at multiples of 16 keys
    const int kbeg = min(nkeys, split * chunk), kend = min(nkeys, kbeg + chunk);

    // off[r]: this lane's 16-byte piece of key j0 + 4r + kq, in 16-byte units.
    uint32_t off[R];
    auto lookup = [&](int j0, uint32_t* o) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            int j = j0 + 4 * r + kq;
            o[r] = (j < kend && j < p0) ? (uint32_t)(kv_offset(bt[j / B], h, j % B, NH, B, HD) / 8) + sub : 0u;
        }
    };
    // kr/vr: this lane's 16-byte pieces of the round's 8 keys (zero past
    // kend). Cached keys (j < p0) were written by earlier steps, which ended
    // before this step's first kernel (launched without programmatic
    // dependent launch), so the first round is read before the wait, while
    // the qkv projection still runs; this step's tokens (j >= p0) come from
    // qkv after it. Software pipeline without extra registers: the next round's
    // keys are requested once this round's scores are computed, and its
    // values once this round's values are summed, so a round's loads are
    // in flight while the previous round is still being worked on.
    uint4 kr[R], vr[R];
    // load(kv, cache, j0): this lane's pieces of the round's keys or values.
    auto load = [&](uint4* kv, const half_t* cache, int j0) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int j = j0 + 4 * r + kq;
            kv[r] = make_uint4(0, 0, 0, 0);
            if (j < kend && j < p0) kv[r] = ld_kv(reinterpret_cast<const half_t*>(reinterpret_cast<const uint4*>(cache) + off[r]));
        }
    };
    lookup(kbeg, off);  // block tables are step inputs: before the wait
    load(kr, kc, kbeg);
    load(vr, vc, kbeg);
    if (kbeg + (4 * R) < kend) {
        lookup(kbeg + (4 * R), off);
        // The second round's K and V lines are asked into L2 too (a lane per
        // key), so that while qkv runs the DRAM streams twice what the first
        // round's registers hold: batch 128 overlapped 0.842-0.844 -> 0.826 ms
        // (H100, docs/cuda.md).
        if (sub == 0) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int j = kbeg + (4 * R) + 4 * r + kq;
                if (j < kend && j < p0) {
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const uint4*>(kc) + off[r]));
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const uint4*>(vc) + off[r]));
                }
            }
        }
    }
    grid_dep_wait();     // qkv belongs to earlier kernels
    if (kbeg <= p && p < kend && kq == 0) {  // fused KV append of the new token
        size_t o = kv_offset(bt[p / B], h, p % B, NH, B, HD) + sub * 8;
        *(uint4*)(kc + o) = *(const uint4*)(qrow + C + sub * 8);
        *(uint4*)(vc + o) = *(const uint4*)(qrow + 2 * C + sub * 8);
    }
    float q[8];
    unpack8(*(const uint4*)(qrow + sub * 8), q);
#pragma unroll
    for (int i = 0; i < 8; i++) q[i] *= scale;
    float m = NEG_INF, l = 0.f, acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.f;
    for (int j0 = kbeg; j0 < kend; j0 += (4 * R)) {
        const bool more = j0 + (4 * R) < kend;  // off holds the next round's offsets
        // Keys of this step's rows come from qkv: only in a round that
        // reaches p0 (the last one of a plain decode row), a uniform branch
        // that keeps the address arithmetic out of the other rounds.
        const bool fresh = j0 + (4 * R) > p0;
        if (fresh) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int j = j0 + 4 * r + kq;
                if (j >= p0 && j < kend) kr[r] = *(const uint4*)(qrow - (size_t)(p - j) * 3 * C + C + sub * 8);
            }
        }
        float d[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            float f[8];
            unpack8(kr[r], f);
            float x = 0.f;
#pragma unroll
            for (int i = 0; i < 8; i++) x += q[i] * f[i];
            d[r] = x;
        }
        if (more) load(kr, kc, j0 + (4 * R));
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) {
#pragma unroll
            for (int r = 0; r < R; r++) d[r] += __shfl_xor_sync(0xffffffffu, d[r], o);
        }
        float mx = m;
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (j0 + 4 * r + kq >= kend) d[r] = NEG_INF;
            mx = fmaxf(mx, d[r]);
        }
        if (mx != NEG_INF) {
            const float corr = __expf(m - mx);
            l *= corr;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[i] *= corr;
            if (fresh) {
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const int j = j0 + 4 * r + kq;
                    if (j >= p0 && j < kend) vr[r] = *(const uint4*)(qrow - (size_t)(p - j) * 3 * C + 2 * C + sub * 8);
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float pe = __expf(d[r] - mx);
                float f[8];
                unpack8(vr[r], f);
                l += pe;
#pragma unroll
                for (int i = 0; i < 8; i++) acc[i] += pe * f[i];
            }
            m = mx;
        }
        if (more) {
            load(vr, vc, j0 + (4 * R));
            if (j0 + 2 * (4 * R) < kend) lookup(j0 + 2 * (4 * R), off);
        }
    }
    // Merge the four key groups (lanes sub, sub+8, sub+16, sub+24).
#pragma unroll
    for (int o = 8; o < 32; o <<= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
        const float M = fmaxf(m, m2);
        const float c1 = m == NEG_INF ? 0.f : __expf(m - M), c2 = m2 == NEG_INF ? 0.f : __expf(m2 - M);
        l = l * c1 + l2 * c2;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] = acc[i] * c1 + __shfl_xor_sync(0xffffffffu, acc[i], o) * c2;
        m = M;
    }
    if (!SPLITS) {
        if (kq != 0) return;
        const float inv = 1.f / l;
        uint4 pk;
        pk.x = (uint32_t)f2h(acc[0] * inv) | ((uint32_t)f2h(acc[1] * inv) << 16);
        pk.y = (uint32_t)f2h(acc[2] * inv) | ((uint32_t)f2h(acc[3] * inv) << 16);
        pk.z = (uint32_t)f2h(acc[4] * inv) | ((uint32_t)f2h(acc[5] * inv) << 16);
        pk.w = (uint32_t)f2h(acc[6] * inv) | ((uint32_t)f2h(acc[7] * inv) << 16);
        *(uint4*)(out + (size_t)t * C + h * HD + sub * 8) = pk;
        return;
    }
    // Each split's partial goes to shared memory; warp 0 merges them, in
    // split order: lane i < nsplit takes split i's (m, l) and the warp
    // reduces them, then each lane weighs its two output dims of every split.
    if (kq == 0) {
        if (sub == 0) aw_sp[split * (HD + 2)] = m, aw_sp[split * (HD + 2) + 1] = l;
#pragma unroll
        for (int i = 0; i < 8; i++) aw_sp[split * (HD + 2) + 2 + sub * 8 + i] = acc[i];
    }
    __syncthreads();
    if (warp != 0) return;
    const float mi = lane < nsplit ? aw_sp[lane * (HD + 2)] : NEG_INF, li = lane < nsplit ? aw_sp[lane * (HD + 2) + 1] : 0.f;
    float M = mi;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    const float wi = mi == NEG_INF ? 0.f : __expf(mi - M);  // an empty split weighs nothing
    const float L = warp_sum(li * wi);
    float o0 = 0.f, o1 = 0.f;
#pragma unroll
    for (int i = 0; i < AW_MAX_SPLITS; i++) {
        const float w = __shfl_sync(0xffffffffu, wi, i);
        if (i < nsplit) o0 += aw_sp[i * (HD + 2) + 2 + 2 * lane] * w, o1 += aw_sp[i * (HD + 2) + 3 + 2 * lane] * w;
    }
    *(uint32_t*)(out + (size_t)t * C + h * HD + 2 * lane) = (uint32_t)f2h(o0 / L) | ((uint32_t)f2h(o1 / L) << 16);
}

// Both take attention_decode_64's arguments (attention.cu); part is unused
// (the partials stay on chip).
extern "C" __global__ void __launch_bounds__(AW_WARPS * 32) attention_decode_warp_64(
    half_t* out, const half_t* qkv, half_t* kc, half_t* vc, const int* block_tables, int max_blocks,
    const int* q_start, const int* ctx_len, const int* new_from, const int* dec_seqs, int NH, int B, float scale,
    int nsplit, float* part) {
    attention_decode_warp_impl<false>(out, qkv, kc, vc, block_tables, max_blocks, q_start, ctx_len, new_from, dec_seqs,
                                      NH, B, scale, 1);
}

extern "C" __global__ void __launch_bounds__(AW_MAX_SPLITS * 32) attention_decode_warp_splits_64(
    half_t* out, const half_t* qkv, half_t* kc, half_t* vc, const int* block_tables, int max_blocks,
    const int* q_start, const int* ctx_len, const int* new_from, const int* dec_seqs, int NH, int B, float scale,
    int nsplit, float* part) {
    attention_decode_warp_impl<true>(out, qkv, kc, vc, block_tables, max_blocks, q_start, ctx_len, new_from, dec_seqs,
                                     NH, B, scale, nsplit);
}

// attention_decode_warp_splits_64 in 80 registers (rounds of 16 keys, 4 a
// lane): up to 8 splits a block and 24 warps an SM, for batches whose
// (sequence, head) pairs are too many for more than 8 splits but too few
// to fill the SMs' warp slots one warp each (batch 11-132 on the H100).
extern "C" __global__ void __launch_bounds__(256, 3) attention_decode_warp_splits_r4_64(
    half_t* out, const half_t* qkv, half_t* kc, half_t* vc, const int* block_tables, int max_blocks,
    const int* q_start, const int* ctx_len, const int* new_from, const int* dec_seqs, int NH, int B, float scale,
    int nsplit, float* part) {
    attention_decode_warp_impl<true, 4>(out, qkv, kc, vc, block_tables, max_blocks, q_start, ctx_len, new_from,
                                        dec_seqs, NH, B, scale, nsplit);
}
