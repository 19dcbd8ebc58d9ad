// qwen3.cu: the kernels of the rotary, grouped-query, gated-MLP block
// (Qwen3's, the Llama shape with per-head q/k RMSNorm) over bf16 weights
// and activations with an fp32 residual stream. The projections are
// cuBLASLt's (bf16 in, fp32 accumulate); these kernels are what lies between
// them: the embedding, RMSNorm, the q/k norm with RoPE and the KV write, the
// attention of every row of a step over its sequence's paged cache, SwiGLU.
#include "common.cuh"

// unpack_bf8 turns a 16-byte load of 8 bf16 into floats.
__device__ __forceinline__ void unpack_bf8(uint4 u, float* f) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

// Paged KV cache, one layer: k and v each [num_blocks][NKV][B][HD] bf16
// (kv_offset in common.cuh with NKV heads).

// q3_embed: out (N, C) fp32 = wte[token(i)], token(i) = tokens[i] or, where
// src_rows[i] >= 0, the previous step's sample prev_out[src_rows[i]]
// (overlap scheduling, as encoder_forward). wte (V, C) bf16. It also fills
// the step's rotation table, which every layer's q3_qk_rope_kv reads:
// rope (N, half) float2 = (cos, sin) of pos[i] * inv_freq[j], the angle
// rounded to fp32 as transformers computes it.
extern "C" __global__ void q3_embed(float* out, float2* rope, const int* tokens, const int* prev_out,
                                    const int* src_rows, const int* pos, const float* inv_freq, const bf16_t* wte,
                                    int N, int C, int half) {
    grid_dep_launch();
    grid_dep_wait();
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < (size_t)N * half) {
        const int i = idx / half, j = idx % half;
        float s, c;
        sincosf((float)pos[i] * inv_freq[j], &s, &c);
        rope[idx] = make_float2(c, s);
    }
    if (idx >= (size_t)N * C) return;
    int i = idx / C, c = idx % C;
    const int src = src_rows[i];
    const int tok = src >= 0 ? prev_out[src] : tokens[i];
    out[idx] = bf2f(wte[(size_t)tok * C + c]);
}

// q3_rmsnorm: out (R, C) bf16 = x / sqrt(mean(x^2) + eps) * w for R rows of
// inp (N, C) fp32: the first R (rows = null) or rows[0..R). One block of
// 256 threads a row (a row of up to 1,024 channels is one 16-byte load a
// thread, held in registers between the sum and the write; wider rows
// loop); C a multiple of 4.
extern "C" __global__ void __launch_bounds__(256) q3_rmsnorm(bf16_t* out, const float* inp, const int* rows,
                                                              const float* w, int R, int C, float eps) {
    grid_dep_launch();
    __shared__ float part[8];
    const int r = blockIdx.x, tid = threadIdx.x;
    const int src = rows ? rows[r] : r;
    grid_dep_wait();
    const float4* x = reinterpret_cast<const float4*>(inp + (size_t)src * C);
    const bool one = C <= 1024;
    float4 v0 = make_float4(0.f, 0.f, 0.f, 0.f);
    float ss = 0.f;
    if (one) {
        if (tid < C / 4) v0 = x[tid];
        ss = v0.x * v0.x + v0.y * v0.y + v0.z * v0.z + v0.w * v0.w;
    } else {
        for (int j = tid; j < C / 4; j += 256) {
            float4 v = x[j];
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    }
    ss = warp_sum(ss);
    if (tid % 32 == 0) part[tid / 32] = ss;
    __syncthreads();
    ss = 0.f;
#pragma unroll
    for (int k = 0; k < 8; k++) ss += part[k];
    const float inv = rsqrtf(ss / C + eps);
    bf16_t* o = out + (size_t)r * C;
    for (int j = tid; j < C / 4; j += 256) {
        const float4 v = one ? v0 : x[j];
        const float4 g = reinterpret_cast<const float4*>(w)[j];
        uint2 packed;
        packed.x = (uint32_t)f2bf(v.x * inv * g.x) | ((uint32_t)f2bf(v.y * inv * g.y) << 16);
        packed.y = (uint32_t)f2bf(v.z * inv * g.z) | ((uint32_t)f2bf(v.w * inv * g.w) << 16);
        reinterpret_cast<uint2*>(o)[j] = packed;
    }
}

// q3_qk_rope_kv: per row of qkv (N, (NH + 2 NKV) * 128) bf16, one warp per
// head: query heads get q_norm and the rotation at pos[i] in place; key
// heads k_norm, the rotation, and go to the cache at slots[i]; value heads
// go to the cache as they are. A slot < 0 stores nothing. Head size 128:
// lane l holds elements 4l..4l+3, so the rotation's partner (j + 64) is in
// lane l ^ 16. rope (N, 64) holds each row's (cos, sin) (q3_embed).
extern "C" __global__ void q3_qk_rope_kv(bf16_t* qkv, bf16_t* kc, bf16_t* vc, const float* qn, const float* kn,
                                         const float2* rope, const int* slots, int N, int NH, int NKV, int B,
                                         float eps) {
    grid_dep_launch();
    const int HD = 128;
    const int heads = NH + 2 * NKV;
    const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp >= N * heads) return;
    const int i = warp / heads, h = warp % heads;
    const int slot = slots[i];
    grid_dep_wait();
    bf16_t* x = qkv + (size_t)i * heads * HD + (size_t)h * HD + 4 * lane;
    const uint2 raw = *reinterpret_cast<const uint2*>(x);
    float v[4] = {bf2f((bf16_t)(raw.x & 0xffff)), bf2f((bf16_t)(raw.x >> 16)), bf2f((bf16_t)(raw.y & 0xffff)),
                  bf2f((bf16_t)(raw.y >> 16))};
    const bool isV = h >= NH + NKV;
    if (!isV) {
        const float* nw = h < NH ? qn : kn;
        float ss = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
        ss = warp_sum(ss);
        const float inv = rsqrtf(ss / HD + eps);
#pragma unroll
        for (int c = 0; c < 4; c++) v[c] = v[c] * inv * nw[4 * lane + c];
        float o[4];
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const float partner = __shfl_xor_sync(0xffffffffu, v[c], 16);
            const float2 cs = rope[(size_t)i * 64 + (4 * lane + c) % 64];
            o[c] = lane < 16 ? v[c] * cs.x - partner * cs.y : v[c] * cs.x + partner * cs.y;
        }
#pragma unroll
        for (int c = 0; c < 4; c++) v[c] = o[c];
    }
    uint2 packed;
    packed.x = (uint32_t)f2bf(v[0]) | ((uint32_t)f2bf(v[1]) << 16);
    packed.y = (uint32_t)f2bf(v[2]) | ((uint32_t)f2bf(v[3]) << 16);
    if (h < NH) {
        *reinterpret_cast<uint2*>(x) = packed;
        return;
    }
    if (slot < 0) return;
    const int kvh = isV ? h - NH - NKV : h - NH;
    bf16_t* dst = (isV ? vc : kc) + kv_offset(kv_block(slot, B), kvh, kv_slot(slot, B), NKV, B, HD) + 4 * lane;
    *reinterpret_cast<uint2*>(dst) = packed;
}

// q3_swiglu: out (N, I) bf16 = SiLU(gate) * up, each row of gu (N, 2I)
// holding the pairs (gate j, up j) at columns 2j, 2j + 1 (the gate|up
// weights are stored interleaved for q3_gemv.cu's SwiGLU epilogue). A
// thread writes two outputs; I a multiple of 2.
extern "C" __global__ void q3_swiglu(bf16_t* out, const bf16_t* gu, int N, int I) {
    grid_dep_launch();
    grid_dep_wait();
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // a pair of outputs
    const int half = I / 2;
    if (idx >= (size_t)N * half) return;
    const int i = idx / half, c = 2 * (idx % half);
    const uint2 p = *reinterpret_cast<const uint2*>(gu + (size_t)i * 2 * I + 2 * c);  // gate c, up c, gate c+1, up c+1
    float r[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const uint32_t w = k == 0 ? p.x : p.y;
        const float gv = __uint_as_float(w << 16), uv = __uint_as_float(w & 0xffff0000u);
        r[k] = gv / (1.f + __expf(-gv)) * uv;
    }
    *reinterpret_cast<uint32_t*>(out + (size_t)i * I + c) = (uint32_t)f2bf(r[0]) | ((uint32_t)f2bf(r[1]) << 16);
}

// Decode-row attention: each one-token row of a step (a decode token, or
// one token of a short chunk laid out as rows) attends over keys 0..pos of
// its sequence, all of them in the paged cache (q3_qk_rope_kv wrote this
// step's rows first). Row j of the launch is sequence entry dec_seqs[j],
// whose row is q_start[entry]. Grid (rows, NKV, nsplit), 128 threads: a
// block takes one row, one KV head and its G query heads, and one of
// nsplit slices of the keys, in tiles of 64 keys:
//   - scores: a group of 8 lanes reads one key (16 elements a lane, two
//     16-byte loads, each the group's contiguous half of the key: a
//     lane's two 16-byte neighbours read by one load wasted a third of the
//     sectors), four groups a warp, 16 keys per pass, four passes;
//     the tile's values are requested before the scores are summed;
//   - softmax: warp g keeps head g's running maximum and sum (base-2
//     exponentials of scores prescaled by log2(e)/sqrt(HD));
//   - values: warp w sums keys w, w+4, ... of the tile, lane l elements
//     4l..4l+3, so a warp reads one 256-byte value row per key.
// The warps' partial outputs are summed in shared memory at the end. With
// nsplit = 1 the row's output is written (att (rows, NH * 128) bf16); else
// the unnormalised sums, maximum and sum go to part (j, NH, nsplit, 130)
// for q3_attn_combine. (A warp per (row, KV head, slice) without block
// synchronisation, attention_warp.cu's shape, took 2.99 ms a step against
// this kernel's 2.47 at batch 128, context 300 on the H100.)
#ifndef Q3_TILE
#define Q3_TILE 64  // keys a tile: 16 a pass
#endif
#define Q3_PASSES (Q3_TILE / 16)
#ifndef Q3_ROWS_BLOCKS
#define Q3_ROWS_BLOCKS 4  // blocks an SM the register budget allows (G <= 2)
#endif
#define Q3_HD 128

template <int G>
__device__ __forceinline__ void q3_attn_rows(bf16_t* att, float* part, const bf16_t* qkv, const bf16_t* kc,
                                             const bf16_t* vc, const int* pos, const int* dec_seqs,
                                             const int* q_start, const int* block_tables, const int* bt_stride,
                                             int NH, int NKV, int B, float scale_log2, int nsplit) {
    grid_dep_launch();
    constexpr bool PREFETCH = G <= 4;  // the value registers fit beside the scores' (G = 8 would spill)
    __shared__ float s[G][Q3_TILE];
    __shared__ float corr_s[G];
    __shared__ float red[4][G][Q3_HD];
    const int j = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int entry = dec_seqs[j];
    const int row = q_start[entry];
    const int ctx = pos[row] + 1;
    const int chunk = (ctx + nsplit - 1) / nsplit;
    const int k0 = split * chunk, k1 = min(ctx, k0 + chunk);
    const int* bt = block_tables + (size_t)entry * bt_stride[0];
    const int width = (NH + 2 * NKV) * Q3_HD;
    grid_dep_wait();
    // This lane's 16 query elements of each head, prescaled: elements
    // 8 sub .. +7 and 64 + 8 sub .. +7, the ones of the keys it reads (each
    // of a key's two loads by its 8 lanes is one contiguous 128 bytes).
    const int sub = lane % 8;
    float q[G][16];
#pragma unroll
    for (int g = 0; g < G; g++) {
        const bf16_t* qp = qkv + (size_t)row * width + (size_t)(kvh * G + g) * Q3_HD + 8 * sub;
        unpack_bf8(*reinterpret_cast<const uint4*>(qp), q[g]);
        unpack_bf8(*reinterpret_cast<const uint4*>(qp + 64), q[g] + 8);
#pragma unroll
        for (int e = 0; e < 16; e++) q[g][e] *= scale_log2;
    }
    // Warp w keeps the running maximum and sum of heads w, w + 4, ...
    float m[(G + 3) / 4], l[(G + 3) / 4];
#pragma unroll
    for (int i = 0; i < (G + 3) / 4; i++) m[i] = NEG_INF, l[i] = 0.f;
    float acc[G][4];
#pragma unroll
    for (int g = 0; g < G; g++) acc[g][0] = acc[g][1] = acc[g][2] = acc[g][3] = 0.f;
    for (int t0 = k0; t0 < k1; t0 += Q3_TILE) {
        const int nk = min(Q3_TILE, k1 - t0);
        uint4 kr[Q3_PASSES][2];
#pragma unroll
        for (int pass = 0; pass < Q3_PASSES; pass++) {
            const int key = t0 + pass * 16 + warp * 4 + lane / 8;
            if (key < k1) {
                const bf16_t* kp = kc + kv_offset(bt[kv_block(key, B)], kvh, kv_slot(key, B), NKV, B, Q3_HD) + 8 * sub;
                kr[pass][0] = *reinterpret_cast<const uint4*>(kp);
                kr[pass][1] = *reinterpret_cast<const uint4*>(kp + 64);
            } else {
                kr[pass][0] = kr[pass][1] = make_uint4(0u, 0u, 0u, 0u);
            }
        }
        uint2 vr[PREFETCH ? Q3_TILE / 4 : 1];
        if (PREFETCH) {
#pragma unroll
            for (int i = 0; i < Q3_TILE / 4; i++) {
                const int kk = warp + 4 * i;
                vr[i] = kk < nk ? *reinterpret_cast<const uint2*>(vc + kv_offset(bt[kv_block(t0 + kk, B)], kvh, kv_slot(t0 + kk, B), NKV, B, Q3_HD) + 4 * lane)
                                : make_uint2(0u, 0u);
            }
        }
#pragma unroll
        for (int pass = 0; pass < Q3_PASSES; pass++) {
            const int kk = pass * 16 + warp * 4 + lane / 8;
            float kf[16];
            unpack_bf8(kr[pass][0], kf);
            unpack_bf8(kr[pass][1], kf + 8);
            float dot[G];
#pragma unroll
            for (int g = 0; g < G; g++) {
                dot[g] = 0.f;
#pragma unroll
                for (int e = 0; e < 16; e++) dot[g] += q[g][e] * kf[e];
            }
#pragma unroll
            for (int g = 0; g < G; g++) {
                float d = dot[g];
                d += __shfl_xor_sync(0xffffffffu, d, 4);
                d += __shfl_xor_sync(0xffffffffu, d, 2);
                d += __shfl_xor_sync(0xffffffffu, d, 1);
                if (sub == 0) s[g][kk] = t0 + kk < k1 ? d : NEG_INF;
            }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < (G + 3) / 4; i++) {
            const int g = warp + 4 * i;
            if (g >= G) break;
            float x[Q3_TILE / 32], mt = NEG_INF;
#pragma unroll
            for (int u = 0; u < Q3_TILE / 32; u++) x[u] = s[g][lane + 32 * u], mt = fmaxf(mt, x[u]);
            const float mx = fmaxf(m[i], warp_max(mt));
            const float c = mx == NEG_INF ? 1.f : exp2f(m[i] - mx);
            float ps = 0.f;
#pragma unroll
            for (int u = 0; u < Q3_TILE / 32; u++) {
                x[u] = mx == NEG_INF ? 0.f : exp2f(x[u] - mx);
                ps += x[u];
                s[g][lane + 32 * u] = x[u];
            }
            l[i] = l[i] * c + warp_sum(ps);
            m[i] = mx;
            if (lane == 0) corr_s[g] = c;
        }
        __syncthreads();
#pragma unroll
        for (int g = 0; g < G; g++) {
            const float c = corr_s[g];
#pragma unroll
            for (int e = 0; e < 4; e++) acc[g][e] *= c;
        }
#pragma unroll
        for (int i = 0; i < Q3_TILE / 4; i++) {
            const int kk = warp + 4 * i;
            if (kk >= nk) break;
            const uint2 raw = PREFETCH ? vr[PREFETCH ? i : 0]
                                       : *reinterpret_cast<const uint2*>(vc + kv_offset(bt[kv_block(t0 + kk, B)], kvh, kv_slot(t0 + kk, B), NKV, B, Q3_HD) + 4 * lane);
            const float v0 = __uint_as_float(raw.x << 16), v1 = __uint_as_float(raw.x & 0xffff0000u);
            const float v2 = __uint_as_float(raw.y << 16), v3 = __uint_as_float(raw.y & 0xffff0000u);
#pragma unroll
            for (int g = 0; g < G; g++) {
                const float p = s[g][kk];
                acc[g][0] += p * v0, acc[g][1] += p * v1, acc[g][2] += p * v2, acc[g][3] += p * v3;
            }
        }
        __syncthreads();  // s is rewritten by the next tile
    }
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int e = 0; e < 4; e++) red[warp][g][4 * lane + e] = acc[g][e];
    __shared__ float ml[G][2];
#pragma unroll
    for (int i = 0; i < (G + 3) / 4; i++)
        if (warp + 4 * i < G && lane == 0) ml[warp + 4 * i][0] = m[i], ml[warp + 4 * i][1] = l[i];
    __syncthreads();
    const int d = threadIdx.x;  // 128 threads, one element each
#pragma unroll
    for (int g = 0; g < G; g++) {
        const float sum = red[0][g][d] + red[1][g][d] + red[2][g][d] + red[3][g][d];
        const int h = kvh * G + g;
        if (nsplit == 1) {
            const float lg = ml[g][1];
            att[(size_t)row * NH * Q3_HD + (size_t)h * Q3_HD + d] = f2bf(lg > 0.f ? sum / lg : 0.f);
        } else {
            float* pp = part + (((size_t)j * NH + h) * nsplit + split) * (Q3_HD + 2);
            pp[d] = sum;
            if (d == 0) pp[Q3_HD] = ml[g][0], pp[Q3_HD + 1] = ml[g][1];
        }
    }
}

// q3_attn_combine merges a decode row's key slices: grid (rows, NH), 128
// threads; row j is q_start[dec_seqs[j]].
extern "C" __global__ void q3_attn_combine(bf16_t* att, const float* part, const int* dec_seqs, const int* q_start,
                                           int NH, int nsplit) {
    grid_dep_launch();
    const int j = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
    const int row = q_start[dec_seqs[j]];
    grid_dep_wait();
    const float* pp = part + ((size_t)j * NH + h) * nsplit * (Q3_HD + 2);
    float M = NEG_INF;
    for (int s = 0; s < nsplit; s++) M = fmaxf(M, pp[s * (Q3_HD + 2) + Q3_HD]);
    float num = 0.f, den = 0.f;
    for (int s = 0; s < nsplit; s++) {
        const float* q = pp + s * (Q3_HD + 2);
        if (q[Q3_HD + 1] <= 0.f) continue;  // an empty slice
        const float w = exp2f(q[Q3_HD] - M);
        num += w * q[d];
        den += w * q[Q3_HD + 1];
    }
    att[(size_t)row * NH * Q3_HD + (size_t)h * Q3_HD + d] = f2bf(den > 0.f ? num / den : 0.f);
}

// Prefill attention on the tensor cores, FlashAttention-2 style (the
// contract and structure of attention_mma.cu, for bf16 and head size 128
// with grouped-query heads): a block takes 64 query rows of one prompt
// chunk (tile t: rows q0 = tile_q0[t] .. of entry e = tile_seq[t], rows
// q_start[e] + q0 + i at positions ctx[e] + q0 + i) and one query head,
// whose KV head is h / (NH / NKV); 4 warps of 16 rows. For each tile of 64
// keys from the paged cache, S = Q K^T and O += P V run as mma.sync
// m16n8k16 (bf16 in, fp32 accumulate) with the online softmax in
// registers; P never leaves them. Q passes through the key buffer on its
// way to the registers, and V is stored transposed so both B operands are
// 32-bit loads.
#define PF_BR 64
#define PF_BC 64
#define PF_KPAD 136  // key row stride in bf16 (272 B): fragment loads avoid bank conflicts
#define PF_VPAD 72   // transposed value row stride (144 B)

__device__ __forceinline__ void mma16816_bf16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi) {
    return (uint32_t)f2bf(lo) | ((uint32_t)f2bf(hi) << 16);
}

extern "C" __global__ void __launch_bounds__(128) q3_attn_prefill(
    bf16_t* out, const bf16_t* qkv, const bf16_t* kc, const bf16_t* vc, const int* q_start, const int* q_len,
    const int* ctx_len, const int* tile_seq, const int* tile_q0, const int* block_tables, const int* bt_stride, int NH,
    int NKV, int B, float scale) {
    grid_dep_launch();
    __shared__ __align__(16) bf16_t Ks[PF_BC][PF_KPAD];
    __shared__ __align__(16) bf16_t Vt[Q3_HD][PF_VPAD];  // [hd][key]
    const int s = tile_seq[blockIdx.x], q0 = tile_q0[blockIdx.x], h = blockIdx.y;
    const int kvh = h / (NH / NKV);
    const int width = (NH + 2 * NKV) * Q3_HD, C = NH * Q3_HD;
    const int len = q_len[s], ctx = ctx_len[s], qs = q_start[s];
    const int* bt = block_tables + (size_t)s * bt_stride[0];
    const int last = ctx + min(q0 + PF_BR, len) - 1;  // last key position the tile needs
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t4 = lane & 3;
    grid_dep_wait();

    for (int c = tid; c < PF_BR * Q3_HD / 8; c += blockDim.x) {
        int r = c / (Q3_HD / 8), part = (c % (Q3_HD / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (q0 + r < len) v = *(const uint4*)(qkv + (size_t)(qs + q0 + r) * width + h * Q3_HD + part);
        *(uint4*)&Ks[r][part] = v;
    }
    __syncthreads();
    const int r0 = warp * 16 + g;  // this thread's rows in the tile: r0 and r0 + 8
    uint32_t qa[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
        qa[kk][0] = *(const uint32_t*)&Ks[r0][kk * 16 + t4 * 2];
        qa[kk][1] = *(const uint32_t*)&Ks[r0 + 8][kk * 16 + t4 * 2];
        qa[kk][2] = *(const uint32_t*)&Ks[r0][kk * 16 + t4 * 2 + 8];
        qa[kk][3] = *(const uint32_t*)&Ks[r0 + 8][kk * 16 + t4 * 2 + 8];
    }
    const int qp0 = ctx + q0 + r0, qp1 = qp0 + 8;  // absolute positions of the two rows
    const int warp_last = min(ctx + q0 + warp * 16 + 15, last);
    float o[16][4];
#pragma unroll
    for (int nt = 0; nt < 16; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
    float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;

    for (int k0 = 0; k0 <= last; k0 += PF_BC) {
        __syncthreads();  // Q's fragments (first tile) or the last tile's keys are read
        for (int c = tid; c < PF_BC * Q3_HD / 8; c += blockDim.x) {
            int key = c / (Q3_HD / 8), part = (c % (Q3_HD / 8)) * 8;
            int j = k0 + key;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;  // zeros past the last key: P = 0 must not meet NaN
            if (j <= last) {
                size_t off = kv_offset(bt[kv_block(j, B)], kvh, kv_slot(j, B), NKV, B, Q3_HD) + part;
                kv = *(const uint4*)(kc + off);
                vv = *(const uint4*)(vc + off);
            }
            *(uint4*)&Ks[key][part] = kv;
            const bf16_t* vh = reinterpret_cast<const bf16_t*>(&vv);
#pragma unroll
            for (int i = 0; i < 8; i++) Vt[part + i][key] = vh[i];
        }
        __syncthreads();
        if (k0 > warp_last) continue;  // every key of this tile is in this warp's future

        float sc[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < 8; kk++) {
                uint32_t b0 = *(const uint32_t*)&Ks[nt * 8 + g][kk * 16 + t4 * 2];
                uint32_t b1 = *(const uint32_t*)&Ks[nt * 8 + g][kk * 16 + t4 * 2 + 8];
                mma16816_bf16(sc[nt], qa[kk], b0, b1);
            }
        }
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int j = k0 + nt * 8 + t4 * 2 + e;
                float v0 = sc[nt][e] * scale, v1 = sc[nt][2 + e] * scale;
                if (j > qp0 || j > last) v0 = NEG_INF;
                if (j > qp1 || j > last) v1 = NEG_INF;
                sc[nt][e] = v0;
                sc[nt][2 + e] = v1;
                mx0 = fmaxf(mx0, v0);
                mx1 = fmaxf(mx1, v1);
            }
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        // Key 0 is in the first tile and precedes every row, so the maxima are
        // finite from the first tile on and m - mx is never -inf - -inf.
        const float c0 = exp2f(m0 - mx0), c1 = exp2f(m1 - mx1);
        m0 = mx0;
        m1 = mx1;
        l0 *= c0;
        l1 *= c1;
#pragma unroll
        for (int nt = 0; nt < 16; nt++) {
            o[nt][0] *= c0;
            o[nt][1] *= c0;
            o[nt][2] *= c1;
            o[nt][3] *= c1;
        }
        uint32_t pa[4][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            float p00 = exp2f(sc[nt][0] - m0), p01 = exp2f(sc[nt][1] - m0);
            float p10 = exp2f(sc[nt][2] - m1), p11 = exp2f(sc[nt][3] - m1);
            l0 += p00 + p01;
            l1 += p10 + p11;
            const int kk = nt / 2, hi = (nt % 2) * 2;
            pa[kk][hi] = pack_bf2(p00, p01);
            pa[kk][hi + 1] = pack_bf2(p10, p11);
        }
#pragma unroll
        for (int nt = 0; nt < 16; nt++) {
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                uint32_t b0 = *(const uint32_t*)&Vt[nt * 8 + g][kk * 16 + t4 * 2];
                uint32_t b1 = *(const uint32_t*)&Vt[nt * 8 + g][kk * 16 + t4 * 2 + 8];
                mma16816_bf16(o[nt], pa[kk], b0, b1);
            }
        }
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const int qi0 = q0 + r0, qi1 = qi0 + 8;
    const float inv0 = 1.f / l0, inv1 = 1.f / l1;
#pragma unroll
    for (int nt = 0; nt < 16; nt++) {
        int col = h * Q3_HD + nt * 8 + t4 * 2;
        if (qi0 < len) *(uint32_t*)(out + (size_t)(qs + qi0) * C + col) = pack_bf2(o[nt][0] * inv0, o[nt][1] * inv0);
        if (qi1 < len) *(uint32_t*)(out + (size_t)(qs + qi1) * C + col) = pack_bf2(o[nt][2] * inv1, o[nt][3] * inv1);
    }
}

#define Q3_ATTN_KERNELS(G)                                                                                            \
    extern "C" __global__ void __launch_bounds__(128, G <= 2 ? Q3_ROWS_BLOCKS : 1) q3_attn_rows_##G(                  \
        bf16_t* att, float* part, const bf16_t* qkv, const bf16_t* kc, const bf16_t* vc, const int* pos,             \
        const int* dec_seqs, const int* q_start, const int* block_tables, const int* bt_stride, int NH, int NKV,     \
        int B, float scale_log2, int nsplit) {                                                                        \
        q3_attn_rows<G>(att, part, qkv, kc, vc, pos, dec_seqs, q_start, block_tables, bt_stride, NH, NKV, B,          \
                        scale_log2, nsplit);                                                                          \
    }
Q3_ATTN_KERNELS(1)
Q3_ATTN_KERNELS(2)
Q3_ATTN_KERNELS(4)
Q3_ATTN_KERNELS(8)
