// gemm_skinny.cu: the projections of steps with 17..128 token rows (decode at
// medium and large batch), where cuBLASLt's tiles for so few rows reach a
// fifth of the memory bandwidth. out(M, OC) = x(M, K) @ W(OC, K)^T, then the
// epilogue of mma.cuh; x is fp16 (LayerNorm output, attention or MLP
// activations).
//
// A block owns SK_BN output columns and all M rows over one slice of K
// (split-K: the grid's y), so the weights are read once and there are enough
// blocks for every SM. Its 8 warps form 2 x 4: rows 64*wr.., columns
// 16*wc.. of the tile; each lane streams weight pieces as in gemv.cu (same
// k permutation of the MMA fragments) and reads activations from L1/L2.
// With several splits the partial tiles meet through vector reductions at
// L2 (see the end of the kernel).
#include "common.cuh"
#include "mma.cuh"

#define SK_BN 64  // output columns per block
#define SK_U 2    // k chunks (of 32) per round
#define SK_MIN_BLOCKS 2  // resident blocks per SM the registers are sized for (skinnySplits fills them)

// red_add2 adds (a, b) to p[0], p[1] (8-byte aligned) at L2 without a return
// value: one vector reduction on sm_90, two scalar ones before it.
__device__ __forceinline__ void red_add2(float* p, float a, float b) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}


extern "C" __global__ void __launch_bounds__(256, SK_MIN_BLOCKS) gemm_skinny(
    void* out, int ldo, const half_t* x, int ldx, const half_t* W, const half_t* bias16, const float* bias32, int M,
    int K, int OC, int mode, float* work, int* counts) {
    grid_dep_launch();
    grid_dep_wait();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const int wr = warp >> 2, wc = warp & 3;
    const int tile = blockIdx.x, split = blockIdx.y, S = gridDim.y;
    const int nchunk = K / 32;
    const int c_beg = split * nchunk / S, c_end = (split + 1) * nchunk / S;
    const int row0 = wr * 64, col0 = tile * SK_BN + wc * 16;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    float acc[4][2][4];
#pragma unroll
    for (int rb = 0; rb < 4; rb++)
#pragma unroll
        for (int t = 0; t < 2; t++) acc[rb][t][0] = acc[rb][t][1] = acc[rb][t][2] = acc[rb][t][3] = 0.f;
    const bool rows_any = row0 < M;  // warp-uniform
    if (rows_any) {
        for (int c = c_beg; c < c_end; c += SK_U) {
            uint4 wv[SK_U][2];
#pragma unroll
            for (int u = 0; u < SK_U; u++) {
                const int k = min(c + u, c_end - 1) * 32 + q * 8;  // clamped: meets zero activations
#pragma unroll
                for (int t = 0; t < 2; t++) {
                    const int n = min(col0 + t * 8 + g, OC - 1);  // clamped: never stored
                    wv[u][t] = ld_stream(W + (size_t)n * K + k);
                }
            }
            uint4 xa[SK_U][4], xb[SK_U][4];
#pragma unroll
            for (int u = 0; u < SK_U; u++) {
                const bool ok = c + u < c_end;
                const int k = (c + u) * 32 + q * 8;
#pragma unroll
                for (int rb = 0; rb < 4; rb++) {
                    const int r = row0 + rb * 16 + g;
                    xa[u][rb] = (ok && r < M) ? *(const uint4*)(x + (size_t)r * ldx + k) : zero;
                    xb[u][rb] = (ok && r + 8 < M) ? *(const uint4*)(x + (size_t)(r + 8) * ldx + k) : zero;
                }
            }
#pragma unroll
            for (int u = 0; u < SK_U; u++) {
#pragma unroll
                for (int rb = 0; rb < 4; rb++) {
                    if (row0 + rb * 16 >= M) continue;  // warp-uniform
#pragma unroll
                    for (int t = 0; t < 2; t++) {
                        mma16816(acc[rb][t], xa[u][rb].x, xb[u][rb].x, xa[u][rb].y, xb[u][rb].y, wv[u][t].x, wv[u][t].y);
                        mma16816(acc[rb][t], xa[u][rb].z, xb[u][rb].z, xa[u][rb].w, xb[u][rb].w, wv[u][t].z, wv[u][t].w);
                    }
                }
            }
        }
    }
    if (S == 1) {
        if (!rows_any) return;
#pragma unroll
        for (int rb = 0; rb < 4; rb++)
#pragma unroll
            for (int t = 0; t < 2; t++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = row0 + rb * 16 + g + (e >= 2 ? 8 : 0), n = col0 + t * 8 + q * 2 + (e & 1);
                    if (row < M && n < OC) epilogue(out, (size_t)row * ldo + n, n, acc[rb][t][e], bias16, bias32, mode);
                }
        return;
    }
    // Several splits: each adds its partial tile with vector reductions at
    // L2 (no workspace round trip through one block). The residual epilogue
    // adds straight into the fp32 stream (split 0 adds the bias); the fp16
    // epilogues need the whole sum first, so the splits add into a zeroed
    // fp32 workspace and the block that finishes a tile last (a counter per
    // tile) applies the epilogue and zeroes the tile for the next launch.
    // The order of the fp32 additions depends on timing: results can differ
    // between runs in the last bit of fp32.
    const bool resid = mode == GEMV_RESIDUAL;
    float* dst = resid ? (float*)out : work;
    const int ldd = resid ? ldo : gridDim.x * SK_BN;
    if (rows_any) {
#pragma unroll
        for (int rb = 0; rb < 4; rb++)
#pragma unroll
            for (int t = 0; t < 2; t++) {
                const int n = col0 + t * 8 + q * 2;  // columns n, n+1: adjacent floats
                if (n >= OC) continue;
                float b0 = 0.f, b1 = 0.f;
                if (resid && split == 0) b0 = bias32[n], b1 = n + 1 < OC ? bias32[n + 1] : 0.f;
#pragma unroll
                for (int hi = 0; hi < 2; hi++) {
                    const int row = row0 + rb * 16 + g + hi * 8;
                    if (row >= M) continue;
                    float* p = dst + (size_t)row * ldd + n;
                    const float v0 = acc[rb][t][2 * hi] + b0, v1 = acc[rb][t][2 * hi + 1] + b1;
                    if (n + 1 < OC && ((size_t)p & 7) == 0) {
                        red_add2(p, v0, v1);
                    } else {
                        atomicAdd(p, v0);
                        if (n + 1 < OC) atomicAdd(p + 1, v1);
                    }
                }
            }
    }
    if (resid) return;
    __threadfence();  // this thread's additions are visible before the count says so
    __syncthreads();
    __shared__ int is_last;
    if (threadIdx.x == 0) is_last = atomicAdd(&counts[tile], 1) == S - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int i = threadIdx.x; i < M * (SK_BN / 4); i += blockDim.x) {
        const int row = i / (SK_BN / 4), n = tile * SK_BN + (i % (SK_BN / 4)) * 4;
        if (n >= OC) continue;
        float4* p = (float4*)(work + (size_t)row * ldd + n);
        const float4 v = ld_l2_4(p);
        *p = zero4;
        const float s4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (n + e < OC) epilogue(out, (size_t)row * ldo + n + e, n + e, s4[e], bias16, bias32, mode);
    }
    if (threadIdx.x == 0) counts[tile] = 0;  // ready for the next launch
}
