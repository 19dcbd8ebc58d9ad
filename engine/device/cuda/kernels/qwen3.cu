// qwen3.cu: the kernels of the rotary, grouped-query, gated-MLP block
// (Qwen3's, the Llama shape with per-head q/k RMSNorm) over bf16 weights
// and activations with an fp32 residual stream. The projections are
// cuBLASLt's (bf16 in, fp32 accumulate); these kernels are what lies between
// them: the embedding, RMSNorm, the q/k norm with RoPE and the KV write, the
// attention of every row of a step over its sequence's paged cache, SwiGLU.
#include "common.cuh"
#include "mma.cuh"  // mma16816_bf, cp16, ldsm4, smem_u32
#include "fa_tile.cuh"

// Paged KV cache, one layer: k and v each [num_blocks][NKV][B][HD] bf16
// (kv_offset in common.cuh with NKV heads).

// q3_embed: out (N, C) fp32 = wte[token(i)], token(i) = tokens[i] or, where
// src_rows[i] >= 0, the previous step's sample prev_out[src_rows[i]]
// (overlap scheduling, as encoder_forward). wte (V, C) bf16. It also fills
// the step's rotation table, which every layer's q3_qk_rope_kv reads:
// rope (N, half) float2 = (cos, sin) of pos[i] * inv_freq[j], the angle
// rounded to fp32 as transformers computes it.
__device__ __forceinline__ float wte_float(bf16_t v) { return bf2f(v); }
__device__ __forceinline__ float wte_float(float v) { return v; }

template <typename W>
__device__ __forceinline__ void q3_embed_impl(float* out, float2* rope, const int* tokens, const int* prev_out,
                                              const int* src_rows, const int* pos, const float* inv_freq, const W* wte,
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
    out[idx] = wte_float(wte[(size_t)tok * C + c]);
}

extern "C" __global__ void q3_embed(float* out, float2* rope, const int* tokens, const int* prev_out,
                                    const int* src_rows, const int* pos, const float* inv_freq, const bf16_t* wte,
                                    int N, int C, int half) {
    q3_embed_impl(out, rope, tokens, prev_out, src_rows, pos, inv_freq, wte, N, C, half);
}

// q3f_embed: q3_embed with an fp32 wte, for the fp32 mode (q3_f32.cu).
extern "C" __global__ void q3f_embed(float* out, float2* rope, const int* tokens, const int* prev_out,
                                     const int* src_rows, const int* pos, const float* inv_freq, const float* wte,
                                     int N, int C, int half) {
    q3_embed_impl(out, rope, tokens, prev_out, src_rows, pos, inv_freq, wte, N, C, half);
}

// q3_norm4 is four channels of a normalised row in bf16: v * inv * w.
__device__ __forceinline__ uint2 q3_norm4(float4 v, float inv, float4 w) {
    return make_uint2(pack_bf2(v.x * inv * w.x, v.y * inv * w.y), pack_bf2(v.z * inv * w.z, v.w * inv * w.w));
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
    const bool one = C <= 1024;
    // The weights (no kernel writes them) are asked for before the wait, so
    // their round trip is not on the row's chain after the sum.
    float4 g0 = make_float4(0.f, 0.f, 0.f, 0.f);
    if (one && tid < C / 4) g0 = reinterpret_cast<const float4*>(w)[tid];
    grid_dep_wait();
    const float4* x = reinterpret_cast<const float4*>(inp + (size_t)src * C);
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
    ss = block_sum_256(ss, part);
    const float inv = rsqrtf(ss / C + eps);
    uint2* o = reinterpret_cast<uint2*>(out + (size_t)r * C);
    for (int j = tid; j < C / 4; j += 256) {
        o[j] = q3_norm4(one ? v0 : x[j], inv, one ? g0 : reinterpret_cast<const float4*>(w)[j]);
    }
}

// q3_rmsnorm_rows: q3_rmsnorm for steps of many rows (prompt chunks): one
// warp a row, Q3_NORM_ROWS rows a block of 256 threads (grid ceil(R / 8)):
// lane l holds float4s l, l + 32, ... of a row of up to 1,024 channels,
// eight loads in flight, and the sum is a warp shuffle with no block
// barrier (wider rows loop, reading again). The norms of a 16,384-row step
// (two a layer) took 2.08 ms against q3_rmsnorm's 2.44; decode steps of
// 32-128 rows, where its R / 8 blocks leave most SMs idle, took 3-4% longer
// with it (docs/cuda.md).
#define Q3_NORM_ROWS 8  // rotaryNormRows
extern "C" __global__ void __launch_bounds__(256) q3_rmsnorm_rows(bf16_t* out, const float* inp, const int* rows,
                                                                   const float* w, int R, int C, float eps) {
    grid_dep_launch();
    const int r = blockIdx.x * Q3_NORM_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= R) return;
    const int src = rows ? rows[r] : r, C4 = C / 4;
    const bool one = C4 <= 8 * 32;
    const float4* w4 = reinterpret_cast<const float4*>(w);
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 g[8];
    if (one) {
#pragma unroll
        for (int k = 0; k < 8; k++) g[k] = lane + 32 * k < C4 ? w4[lane + 32 * k] : zero;
    }
    grid_dep_wait();
    const float4* x = reinterpret_cast<const float4*>(inp + (size_t)src * C);
    float4 v[8];
    float ss = 0.f;
    if (one) {
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = lane + 32 * k < C4 ? x[lane + 32 * k] : zero;
#pragma unroll
        for (int k = 0; k < 8; k++) ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    } else {
        for (int j = lane; j < C4; j += 32) {
            const float4 u = x[j];
            ss += u.x * u.x + u.y * u.y + u.z * u.z + u.w * u.w;
        }
    }
    const float inv = rsqrtf(warp_sum(ss) / C + eps);
    uint2* o = reinterpret_cast<uint2*>(out + (size_t)r * C);
    if (one) {
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (lane + 32 * k < C4) o[lane + 32 * k] = q3_norm4(v[k], inv, g[k]);
    } else {
        for (int j = lane; j < C4; j += 32) o[j] = q3_norm4(x[j], inv, w4[j]);
    }
}

// q3_qk_rope_kv: per row of qkv (N, (NH + 2 NKV) * 128) bf16, one warp per
// Q3_ROPE_HEADS heads of a row: query heads get q_norm and the rotation at
// pos[i] in place; key heads k_norm, the rotation, and go to the cache at
// slots[i]; value heads go to the cache as they are. A slot < 0 stores
// nothing. Head size 128: lane l holds elements 4l..4l+3, so the rotation's
// partner (j + 64) is in lane l ^ 16. rope (N, 64) holds each row's
// (cos, sin) (q3_embed). A warp's heads are loaded before any is worked on,
// so that a warp has more than one 256-byte load in flight.
// q3_norm_rope: a warp's q or k head, lane l holding elements 4l..4l+3
// (raw, bf16), through RMSNorm with the weights nw (the lane's four) and the
// rotation by cs (the lane's (cos, sin)), packed back into bf16.
__device__ __forceinline__ uint2 q3_norm_rope(uint2 raw, const float (&nw)[4], const float2 (&cs)[4], float eps) {
    const int lane = threadIdx.x % 32;
    float v[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.y << 16),
                  __uint_as_float(raw.y & 0xffff0000u)};
    const float ss = warp_sum(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]);
    const float inv = rsqrtf(ss / 128 + eps);
#pragma unroll
    for (int c = 0; c < 4; c++) v[c] = v[c] * inv * nw[c];
    float o[4];
#pragma unroll
    for (int c = 0; c < 4; c++) {
        const float partner = __shfl_xor_sync(0xffffffffu, v[c], 16);
        o[c] = lane < 16 ? v[c] * cs[c].x - partner * cs[c].y : v[c] * cs[c].x + partner * cs[c].y;
    }
    uint2 packed;
    packed.x = pack_bf2(o[0], o[1]);
    packed.y = pack_bf2(o[2], o[3]);
    return packed;
}

#define Q3_ROPE_HEADS 4  // rotaryRopeHeads
extern "C" __global__ void q3_qk_rope_kv(bf16_t* qkv, bf16_t* kc, bf16_t* vc, const float* qn, const float* kn,
                                         const float2* rope, const int* slots, int N, int NH, int NKV, int B,
                                         float eps) {
    grid_dep_launch();
    const int HD = 128;
    const int heads = NH + 2 * NKV, groups = (heads + Q3_ROPE_HEADS - 1) / Q3_ROPE_HEADS;
    const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp >= N * groups) return;
    const int i = warp / groups, h0 = (warp % groups) * Q3_ROPE_HEADS;
    const int slot = slots[i];
    float qw[4], kw[4];  // weights: no kernel writes them
#pragma unroll
    for (int c = 0; c < 4; c++) qw[c] = qn[4 * lane + c], kw[c] = kn[4 * lane + c];
    grid_dep_wait();  // the rotation table is this step's (q3_embed)
    bf16_t* row = qkv + (size_t)i * heads * HD + 4 * lane;
    uint2 raw[Q3_ROPE_HEADS];
#pragma unroll
    for (int u = 0; u < Q3_ROPE_HEADS; u++)
        raw[u] = h0 + u < heads ? *reinterpret_cast<const uint2*>(row + (size_t)(h0 + u) * HD) : make_uint2(0u, 0u);
    float2 cs[4];
#pragma unroll
    for (int c = 0; c < 4; c++) cs[c] = rope[(size_t)i * 64 + (4 * lane + c) % 64];
#pragma unroll
    for (int u = 0; u < Q3_ROPE_HEADS; u++) {
        const int h = h0 + u;
        if (h >= heads) break;
        const bool isV = h >= NH + NKV;
        const uint2 packed = isV ? raw[u] : q3_norm_rope(raw[u], h < NH ? qw : kw, cs, eps);
        if (h < NH) {
            *reinterpret_cast<uint2*>(row + (size_t)h * HD) = packed;
        } else if (slot >= 0) {
            const int kvh = isV ? h - NH - NKV : h - NH;
            bf16_t* dst = (isV ? vc : kc) + kv_offset(kv_block(slot, B), kvh, kv_slot(slot, B), NKV, B, HD) + 4 * lane;
            *reinterpret_cast<uint2*>(dst) = packed;
        }
    }
}

// q3_swiglu: out (N, I) bf16 = SiLU(gate) * up, each row of gu (N, 2I)
// holding the pairs (gate j, up j) at columns 2j, 2j + 1 (the gate|up
// weights are stored interleaved for q3_gemv.cu's SwiGLU epilogue). A
// thread writes four outputs of a row from one 16-byte load (two where I is
// not a multiple of 4; I is even); the grid is (ceil(I / (4 or 2) / 256),
// rows), its y striding over rows past gridDim.y (q3SwiGLUGrid).
__device__ __forceinline__ uint32_t q3_swiglu2(uint32_t p0, uint32_t p1) {
    float r[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const uint32_t w = k == 0 ? p0 : p1;
        const float gv = __uint_as_float(w << 16), uv = __uint_as_float(w & 0xffff0000u);
        r[k] = gv / (1.f + __expf(-gv)) * uv;
    }
    return pack_bf2(r[0], r[1]);
}

extern "C" __global__ void q3_swiglu(bf16_t* out, const bf16_t* gu, int N, int I) {
    grid_dep_launch();
    grid_dep_wait();
    int c, per;
    if (!swiglu_cols(I, c, per)) return;
    for (int i = blockIdx.y; i < N; i += gridDim.y) {
        const bf16_t* src = gu + (size_t)i * 2 * I + 2 * c;  // gate c, up c, gate c+1, up c+1, ...
        bf16_t* dst = out + (size_t)i * I + c;
        if (per == 4) {
            const uint4 p = *reinterpret_cast<const uint4*>(src);
            *reinterpret_cast<uint2*>(dst) = make_uint2(q3_swiglu2(p.x, p.y), q3_swiglu2(p.z, p.w));
        } else {
            const uint2 p = *reinterpret_cast<const uint2*>(src);
            *reinterpret_cast<uint32_t*>(dst) = q3_swiglu2(p.x, p.y);
        }
    }
}

// mma_bf: mma16816_bf with the A fragment as an array.
__device__ __forceinline__ void mma_bf(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    mma16816_bf(c, a[0], a[1], a[2], a[3], b0, b1);
}

// word w of a 16-byte load (w a compile-time constant once unrolled).
__device__ __forceinline__ uint32_t u4_word(uint4 u, int w) { return w == 0 ? u.x : w == 1 ? u.y : w == 2 ? u.z : u.w; }

// Decode-row attention on the tensor cores: each one-token row of a step (a
// decode token, or one token of a short chunk laid out as rows) attends over
// keys 0..pos of its sequence, all of them in the paged cache
// (q3_qk_rope_kv wrote this step's rows first). Row j of the launch is
// sequence entry dec_seqs[j], whose row is q_start[entry]. Grid (rows, NKV,
// nsplit), 128 threads: a block takes one row and one KV head (which ones:
// dec_row_head, longest contexts first) and its G <= 8 query heads, and one
// of nsplit slices of the keys; warp w takes the
// slice's 16-key steps w, w + 4, ..., each with its own online softmax, and
// the warps merge in shared memory at the end. A step is three rounds of
// m16n8k16 MMAs (bf16 in, fp32 accumulate), without shared memory:
//   - S = Q K^T: the G query heads are rows 0..G-1 of the 16-row operand
//     (the rest zero), the step's keys two 8-column tiles. Lane (g, t)
//     reads 16-byte pieces 4i + t (i = 0..3) of head g's query and of keys g
//     and 8 + g, and uses each as the fragments of two k-steps: the dot
//     product does not care in which order the dims are summed, only that
//     query and key agree (gemv.cuh's trick).
//   - softmax: lane (g, t) holds head g's scores of keys 2t, 2t + 1, 8 + 2t,
//     9 + 2t, which is where P^T's B fragment wants them: P never moves.
//     Base-2 exponentials of scores scaled by log2(e)/sqrt(HD).
//   - O^T += V^T P^T: V^T is the 16-row operand, 16 dims an MMA, the
//     step's keys its k. Lane (g, t) reads pieces g and 8 + g of its four
//     keys 2t, 2t + 1, 8 + 2t, 9 + 2t and pairs the keys' elements with a
//     byte permute. P goes in as bf16 hi and lo halves (two MMAs): the
//     tensor cores are idle here, and P keeps about 16 bits.
// Keys past a slice's last read the last key instead (a valid address and a
// finite value, masked to P = 0), so the loads need no predicate. With
// nsplit = 1 the row's output is written (att (rows, NH * 128) bf16); else
// the unnormalised sums, maximum and sum go to part (j, NH, nsplit, 130) for
// q3_attn_combine.
//
// On the H100 at batch 128, context 300 (ncu, one layer): 8.9M instructions
// and 66.9 us at 2.37 TB/s (77% of ceiling.cu's read rate), against 24.8M
// and 71.2 us for the CUDA-core kernel it replaced (four warps over 64-key
// tiles, scores and softmax through shared memory). Two steps a load round
// (194 registers, two blocks an SM), the L2::256B hint,
// splitting batch 128 in two, and each warp's steps through a cp.async ring
// in shared memory (2-4 stages) were each slower or no faster
// (docs/cuda.md).
#define Q3_HD 128
#define Q3_WARPS 4
#define Q3_ROWS_BLOCKS 3  // blocks an SM (158 registers); rotaryRowsBlocks

// ld_kv loads 16 bytes of the cache, which no kernel writes while this one
// runs. volatile keeps a step's 16 loads ahead of its MMAs (also volatile),
// all in flight together, as mma.cuh's ld_stream: without it the compiler
// sinks loads next to their use.
__device__ __forceinline__ uint4 ld_kv(const bf16_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// q3_attn_step folds one 16-key step (keys kb ..) into a warp's running
// maximum m, sum l and O^T (see q3_attn_rows), from its loaded keys kr and
// values vr; keys at or past k1 are masked.
__device__ __forceinline__ void q3_attn_step(float (&o)[8][4], float& m, float& l, const uint32_t (&qa)[16],
                                             const uint4 (&kr)[2][4], const uint4 (&vr)[4][2], int kb, int k1, int G,
                                             float scale_log2) {
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    float sc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < 8; ks++) {
            const uint32_t a[4] = {qa[2 * ks], 0u, qa[2 * ks + 1], 0u};
            mma_bf(sc[nt], a, u4_word(kr[nt][ks / 2], 2 * (ks % 2)), u4_word(kr[nt][ks / 2], 2 * (ks % 2) + 1));
        }
    }
    float s[4] = {sc[0][0], sc[0][1], sc[1][0], sc[1][1]};  // keys 2t, 2t + 1, 8 + 2t, 9 + 2t
    float mx = m;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        s[e] = kb + 2 * t + (e & 1) + 8 * (e >> 1) < k1 ? s[e] * scale_log2 : NEG_INF;
        mx = fmaxf(mx, s[e]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // A warp's first step has a valid key, so mx is finite and m - mx is
    // never -inf - -inf; a step wholly past k1 keeps m (corr 1, p 0).
    const float corr = exp2f(m - mx);
    m = mx;
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; e++) p[e] = exp2f(s[e] - mx);
    l = l * corr + (p[0] + p[1]) + (p[2] + p[3]);
    const bool head = g < G;
    const uint32_t ph0 = head ? pack_bf2(p[0], p[1]) : 0u, ph1 = head ? pack_bf2(p[2], p[3]) : 0u;
    const uint32_t pl0 = head ? pack_bf2(p[0] - __uint_as_float(ph0 << 16), p[1] - __uint_as_float(ph0 & 0xffff0000u)) : 0u;
    const uint32_t pl1 = head ? pack_bf2(p[2] - __uint_as_float(ph1 << 16), p[3] - __uint_as_float(ph1 & 0xffff0000u)) : 0u;
    // O^T's columns are heads 2t and 2t + 1, whose corrections lanes 8t and
    // 8t + 4 computed.
    const float ca = __shfl_sync(0xffffffffu, corr, 8 * t), cb = __shfl_sync(0xffffffffu, corr, 8 * t + 4);
#pragma unroll
    for (int c = 0; c < 2; c++) {
#pragma unroll
        for (int w = 0; w < 4; w++) {
            float* acc = o[4 * c + w];
            acc[0] *= ca, acc[1] *= cb, acc[2] *= ca, acc[3] *= cb;
            const uint32_t x0 = u4_word(vr[0][c], w), x1 = u4_word(vr[1][c], w);
            const uint32_t x2 = u4_word(vr[2][c], w), x3 = u4_word(vr[3][c], w);
            // Rows g and g + 8 of tile 4c + w are dims 64c + 8g + 2w and + 1:
            // the low and high halves of the keys' words.
            const uint32_t a[4] = {__byte_perm(x0, x1, 0x5410), __byte_perm(x0, x1, 0x7632), __byte_perm(x2, x3, 0x5410),
                                   __byte_perm(x2, x3, 0x7632)};
            mma_bf(acc, a, ph0, ph1);
            mma_bf(acc, a, pl0, pl1);
        }
    }
}

// q3_attn_merge sums the four warps' partial outputs of a block (o, m, l:
// q3_attn_step's) through shared memory o_s (4, 8, 128) and ml_s (4, 8, 2)
// floats, and writes the row's output for its G heads (nsplit = 1) or the
// slice's unnormalised sums, maximum and sum for q3_attn_combine.
__device__ __forceinline__ void q3_attn_merge(float* o_s, float* ml_s, const float (&o)[8][4], float m, float l,
                                              bf16_t* att, float* part, int row, int j, int kvh, int split, int NH,
                                              int G, int nsplit) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t == 0 && g < G) ml_s[(warp * 8 + g) * 2] = m, ml_s[(warp * 8 + g) * 2 + 1] = l;
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int h = 2 * t + e;
        if (h >= G) continue;
#pragma unroll
        for (int mt = 0; mt < 8; mt++) {
            const int d = 64 * (mt / 4) + 8 * g + 2 * (mt % 4);
            o_s[(warp * 8 + h) * Q3_HD + d] = o[mt][e];
            o_s[(warp * 8 + h) * Q3_HD + d + 1] = o[mt][2 + e];
        }
    }
    __syncthreads();
    const int d = threadIdx.x;  // 128 threads, one element each
    for (int h = 0; h < G; h++) {
        float M = NEG_INF;
#pragma unroll
        for (int w = 0; w < Q3_WARPS; w++) M = fmaxf(M, ml_s[(w * 8 + h) * 2]);
        float num = 0.f, den = 0.f;
#pragma unroll
        for (int w = 0; w < Q3_WARPS; w++) {
            const float mw = ml_s[(w * 8 + h) * 2];
            if (mw == NEG_INF) continue;  // a warp without keys
            const float f = exp2f(mw - M);
            num += f * o_s[(w * 8 + h) * Q3_HD + d];
            den += f * ml_s[(w * 8 + h) * 2 + 1];
        }
        const int hq = kvh * G + h;
        if (nsplit == 1) {
            att[(size_t)row * NH * Q3_HD + (size_t)hq * Q3_HD + d] = f2bf(den > 0.f ? num / den : 0.f);
        } else {
            float* pp = part + (((size_t)j * NH + hq) * nsplit + split) * (Q3_HD + 2);
            pp[d] = num;
            if (d == 0) pp[Q3_HD] = M, pp[Q3_HD + 1] = den;
        }
    }
}

// q3_load_step loads a warp's keys and values of the 16-key step kb (see
// q3_attn_rows) of KV head kvh from the paged cache. Keys at or past kend
// read key kend - 1 instead (a valid address and a finite value, masked to
// P = 0), so the loads need no predicate.
__device__ __forceinline__ void q3_load_step(uint4 (&kr)[2][4], uint4 (&vr)[4][2], const bf16_t* kc, const bf16_t* vc,
                                             const int* bt, int kb, int kend, int kvh, int NKV, int B) {
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        const int key = min(kb + 8 * nt + g, kend - 1);
        const bf16_t* kp = kc + kv_offset(bt[kv_block(key, B)], kvh, kv_slot(key, B), NKV, B, Q3_HD) + 8 * t;
#pragma unroll
        for (int i = 0; i < 4; i++) kr[nt][i] = ld_kv(kp + 32 * i);
    }
#pragma unroll
    for (int v = 0; v < 4; v++) {
        const int key = min(kb + 2 * t + (v & 1) + 8 * (v >> 1), kend - 1);
        const bf16_t* vp = vc + kv_offset(bt[kv_block(key, B)], kvh, kv_slot(key, B), NKV, B, Q3_HD) + 8 * g;
        vr[v][0] = ld_kv(vp);
        vr[v][1] = ld_kv(vp + 64);
    }
}

// q3_attn_rows_impl is q3_attn_rows; with ROPE it is q3_attn_rows_rope,
// which also does q3_qk_rope_kv's work for its rows (steps whose every row is
// one sequence's one token, so that no row reads another row's new key): a
// block normalises and rotates its G query heads into shared memory, and the
// block whose slice ends at the row's last key (its owner) normalises and
// rotates the row's key, writes it and the value into the cache for later
// steps and keeps them in shared memory, where one warp folds them in after
// the loop over the cached keys (a write this kernel made is not for its
// read-only loads). One launch a layer fewer.
template <bool ROPE>
__device__ __forceinline__ void q3_attn_rows_impl(bf16_t* att, float* part, const bf16_t* qkv, bf16_t* kc, bf16_t* vc,
                                                  const int* pos, const int* dec_seqs, const int* dec_runs,
                                                  const int* q_start,
                                                  const int* block_tables, const int* bt_stride, int NH, int NKV, int B,
                                                  float scale_log2, int nsplit, const float* qn, const float* kn,
                                                  const float2* rope, const int* slots, float eps) {
    grid_dep_launch();
    __shared__ float o_s[Q3_WARPS][8][Q3_HD];
    __shared__ float ml_s[Q3_WARPS][8][2];
    __shared__ __align__(16) bf16_t q_s[ROPE ? 10 : 1][Q3_HD];  // G query heads, then the owner's key and value
    const int split = blockIdx.z;
    int j, kvh;
    dec_row_head(j, kvh, dec_runs, NKV);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int G = NH / NKV;
    const int entry = dec_seqs[j];
    const int row = q_start[entry];
    const int ctx = pos[row] + 1;
    const int chunk = ((ctx + nsplit - 1) / nsplit + 15) & ~15;  // whole steps a slice
    const int k0 = split * chunk, k1 = min(ctx, k0 + chunk);
    const int* bt = block_tables + (size_t)entry * bt_stride[0];
    const int width = (NH + 2 * NKV) * Q3_HD;
    const bool owner = ROPE && k0 < ctx && k1 == ctx;
    // The owner's loop stops before the row's own key (folded in below).
    const int kend = owner ? ctx - 1 : k1;
    float qw[4], kw[4];  // the norms' weights: no kernel writes them
    if (ROPE) {
#pragma unroll
        for (int c = 0; c < 4; c++) qw[c] = qn[4 * lane + c], kw[c] = kn[4 * lane + c];
    }
    grid_dep_wait();
    uint32_t qa[16];  // qa[4i + w]: word w of piece 4i + t of head g's query
    if (ROPE) {
        const bf16_t* qrow = qkv + (size_t)row * width + 4 * lane;
        float2 cs[4];
#pragma unroll
        for (int c = 0; c < 4; c++) cs[c] = rope[(size_t)row * 64 + (4 * lane + c) % 64];
        // Units 0..G-1 are the query heads, G the key, G + 1 the value.
        for (int u = warp; u < G + (owner ? 2 : 0); u += Q3_WARPS) {
            const int h = u < G ? kvh * G + u : u == G ? NH + kvh : NH + NKV + kvh;
            const uint2 raw = *reinterpret_cast<const uint2*>(qrow + (size_t)h * Q3_HD);
            const uint2 out = u == G + 1 ? raw : q3_norm_rope(raw, u < G ? qw : kw, cs, eps);
            *reinterpret_cast<uint2*>(&q_s[u < G ? u : 8 + u - G][4 * lane]) = out;
            if (u >= G) {
                const int slot = slots[row];
                if (slot >= 0) {
                    bf16_t* dst = (u == G ? kc : vc) + kv_offset(kv_block(slot, B), kvh, kv_slot(slot, B), NKV, B, Q3_HD);
                    *reinterpret_cast<uint2*>(dst + 4 * lane) = out;
                }
            }
        }
        __syncthreads();  // the queries and the owner's key and value are in place
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 u = g < G ? *reinterpret_cast<const uint4*>(&q_s[g][32 * i + 8 * t]) : make_uint4(0u, 0u, 0u, 0u);
            qa[4 * i] = u.x, qa[4 * i + 1] = u.y, qa[4 * i + 2] = u.z, qa[4 * i + 3] = u.w;
        }
    } else {
        const bf16_t* qp = qkv + (size_t)row * width + (size_t)(kvh * G + g) * Q3_HD + 8 * t;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 u = g < G ? *reinterpret_cast<const uint4*>(qp + 32 * i) : make_uint4(0u, 0u, 0u, 0u);
            qa[4 * i] = u.x, qa[4 * i + 1] = u.y, qa[4 * i + 2] = u.z, qa[4 * i + 3] = u.w;
        }
    }
    float m = NEG_INF, l = 0.f;  // head g's running maximum (the quad's) and this lane's part of the sum
    float o[8][4];               // O^T: dims of tile mt (rows g, g + 8) x heads 2t, 2t + 1
#pragma unroll
    for (int mt = 0; mt < 8; mt++) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    for (int kb = k0 + 16 * warp; kb < kend; kb += 16 * Q3_WARPS) {
        uint4 kr[2][4], vr[4][2];
        q3_load_step(kr, vr, kc, vc, bt, kb, kend, kvh, NKV, B);
        q3_attn_step(o, m, l, qa, kr, vr, kb, kend, G, scale_log2);
    }
    // The row's own key and value, as a step whose other 15 keys are masked,
    // by the warp whose step it falls in.
    if (owner && warp == (ctx - 1 - k0) / 16 % Q3_WARPS) {
        uint4 kr[2][4], vr[4][2];
#pragma unroll
        for (int i = 0; i < 4; i++) kr[0][i] = kr[1][i] = *reinterpret_cast<const uint4*>(&q_s[8][32 * i + 8 * t]);
#pragma unroll
        for (int v = 0; v < 4; v++) {
            vr[v][0] = *reinterpret_cast<const uint4*>(&q_s[9][8 * g]);
            vr[v][1] = *reinterpret_cast<const uint4*>(&q_s[9][8 * g + 64]);
        }
        q3_attn_step(o, m, l, qa, kr, vr, ctx - 1, ctx, G, scale_log2);
    }
    q3_attn_merge(&o_s[0][0][0], &ml_s[0][0][0], o, m, l, att, part, row, j, kvh, split, NH, G, nsplit);
}

extern "C" __global__ void __launch_bounds__(128, Q3_ROWS_BLOCKS) q3_attn_rows(
    bf16_t* att, float* part, const bf16_t* qkv, const bf16_t* kc, const bf16_t* vc, const int* pos,
    const int* dec_seqs, const int* dec_runs, const int* q_start, const int* block_tables, const int* bt_stride, int NH,
    int NKV, int B, float scale_log2, int nsplit) {
    q3_attn_rows_impl<false>(att, part, qkv, (bf16_t*)kc, (bf16_t*)vc, pos, dec_seqs, dec_runs, q_start, block_tables,
                             bt_stride, NH, NKV, B, scale_log2, nsplit, nullptr, nullptr, nullptr, nullptr, 0.f);
}

// q3_attn_rows_rope: q3_attn_rows with q3_qk_rope_kv's work for its rows
// (qn, kn, rope, slots and eps as q3_qk_rope_kv's).
extern "C" __global__ void __launch_bounds__(128, Q3_ROWS_BLOCKS) q3_attn_rows_rope(
    bf16_t* att, float* part, const bf16_t* qkv, bf16_t* kc, bf16_t* vc, const int* pos, const int* dec_seqs,
    const int* dec_runs, const int* q_start, const int* block_tables, const int* bt_stride, int NH, int NKV, int B,
    float scale_log2, int nsplit, const float* qn, const float* kn, const float2* rope, const int* slots, float eps) {
    q3_attn_rows_impl<true>(att, part, qkv, kc, vc, pos, dec_seqs, dec_runs, q_start, block_tables, bt_stride, NH, NKV, B,
                            scale_log2, nsplit, qn, kn, rope, slots, eps);
}

// q3_kv_prefetch asks L2 for the cached keys and values that one layer's
// decode-row attention reads first, while the kernels before it (norms and
// projections, bound by their latency, not by DRAM) leave most of the
// memory bandwidth idle (kvprefetch.go). It runs on a stream of its own,
// off the step's chain of kernels, and only hints: it writes nothing, so it
// cannot change a result. A warp takes the attention block at linear index
// item (the order the GPU starts them in, dec_row_head_at) and asks for each
// of its cache blocks' B keys and B values of its KV head, two contiguous
// runs of B * 256 bytes, by bulk prefetches (sm_90); items are taken in
// order up to budget (key, value) cache-block pairs. The first item has the
// longest context (plan.go's longestFirst), so item times its blocks bounds
// the pairs before item.
extern "C" __global__ void __launch_bounds__(128) q3_kv_prefetch(const bf16_t* kc, const bf16_t* vc, const int* pos,
                                                                 const int* dec_seqs, const int* dec_runs,
                                                                 const int* q_start, const int* block_tables,
                                                                 const int* bt_stride, int rows, int NKV, int B,
                                                                 int budget) {
    const int item = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (item >= rows * NKV) return;
    int j, kvh;
    dec_row_head_at(j, kvh, 0, rows, dec_runs, NKV);
    const int longest = kv_block(pos[q_start[dec_seqs[j]]], B) + 1;
    if ((long long)item * longest >= budget) return;
    dec_row_head_at(j, kvh, item, rows, dec_runs, NKV);
    const int entry = dec_seqs[j];
    const int blocks = kv_block(pos[q_start[entry]], B) + 1;
    const int* bt = block_tables + (size_t)entry * bt_stride[0];
    const unsigned bytes = (unsigned)B * Q3_HD * sizeof(bf16_t);
    for (int b = lane; b < blocks; b += 32) {
        const size_t off = kv_offset(bt[b], kvh, 0, NKV, B, Q3_HD);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(kc + off), "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(vc + off), "r"(bytes) : "memory");
#endif
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
// contract of attention_mma.cu, for bf16 and head size 128 with
// grouped-query heads): a block takes 64 query rows of one prompt chunk
// (tile t: rows q0 = tile_q0[t] .. of entry e = tile_seq[t], rows
// q_start[e] + q0 + i at positions ctx[e] + q0 + i) and one query head,
// whose KV head is h / (NH / NKV); 4 warps of 16 rows. For each tile of 64
// keys from the paged cache, S = Q K^T and O += P V run as mma.sync
// m16n8k16 (bf16 in, fp32 accumulate) with the online softmax in
// registers; P never leaves them. Keys and values are copied by cp.async
// into two stages of shared memory, the next tile in flight while this one
// is computed, both row-major: ldmatrix gives K's fragments and
// ldmatrix.trans V's. Q passes through the second stage's key buffer on its
// way to the registers. Dynamic shared memory: PF_SMEM bytes.
#define PF_BR 64
#define PF_BC 64
#define PF_PAD 136  // row stride in bf16 (272 B): ldmatrix's eight rows hit eight bank groups
#define PF_TILE (PF_BC * PF_PAD)
#define PF_SMEM (2 * 2 * PF_TILE * 2)  // two stages of keys and values

extern "C" __global__ void __launch_bounds__(128) q3_attn_prefill(
    bf16_t* out, const bf16_t* qkv, const bf16_t* kc, const bf16_t* vc, const int* q_start, const int* q_len,
    const int* ctx_len, const int* tile_seq, const int* tile_q0, const int* block_tables, const int* bt_stride, int NH,
    int NKV, int B, float scale) {
    grid_dep_launch();
    extern __shared__ __align__(16) bf16_t pf_sm[];  // [stage][K, V][key][PF_PAD]
    const PrefillTile pt = prefill_tile(q_start, q_len, ctx_len, tile_seq, tile_q0, block_tables, bt_stride, NH, NKV, PF_BR);
    const int q0 = pt.q0, h = pt.h, kvh = pt.kvh, len = pt.len, ctx = pt.ctx, qs = pt.qrow, last = pt.last;
    const int* bt = pt.bt;
    const int width = (NH + 2 * NKV) * Q3_HD, C = NH * Q3_HD;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t4 = lane & 3;
    grid_dep_wait();

    // issue: keys and values k0 .. k0 + 63 into a stage; past `last`, zeros
    // (P = 0 must not meet NaN).
    auto issue = [&](int k0, int stage) {
        bf16_t* Ks = pf_sm + stage * 2 * PF_TILE;
#pragma unroll
        for (int u = 0; u < PF_BC * Q3_HD / 8 / 128; u++) {
            const int c = tid + 128 * u, key = c / (Q3_HD / 8), part = (c % (Q3_HD / 8)) * 8;
            const int j = k0 + key;
            const bool ok = j <= last;
            const size_t off = ok ? kv_offset(bt[kv_block(j, B)], kvh, kv_slot(j, B), NKV, B, Q3_HD) + part : 0;
            cp16(smem_u32(Ks + key * PF_PAD + part), kc + off, ok);
            cp16(smem_u32(Ks + PF_TILE + key * PF_PAD + part), vc + off, ok);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    issue(0, 0);
    {  // Q through stage 1's key buffer
        bf16_t* Qs = pf_sm + 2 * PF_TILE;
#pragma unroll
        for (int u = 0; u < PF_BR * Q3_HD / 8 / 128; u++) {
            const int c = tid + 128 * u, r = c / (Q3_HD / 8), part = (c % (Q3_HD / 8)) * 8;
            const bool ok = q0 + r < len;
            cp16(smem_u32(Qs + r * PF_PAD + part), qkv + (ok ? (size_t)(qs + q0 + r) * width + h * Q3_HD + part : 0), ok);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    const int r0 = warp * 16 + g;  // this thread's rows in the tile: r0 and r0 + 8
    uint32_t qa[8][4];
    {
        const bf16_t* Qs = pf_sm + 2 * PF_TILE;
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
            qa[kk][0] = *(const uint32_t*)&Qs[r0 * PF_PAD + kk * 16 + t4 * 2];
            qa[kk][1] = *(const uint32_t*)&Qs[(r0 + 8) * PF_PAD + kk * 16 + t4 * 2];
            qa[kk][2] = *(const uint32_t*)&Qs[r0 * PF_PAD + kk * 16 + t4 * 2 + 8];
            qa[kk][3] = *(const uint32_t*)&Qs[(r0 + 8) * PF_PAD + kk * 16 + t4 * 2 + 8];
        }
    }
    __syncthreads();  // stage 1 is refilled next
    const int qp0 = ctx + q0 + r0, qp1 = qp0 + 8;  // absolute positions of the two rows
    const int warp_last = min(ctx + q0 + warp * 16 + 15, last);
    float o[16][4];
#pragma unroll
    for (int nt = 0; nt < 16; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
    float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;
    // ldmatrix lanes: lane l addresses row l % 8 of matrix l / 8.
    const int lr = lane % 8, lm = lane / 8;

    for (int k0 = 0, stage = 0; k0 <= last; k0 += PF_BC, stage ^= 1) {
        if (k0 + PF_BC <= last) {
            issue(k0 + PF_BC, stage ^ 1);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        __syncthreads();  // this tile's copies are visible to every warp
        const bf16_t* Ks = pf_sm + stage * 2 * PF_TILE;
        const bf16_t* Vs = Ks + PF_TILE;
        if (k0 <= warp_last) {  // else every key of this tile is in this warp's future
            float sc[8][4];
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
                for (int kk = 0; kk < 8; kk += 2) {
                    // keys 8nt + (0..7), dims 16kk + 8 (lm & 1) + 16 (lm >> 1): b0, b1 of k-steps kk and kk + 1
                    uint32_t b[4];
                    ldsm4(smem_u32(Ks + (nt * 8 + lr) * PF_PAD + kk * 16 + 8 * (lm & 1) + 16 * (lm >> 1)), b[0], b[1], b[2], b[3]);
                    mma_bf(sc[nt], qa[kk], b[0], b[1]);
                    mma_bf(sc[nt], qa[kk + 1], b[2], b[3]);
                }
            }
            uint32_t pa[4][4];
            fa_softmax_tile<16, true>(sc, o, pa, m0, m1, l0, l1, k0, qp0, qp1, last, scale,
                                      [](float lo, float hi) { return pack_bf2(lo, hi); });
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
#pragma unroll
                for (int nt = 0; nt < 16; nt += 2) {
                    // keys 16kk + 8 (lm & 1) + (0..7), dims 8 (nt + (lm >> 1)): b0, b1 of dim tiles nt and nt + 1
                    uint32_t b[4];
                    ldsm4_trans(smem_u32(Vs + (kk * 16 + 8 * (lm & 1) + lr) * PF_PAD + 8 * (nt + (lm >> 1))), b[0], b[1], b[2], b[3]);
                    mma_bf(o[nt], pa[kk], b[0], b[1]);
                    mma_bf(o[nt + 1], pa[kk], b[2], b[3]);
                }
            }
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }
    fa_store<16>(out, o, l0, l1, qs, q0 + r0, len, C, h * Q3_HD, [](float lo, float hi) { return pack_bf2(lo, hi); });
}
