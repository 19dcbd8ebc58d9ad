// q3_f32.cu: the rotary block in fp32 (Options.Float32, `serve --dtype
// float32`): weights, activations and the KV cache all fp32, cuBLASLt's
// fp32 GEMMs (no TF32) between these kernels. It exists to check the
// engine's arithmetic against an fp32 reference such as transformers':
// with random weights the two best logits are often closer than bf16
// activations can resolve, so only an fp32 path can agree token for token
// (docs/cuda.md). Each kernel takes the arguments of its bf16 namesake in
// qwen3.cu, so the step enqueues either set the same way; none of them is
// tuned for speed. The embedding's fp32 form, q3f_embed, is in qwen3.cu
// beside q3_embed (one template).
#include "common.cuh"

// q3f_rmsnorm: q3_rmsnorm with an fp32 out (R, C): one block of 256
// threads a row.
extern "C" __global__ void __launch_bounds__(256) q3f_rmsnorm(float* out, const float* inp, const int* rows, const float* w,
                                                               int R, int C, float eps) {
    grid_dep_launch();
    __shared__ float part[8];
    const int r = blockIdx.x, tid = threadIdx.x;
    const int src = rows ? rows[r] : r;
    grid_dep_wait();
    const float* x = inp + (size_t)src * C;
    float ss = 0.f;
    for (int j = tid; j < C; j += 256) ss += x[j] * x[j];
    ss = block_sum_256(ss, part);
    const float inv = rsqrtf(ss / C + eps);
    for (int j = tid; j < C; j += 256) out[(size_t)r * C + j] = x[j] * inv * w[j];
}

// q3f_qk_rope_kv: q3_qk_rope_kv in fp32, one warp a (row, head): lane l
// holds elements 4l..4l+3, the rotation's partner (j + 64) in lane l ^ 16.
// Queries are normalised and rotated in place, keys normalised, rotated
// and stored at slots[i] (< 0: not stored), values stored as they are.
extern "C" __global__ void q3f_qk_rope_kv(float* qkv, float* kc, float* vc, const float* qn, const float* kn,
                                          const float2* rope, const int* slots, int N, int NH, int NKV, int B, float eps) {
    grid_dep_launch();
    const int HD = 128, heads = NH + 2 * NKV;
    const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    // The bf16 kernel's grid has a warp for every 4 heads of a row; this
    // one takes a head a warp, so each of those warps takes its 4 heads.
    const int groups = (heads + 3) / 4;
    if (warp >= N * groups) return;
    const int i = warp / groups, h0 = (warp % groups) * 4;
    grid_dep_wait();
    const int slot = slots[i];
    float* row = qkv + (size_t)i * heads * HD;
    for (int h = h0; h < min(h0 + 4, heads); h++) {
        float4 v = *reinterpret_cast<const float4*>(row + (size_t)h * HD + 4 * lane);
        const bool isV = h >= NH + NKV;
        if (!isV) {
            const float* nw = (h < NH ? qn : kn) + 4 * lane;
            const float inv = rsqrtf(warp_sum(v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w) / HD + eps);
            float e[4] = {v.x * inv * nw[0], v.y * inv * nw[1], v.z * inv * nw[2], v.w * inv * nw[3]};
            float o[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const float2 cs = rope[(size_t)i * 64 + (4 * lane + c) % 64];
                const float partner = __shfl_xor_sync(0xffffffffu, e[c], 16);
                o[c] = lane < 16 ? e[c] * cs.x - partner * cs.y : e[c] * cs.x + partner * cs.y;
            }
            v = make_float4(o[0], o[1], o[2], o[3]);
        }
        if (float* dst = q3_head_dst(row, kc, vc, h, NH, NKV, slot, B)) *reinterpret_cast<float4*>(dst + 4 * lane) = v;
    }
}

// q3f_swiglu: q3_swiglu in fp32: out (N, I) = SiLU(gate) * up, each row of
// gu (N, 2I) holding (gate j, up j) at columns 2j, 2j + 1, on the bf16
// kernel's grid (four or two outputs a thread, y striding over the rows).
extern "C" __global__ void q3f_swiglu(float* out, const float* gu, int N, int I) {
    grid_dep_launch();
    grid_dep_wait();
    int c, per;
    if (!swiglu_cols(I, c, per)) return;
    for (int i = blockIdx.y; i < N; i += gridDim.y) {
        for (int k = 0; k < per; k++) {
            const float gv = gu[(size_t)i * 2 * I + 2 * (c + k)], uv = gu[(size_t)i * 2 * I + 2 * (c + k) + 1];
            out[(size_t)i * I + c + k] = gv / (1.f + expf(-gv)) * uv;
        }
    }
}

// q3f_attend: one warp's query head q (128 fp32, lane l holding 4l..4l+3)
// over keys 0..nkeys-1 of KV head kvh in the paged fp32 cache with an
// online softmax in fp32 (base 2, scores scaled by scale_log2 =
// log2(e)/sqrt(128)); the normalised output goes to o. Keys come
// Q3F_KEYS at a time, their loads issued together: one key a round left
// a decode step of 300 keys waiting on 300 load latencies a layer.
#define Q3F_KEYS 8
__device__ __forceinline__ void q3f_attend(float* o, const float* q, const float* kc, const float* vc, const int* bt, int nkeys,
                                           int kvh, int NKV, int B, float scale_log2) {
    const int lane = threadIdx.x % 32;
    const float4 qv = *reinterpret_cast<const float4*>(q + 4 * lane);
    float m = NEG_INF, l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int j0 = 0; j0 < nkeys; j0 += Q3F_KEYS) {
        float4 k[Q3F_KEYS], v[Q3F_KEYS];
#pragma unroll
        for (int u = 0; u < Q3F_KEYS; u++) {  // past the last key: the last key again, masked below
            const int j = min(j0 + u, nkeys - 1);
            const size_t off = kv_offset(bt[kv_block(j, B)], kvh, kv_slot(j, B), NKV, B, 128) + 4 * lane;
            k[u] = *reinterpret_cast<const float4*>(kc + off);
            v[u] = *reinterpret_cast<const float4*>(vc + off);
        }
        float s[Q3F_KEYS], mx = m;
#pragma unroll
        for (int u = 0; u < Q3F_KEYS; u++) {
            const float dot = warp_sum(qv.x * k[u].x + qv.y * k[u].y + qv.z * k[u].z + qv.w * k[u].w);
            s[u] = j0 + u < nkeys ? dot * scale_log2 : NEG_INF;
            mx = fmaxf(mx, s[u]);
        }
        const float corr = exp2f(m - mx);  // key j0 is valid, so mx is finite; m = -inf at first: corr 0
        m = mx;
        l *= corr;
        acc = make_float4(acc.x * corr, acc.y * corr, acc.z * corr, acc.w * corr);
#pragma unroll
        for (int u = 0; u < Q3F_KEYS; u++) {
            const float p = exp2f(s[u] - mx);
            l += p;
            acc = make_float4(acc.x + p * v[u].x, acc.y + p * v[u].y, acc.z + p * v[u].z, acc.w + p * v[u].w);
        }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    *reinterpret_cast<float4*>(o + 4 * lane) = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
}

// q3f_attn_rows: q3_attn_rows' contract in fp32 (grid (rows, NKV, 1), 128
// threads; part and nsplit unused: one slice): warp w takes the KV head's
// query heads w, w + 4, ... of the row.
extern "C" __global__ void q3f_attn_rows(float* att, float* part, const float* qkv, const float* kc, const float* vc,
                                         const int* pos, const int* dec_seqs, const int* dec_runs, const int* q_start,
                                         const int* block_tables, const int* bt_stride, int NH, int NKV, int B,
                                         float scale_log2, int nsplit) {
    grid_dep_launch();
    grid_dep_wait();
    const int warp = threadIdx.x / 32, G = NH / NKV;
    int j, kvh;
    dec_row_head(j, kvh, dec_runs, NKV);
    const int entry = dec_seqs[j], row = q_start[entry];
    const int* bt = block_tables + (size_t)entry * bt_stride[0];
    const int width = (NH + 2 * NKV) * 128;
    for (int g = warp; g < G; g += blockDim.x / 32) {
        const int h = kvh * G + g;
        q3f_attend(att + (size_t)row * NH * 128 + (size_t)h * 128, qkv + (size_t)row * width + (size_t)h * 128, kc, vc, bt,
                   pos[row] + 1, kvh, NKV, B, scale_log2);
    }
}

// q3f_attn_prefill: q3_attn_prefill's contract in fp32 (grid (tiles, NH),
// 128 threads, the tile's 64 rows of one prompt chunk and one query head):
// warp w takes rows w, w + 4, ... of the tile, each over keys 0..its
// position (its own key included: every row's key is in the cache first).
extern "C" __global__ void q3f_attn_prefill(float* out, const float* qkv, const float* kc, const float* vc, const int* q_start,
                                            const int* q_len, const int* ctx_len, const int* tile_seq, const int* tile_q0,
                                            const int* block_tables, const int* bt_stride, int NH, int NKV, int B,
                                            float scale_log2) {
    grid_dep_launch();
    grid_dep_wait();
    const int s = tile_seq[blockIdx.x], q0 = tile_q0[blockIdx.x], h = blockIdx.y, warp = threadIdx.x / 32;
    const int kvh = h / (NH / NKV), width = (NH + 2 * NKV) * 128;
    const int len = q_len[s], ctx = ctx_len[s], qs = q_start[s];
    const int* bt = block_tables + (size_t)s * bt_stride[0];
    for (int r = warp; r < 64 && q0 + r < len; r += blockDim.x / 32) {
        const size_t row = (size_t)qs + q0 + r;
        q3f_attend(out + row * NH * 128 + (size_t)h * 128, qkv + row * width + (size_t)h * 128, kc, vc, bt, ctx + q0 + r + 1, kvh,
                   NKV, B, scale_log2);
    }
}
