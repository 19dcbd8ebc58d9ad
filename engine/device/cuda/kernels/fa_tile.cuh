// fa_tile.cuh: the online softmax of one 64-key tile in the prefill
// attention kernels on the tensor cores (attention_mma.cu's fp16 one for
// head size 64, qwen3.cu's q3_attn_prefill in bf16 for head size 128): a
// warp's scores S = Q K^T of its rows r0 and r0 + 8 against keys k0 ..
// k0 + 63 arrive in the mma.sync accumulator layout, sc[nt] holding keys
// 8nt + 2t, + 1 (elements 0, 1: row r0; 2, 3: row r0 + 8) for lane (g, t).
#pragma once
#include "common.cuh"

// PrefillTile is what a block of the rotary block's prompt-chunk attention
// (q3_attn_prefill's contract, shared by q3_attn_wg.cu's kernel) takes from
// the step's layout: block x is tile (entry s, its first query row q0 in
// the chunk), block y query head h of KV head kvh; the chunk's length len,
// cached context ctx and first row qrow in qkv, s's block table bt, and the
// last key position the tile's BR query rows need. Reads step inputs only,
// so it may run before the PDL wait.
struct PrefillTile {
    int s, q0, h, kvh, len, ctx, qrow, last;
    const int* bt;
};

__device__ __forceinline__ PrefillTile prefill_tile(const int* q_start, const int* q_len, const int* ctx_len,
                                                    const int* tile_seq, const int* tile_q0, const int* block_tables,
                                                    const int* bt_stride, int NH, int NKV, int BR) {
    PrefillTile t;
    t.s = tile_seq[blockIdx.x], t.q0 = tile_q0[blockIdx.x], t.h = blockIdx.y;
    t.kvh = t.h / (NH / NKV);
    t.len = q_len[t.s], t.ctx = ctx_len[t.s], t.qrow = q_start[t.s];
    t.bt = block_tables + (size_t)t.s * bt_stride[0];
    t.last = t.ctx + min(t.q0 + BR, t.len) - 1;
    return t;
}

// ex2_ftz is 2^x on the special-function unit with subnormal results
// flushed to zero: exp2f without --use_fast_math wraps the same instruction
// in a rescale for subnormal results, three more instructions for
// probabilities under 2^-126 that change no sum.
__device__ __forceinline__ float ex2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// fa_softmax_tile masks the scores (MASK: keys past a row's position qp0 /
// qp1 or past the tile's last key get -inf; a tile wholly at or before
// every row's position and the last key needs none), raises the rows'
// running maxima m0 / m1 (in scaled units), rescales their sums l0 / l1 and
// the output accumulators o (NO tiles of 8 dims) by the change, and leaves
// P in pa as the A operand of O += P V (pa[kk]: keys 16kk .. 16kk + 15),
// packed by pack (fp16 or bf16 pairs; a lambda, so it inlines). The scale
// goes into the exponent's fused multiply-add: scale > 0, so the largest
// scaled score is the largest score scaled. BASE2: the scale includes
// log2(e) and the exponential is ex2_ftz (q3_attn_prefill), else __expf.
template <int NO, bool BASE2, bool MASK = true, typename Pack>
__device__ __forceinline__ void fa_softmax_tile(float (&sc)[8][4], float (&o)[NO][4], uint32_t (&pa)[4][4], float& m0, float& m1,
                                                float& l0, float& l1, int k0, int qp0, int qp1, int last, float scale, Pack pack) {
    const int t4 = threadIdx.x % 32 & 3;
    float mx0 = NEG_INF, mx1 = NEG_INF;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            if (MASK) {
                const int j = k0 + nt * 8 + t4 * 2 + e;
                if (j > qp0 || j > last) sc[nt][e] = NEG_INF;
                if (j > qp1 || j > last) sc[nt][2 + e] = NEG_INF;
            }
            mx0 = fmaxf(mx0, sc[nt][e]);
            mx1 = fmaxf(mx1, sc[nt][2 + e]);
        }
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    auto ex = [](float x) { return BASE2 ? ex2_ftz(x) : __expf(x); };
    // Key 0 is in the first tile and precedes every row, so the maxima are
    // finite from the first tile on and m - n is never -inf - -inf.
    const float n0 = fmaxf(m0, mx0 * scale), n1 = fmaxf(m1, mx1 * scale);
    const float c0 = ex(m0 - n0), c1 = ex(m1 - n1);
    m0 = n0;
    m1 = n1;
    l0 *= c0;
    l1 *= c1;
    // Past a row's first tiles its maximum seldom moves: the warp skips
    // the rescale (c = 1) unless one of its rows' did.
    if (__any_sync(0xffffffffu, c0 != 1.f || c1 != 1.f)) {
#pragma unroll
        for (int nt = 0; nt < NO; nt++) {
            o[nt][0] *= c0;
            o[nt][1] *= c0;
            o[nt][2] *= c1;
            o[nt][3] *= c1;
        }
    }
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        const float p00 = ex(fmaf(sc[nt][0], scale, -n0)), p01 = ex(fmaf(sc[nt][1], scale, -n0));
        const float p10 = ex(fmaf(sc[nt][2], scale, -n1)), p11 = ex(fmaf(sc[nt][3], scale, -n1));
        l0 += p00 + p01;
        l1 += p10 + p11;
        const int kk = nt / 2, hi = (nt % 2) * 2;
        pa[kk][hi] = pack(p00, p01);
        pa[kk][hi + 1] = pack(p10, p11);
    }
}

// fa_store finishes a warp's rows of a tile: qi0 and qi0 + 8 of a chunk of
// len rows (output rows base + qi), their sums l0 / l1 completed over the
// quad, O / l packed by pack (fp16 or bf16 pairs) into out (C elements a
// row) from column col0 on, NO tiles of 8 columns; rows past the chunk are
// not stored.
template <int NO, typename Pack>
__device__ __forceinline__ void fa_store(unsigned short* out, const float (&o)[NO][4], float l0, float l1, int base, int qi0,
                                         int len, int C, int col0, Pack pack) {
    const int t4 = threadIdx.x % 32 & 3;
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const int qi1 = qi0 + 8;
    const float inv0 = 1.f / l0, inv1 = 1.f / l1;
#pragma unroll
    for (int nt = 0; nt < NO; nt++) {
        const int col = col0 + nt * 8 + t4 * 2;
        if (qi0 < len) *(uint32_t*)(out + (size_t)(base + qi0) * C + col) = pack(o[nt][0] * inv0, o[nt][1] * inv0);
        if (qi1 < len) *(uint32_t*)(out + (size_t)(base + qi1) * C + col) = pack(o[nt][2] * inv1, o[nt][3] * inv1);
    }
}
