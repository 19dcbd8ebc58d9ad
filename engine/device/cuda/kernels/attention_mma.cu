// attention_mma.cu: prefill attention on the tensor cores (head size 64).
//
// Same contract as attention_prefill in attention.cu (a tile of query rows
// of one chunk, keys and values read from the paged cache over positions
// [0, pos]), FlashAttention-2 style: 4 warps, 16 query rows each; for every
// tile of 64 keys, S = Q K^T and O += P V run as mma.sync m16n8k16 (fp16 in,
// fp32 accumulate) with an online softmax in registers. P never leaves the
// registers: the accumulator layout of S is the A-operand layout of P V.
// V is stored transposed in shared memory so both B operands are 32-bit
// loads of consecutive halves.
#include "common.cuh"
#include "fa_tile.cuh"

#define FA_BR 64
#define FA_BC 64
#define FA_HD 64
#define FA_PAD 72  // row stride in halves (144 B): fragment loads avoid bank conflicts

__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    return (uint32_t)f2h(lo) | ((uint32_t)f2h(hi) << 16);
}

extern "C" __global__ void __launch_bounds__(128) attention_prefill_mma_64(
    half_t* out, const half_t* qkv, const half_t* kc, const half_t* vc, const int* block_tables, int max_blocks,
    const int* q_start, const int* q_len, const int* ctx_len, const int* tile_seq, const int* tile_q0, int NH, int B,
    float scale) {
    grid_dep_launch();
    grid_dep_wait();
    __shared__ __align__(16) half_t Qs[FA_BR][FA_PAD];
    __shared__ __align__(16) half_t Ks[FA_BC][FA_PAD];
    __shared__ __align__(16) half_t Vt[FA_HD][FA_PAD];  // [hd][key]
    const int s = tile_seq[blockIdx.x], q0 = tile_q0[blockIdx.x], h = blockIdx.y;
    const int C = NH * FA_HD, len = q_len[s], ctx = ctx_len[s], qs = q_start[s];
    const int* bt = block_tables + (size_t)s * max_blocks;
    const int last = ctx + min(q0 + FA_BR, len) - 1;  // last key position the tile needs
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t4 = lane & 3;

    for (int c = tid; c < FA_BR * FA_HD / 8; c += blockDim.x) {
        int r = c / (FA_HD / 8), part = (c % (FA_HD / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (q0 + r < len) v = *(const uint4*)(qkv + (size_t)(qs + q0 + r) * 3 * C + h * FA_HD + part);
        *(uint4*)&Qs[r][part] = v;
    }
    __syncthreads();
    const int r0 = warp * 16 + g;  // this thread's rows in the tile: r0 and r0 + 8
    uint32_t qa[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        qa[kk][0] = *(const uint32_t*)&Qs[r0][kk * 16 + t4 * 2];
        qa[kk][1] = *(const uint32_t*)&Qs[r0 + 8][kk * 16 + t4 * 2];
        qa[kk][2] = *(const uint32_t*)&Qs[r0][kk * 16 + t4 * 2 + 8];
        qa[kk][3] = *(const uint32_t*)&Qs[r0 + 8][kk * 16 + t4 * 2 + 8];
    }
    const int qp0 = ctx + q0 + r0, qp1 = qp0 + 8;  // absolute positions of the two rows
    const int warp_last = min(ctx + q0 + warp * 16 + 15, last);
    float o[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
    float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;

    for (int k0 = 0; k0 <= last; k0 += FA_BC) {
        __syncthreads();
        for (int c = tid; c < FA_BC * FA_HD / 8; c += blockDim.x) {
            int key = c / (FA_HD / 8), part = (c % (FA_HD / 8)) * 8;
            int j = k0 + key;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;  // zeros past the last key: P = 0 must not meet NaN
            if (j <= last) {
                size_t off = kv_offset(bt[j / B], h, j % B, NH, B, FA_HD) + part;
                kv = *(const uint4*)(kc + off);
                vv = *(const uint4*)(vc + off);
            }
            *(uint4*)&Ks[key][part] = kv;
            const half_t* vh = reinterpret_cast<const half_t*>(&vv);
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
            for (int kk = 0; kk < 4; kk++) {
                uint32_t b0 = *(const uint32_t*)&Ks[nt * 8 + g][kk * 16 + t4 * 2];
                uint32_t b1 = *(const uint32_t*)&Ks[nt * 8 + g][kk * 16 + t4 * 2 + 8];
                mma16816(sc[nt], qa[kk], b0, b1);
            }
        }
        uint32_t pa[4][4];
        fa_softmax_tile<8, false>(sc, o, pa, m0, m1, l0, l1, k0, qp0, qp1, last, scale,
                                  [](float lo, float hi) { return pack_half2(lo, hi); });
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                uint32_t b0 = *(const uint32_t*)&Vt[nt * 8 + g][kk * 16 + t4 * 2];
                uint32_t b1 = *(const uint32_t*)&Vt[nt * 8 + g][kk * 16 + t4 * 2 + 8];
                mma16816(o[nt], pa[kk], b0, b1);
            }
        }
    }
    fa_store<8>(out, o, l0, l1, qs, q0 + r0, len, C, h * FA_HD, [](float lo, float hi) { return pack_half2(lo, hi); });
}
