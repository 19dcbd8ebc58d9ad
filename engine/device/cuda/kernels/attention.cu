// attention.cu: causal self-attention over the paged KV cache.
//
// A step mixes prefill chunks and decode tokens. Per layer:
//   kv_write            copies the K/V of every prefill-chunk token into its cache slot;
//   attention_prefill   runs each chunk's queries over cache positions [0, pos]
//                       (cached prefix + earlier chunks + this chunk), tiled in shared memory;
//   attention_decode    runs each one-token row over [0, pos] and writes that
//                       token's own K/V into the cache first (the fused KV append), so
//                       decode needs no separate write.
// Sequences are described by per-sequence arrays (q_start: first row of the
// sequence in the step's token rows; q_len; ctx_len: tokens already cached
// before this step) and a block table row per sequence.
//
// A decode row may also be one token of a short chunk laid out as consecutive
// one-token rows (a prefill over a cached prefix, run like a decode step):
// new_from[s] is the first position of its chunk (ctx_len[s] for a plain
// decode row). Keys in [new_from, pos] belong to rows of this step, which
// append them concurrently: they are read from qkv (row q_start - (pos - j)),
// never from the cache.
#include "common.cuh"

// slots (N): physical cache slot (block*B + offset) of each token row, or -1
// for rows whose K/V another kernel writes. One thread per 8 halves.
extern "C" __global__ void kv_write(half_t* kc, half_t* vc, const half_t* qkv, const int* slots,
                                    int N, int NH, int HD, int B) {
    grid_dep_launch();
    grid_dep_wait();
    int C = NH * HD, per = C / 8;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * per) return;
    int i = idx / per, c = (idx % per) * 8;
    int slot = slots[i];
    if (slot < 0) return;
    size_t o = kv_offset(slot / B, c / HD, slot % B, NH, B, HD) + c % HD;
    const half_t* row = qkv + (size_t)i * 3 * C;
    *(uint4*)(kc + o) = *(const uint4*)(row + C + c);
    *(uint4*)(vc + o) = *(const uint4*)(row + 2 * C + c);
}

// Decode: one block (8 warps) per (sequence, head, key split). Lanes form
// groups of HD/8; a group reads one key as 16-byte vectors, so a warp covers
// 32/(HD/8) keys per step and each lane keeps an online softmax over its keys
// for 8 of the HD output dims. Groups are merged through shared memory.
// With nsplit > 1 (small batches, too few blocks to fill the GPU) each block
// covers one slice of the keys and writes a partial (max, sum, acc) that
// attention_decode_combine merges (flash-decoding). The new token's own K/V
// are read from qkv, not the cache, so no split waits for the append.
#define DECODE_THREADS 256
template <int HD>
__device__ __forceinline__ void attention_decode_impl(
    half_t* out, const half_t* qkv, half_t* kc, half_t* vc, const int* block_tables, int max_blocks,
    const int* q_start, const int* ctx_len, const int* new_from, const int* dec_seqs, int NH, int B, float scale,
    int nsplit, float* part) {
    grid_dep_launch();
    grid_dep_wait();
    constexpr int G = HD / 8;
    constexpr int KPW = 32 / G;
    constexpr int NG = (DECODE_THREADS / 32) * KPW;
    __shared__ float sm_acc[NG][HD];
    __shared__ float sm_m[NG], sm_l[NG];

    const int s = dec_seqs[blockIdx.x], h = blockIdx.y, split = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int grp = lane / G, sub = lane % G;
    const int C = NH * HD;
    const int t = q_start[s], p = ctx_len[s], p0 = new_from[s];
    const int* bt = block_tables + (size_t)s * max_blocks;
    const half_t* qrow = qkv + (size_t)t * 3 * C + h * HD;
    const int nkeys = p + 1;
    const int chunk = (nkeys + nsplit - 1) / nsplit;
    const int kbeg = split * chunk, kend = min(nkeys, kbeg + chunk);

    if (kbeg <= p && p < kend && threadIdx.x < G) {  // fused KV append of the new token
        size_t o = kv_offset(bt[p / B], h, p % B, NH, B, HD) + threadIdx.x * 8;
        *(uint4*)(kc + o) = *(const uint4*)(qrow + C + threadIdx.x * 8);
        *(uint4*)(vc + o) = *(const uint4*)(qrow + 2 * C + threadIdx.x * 8);
    }
    float q[8];
    unpack8(*(const uint4*)(qrow + sub * 8), q);
#pragma unroll
    for (int i = 0; i < 8; i++) q[i] *= scale;

    float m = NEG_INF, l = 0.f, acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.f;
    const int stride = (DECODE_THREADS / 32) * KPW;
    // Two keys per group per iteration, both loads issued before either is
    // used, to keep memory requests in flight.
    for (int j0 = kbeg + warp * KPW; j0 < kend; j0 += 2 * stride) {
        int ja = j0 + grp, jb = j0 + stride + grp;
        bool va = ja < kend, vb = jb < kend;
        // load: key j's pieces (the new token's from qkv), zero past kend.
        auto load = [&](int j, bool valid, uint4& k, uint4& v) {
            k = v = make_uint4(0, 0, 0, 0);
            if (!valid) return;
            const half_t *kp, *vp;
            if (j >= p0) {  // this step's token (j == p: the row's own)
                const half_t* r = qrow - (size_t)(p - j) * 3 * C;
                kp = r + C + sub * 8, vp = r + 2 * C + sub * 8;
            } else {
                size_t o = kv_offset(bt[j / B], h, j % B, NH, B, HD) + sub * 8;
                kp = kc + o, vp = vc + o;
            }
            k = *(const uint4*)kp;
            v = *(const uint4*)vp;
        };
        uint4 ka, kb, xa, xb;
        load(ja, va, ka, xa);
        load(jb, vb, kb, xb);
        float fa[8], fb[8];
        unpack8(ka, fa);
        unpack8(kb, fb);
        float da = 0.f, db = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            da += q[i] * fa[i];
            db += q[i] * fb[i];
        }
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) {
            da += __shfl_xor_sync(0xffffffffu, da, o);
            db += __shfl_xor_sync(0xffffffffu, db, o);
        }
        if (!va) da = NEG_INF;
        if (!vb) db = NEG_INF;
        float mx = fmaxf(m, fmaxf(da, db));
        if (mx != NEG_INF) {
            float corr = __expf(m - mx), pa = __expf(da - mx), pb = __expf(db - mx);
            unpack8(xa, fa);
            unpack8(xb, fb);
            l = l * corr + pa + pb;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[i] = acc[i] * corr + pa * fa[i] + pb * fb[i];
            m = mx;
        }
    }
    const int gi = warp * KPW + grp;
#pragma unroll
    for (int i = 0; i < 8; i++) sm_acc[gi][sub * 8 + i] = acc[i];
    if (sub == 0) {
        sm_m[gi] = m;
        sm_l[gi] = l;
    }
    __syncthreads();
    float M = NEG_INF;
    for (int g = 0; g < NG; g++) M = fmaxf(M, sm_m[g]);
    for (int d = threadIdx.x; d < HD; d += blockDim.x) {
        float L = 0.f, o = 0.f;
        for (int g = 0; g < NG; g++) {
            if (sm_m[g] == NEG_INF) continue;
            float w = __expf(sm_m[g] - M);
            L += sm_l[g] * w;
            o += sm_acc[g][d] * w;
        }
        if (nsplit == 1) {
            out[(size_t)t * C + h * HD + d] = f2h(o / L);
        } else {  // partial: [m, l, acc[HD]] per (decode seq, head, split)
            float* pp = part + (((size_t)blockIdx.x * NH + h) * nsplit + split) * (HD + 2);
            if (d == 0) pp[0] = M, pp[1] = L;
            pp[2 + d] = o;
        }
    }
}

// attention_decode_combine merges the nsplit partials of each (sequence,
// head) into the output row. One thread per output dim.
extern "C" __global__ void attention_decode_combine(half_t* out, const float* part, const int* q_start,
                                                    const int* dec_seqs, int NH, int HD, int nsplit) {
    grid_dep_launch();
    grid_dep_wait();
    const int s = dec_seqs[blockIdx.x], h = blockIdx.y, d = threadIdx.x;
    if (d >= HD) return;
    const float* pp = part + ((size_t)blockIdx.x * NH + h) * nsplit * (HD + 2);
    float M = NEG_INF;
    for (int i = 0; i < nsplit; i++) M = fmaxf(M, pp[i * (HD + 2)]);
    float L = 0.f, o = 0.f;
    for (int i = 0; i < nsplit; i++) {
        float m = pp[i * (HD + 2)];
        if (m == NEG_INF) continue;
        float w = __expf(m - M);
        L += pp[i * (HD + 2) + 1] * w;
        o += pp[i * (HD + 2) + 2 + d] * w;
    }
    out[(size_t)q_start[s] * NH * HD + h * HD + d] = f2h(o / L);
}

// Prefill: one block per (query tile of PREFILL_BR rows of one chunk, head);
// one thread per query row holding q and the output accumulator in registers.
// Key/value tiles of PREFILL_BC positions are gathered from the paged cache
// into shared memory (fp32) and read by all threads at once (broadcast).
#define PREFILL_BR 128
#define PREFILL_BC 32
template <int HD>
__device__ __forceinline__ void attention_prefill_impl(
    half_t* out, const half_t* qkv, const half_t* kc, const half_t* vc, const int* block_tables,
    int max_blocks, const int* q_start, const int* q_len, const int* ctx_len, const int* tile_seq,
    const int* tile_q0, int NH, int B, float scale) {
    grid_dep_launch();
    grid_dep_wait();
    __shared__ __align__(16) float ks[PREFILL_BC][HD];
    __shared__ __align__(16) float vs[PREFILL_BC][HD];
    const int s = tile_seq[blockIdx.x], q0 = tile_q0[blockIdx.x], h = blockIdx.y;
    const int C = NH * HD;
    const int len = q_len[s], ctx = ctx_len[s];
    const int qi = q0 + threadIdx.x;
    const bool active = qi < len;
    const int qpos = ctx + qi;
    const int* bt = block_tables + (size_t)s * max_blocks;
    const int last = ctx + min(q0 + PREFILL_BR, len) - 1;  // last key position the tile needs

    float q[HD], acc[HD];
    const half_t* qrow = qkv + (size_t)(q_start[s] + (active ? qi : 0)) * 3 * C + h * HD;
#pragma unroll
    for (int d = 0; d < HD; d += 8) {
        float f[8];
        unpack8(*(const uint4*)(qrow + d), f);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            q[d + i] = f[i] * scale;
            acc[d + i] = 0.f;
        }
    }
    float m = NEG_INF, l = 0.f;
    for (int k0 = 0; k0 <= last; k0 += PREFILL_BC) {
        __syncthreads();
        for (int c = threadIdx.x; c < PREFILL_BC * HD / 8; c += blockDim.x) {
            int key = c / (HD / 8), part = (c % (HD / 8)) * 8;
            int j = k0 + key;
            float fk[8], fv[8];
            if (j <= last) {
                size_t o = kv_offset(bt[j / B], h, j % B, NH, B, HD) + part;
                unpack8(*(const uint4*)(kc + o), fk);
                unpack8(*(const uint4*)(vc + o), fv);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) fk[i] = fv[i] = 0.f;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) {
                ks[key][part + i] = fk[i];
                vs[key][part + i] = fv[i];
            }
        }
        __syncthreads();
        if (!active) continue;
        const int kmax = min(PREFILL_BC, qpos - k0 + 1);  // causal: keys k0..qpos
        for (int kk = 0; kk < kmax; kk += 8) {
            float sc[8];
            float mx = m;
#pragma unroll
            for (int u = 0; u < 8; u++) {
                float dot = NEG_INF;
                if (kk + u < kmax) {
                    dot = 0.f;
#pragma unroll
                    for (int d = 0; d < HD; d += 4) {
                        float4 kv4 = *(const float4*)&ks[kk + u][d];
                        dot += q[d] * kv4.x + q[d + 1] * kv4.y + q[d + 2] * kv4.z + q[d + 3] * kv4.w;
                    }
                }
                sc[u] = dot;
                mx = fmaxf(mx, dot);
            }
            float corr = __expf(m - mx);
            l *= corr;
#pragma unroll
            for (int d = 0; d < HD; d++) acc[d] *= corr;
#pragma unroll
            for (int u = 0; u < 8; u++) {
                if (kk + u < kmax) {
                    float pe = __expf(sc[u] - mx);
                    l += pe;
#pragma unroll
                    for (int d = 0; d < HD; d += 4) {
                        float4 v4 = *(const float4*)&vs[kk + u][d];
                        acc[d] += pe * v4.x;
                        acc[d + 1] += pe * v4.y;
                        acc[d + 2] += pe * v4.z;
                        acc[d + 3] += pe * v4.w;
                    }
                }
            }
            m = mx;
        }
    }
    if (active) {
        half_t* o = out + (size_t)(q_start[s] + qi) * C + h * HD;
        float inv = 1.f / l;
#pragma unroll
        for (int d = 0; d < HD; d++) o[d] = f2h(acc[d] * inv);
    }
}

#define ATTENTION_KERNELS(HD)                                                                                   \
    extern "C" __global__ void __launch_bounds__(DECODE_THREADS) attention_decode_##HD(                       \
        half_t* out, const half_t* qkv, half_t* kc, half_t* vc, const int* block_tables, int max_blocks,       \
        const int* q_start, const int* ctx_len, const int* new_from, const int* dec_seqs, int NH, int B,       \
        float scale, int nsplit, float* part) {                                                                \
        attention_decode_impl<HD>(out, qkv, kc, vc, block_tables, max_blocks, q_start, ctx_len, new_from,     \
                                  dec_seqs, NH, B, scale, nsplit, part);                                       \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(PREFILL_BR) attention_prefill_##HD(                          \
        half_t* out, const half_t* qkv, const half_t* kc, const half_t* vc, const int* block_tables,           \
        int max_blocks, const int* q_start, const int* q_len, const int* ctx_len, const int* tile_seq,         \
        const int* tile_q0, int NH, int B, float scale) {                                                      \
        attention_prefill_impl<HD>(out, qkv, kc, vc, block_tables, max_blocks, q_start, q_len, ctx_len,       \
                                   tile_seq, tile_q0, NH, B, scale);                                           \
    }

ATTENTION_KERNELS(32)
ATTENTION_KERNELS(64)
ATTENTION_KERNELS(128)
