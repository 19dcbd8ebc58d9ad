// lmhead.cu: the LM head of steps with at most 16 sampled rows:
// logits(M, OC) fp32 = LayerNorm_f(resid[rows]) @ wte^T, plus the maximum of
// every 8-column tile of each row (as float_key) for the sampler, which then
// reads 1/8 of the row to find the argmax and the top-k bound (sample.cu).
//
// Unlike gemv.cu, a warp owns whole 8-column tiles over all of K, so no
// partial sums meet in shared memory and nothing synchronises the block
// after the LayerNorm staging. Each lane keeps LM_DEPTH 16-byte weight
// pieces in flight in a ring: the piece an MMA has consumed is refilled
// with the one LM_DEPTH chunks ahead, running into the warp's next tile, so
// the stream of weight loads never drains between tiles (the gemv kernels
// stop at each tile's reduction). The first tile's ring is filled before
// the grid dependency wait. Same fragment layout as gemv.cu: lane (g, q)
// holds k = 32c + 8q .. +7 of activation row g and weight row g.
#include "common.cuh"
#include "mma.cuh"
#include "ln_stage.cuh"

#define LM_WARPS 8

// KCH = K / 32 chunks (compile time, so the ring's slots are registers).
template <int MR, int KCH>
__device__ __forceinline__ void lmhead_impl(float* out, int ldo, uint32_t* keys, int ldk, const float* resid,
                                            const int* rows, const float* lnw, const float* lnb, float eps,
                                            const half_t* W, int M, int OC) {
    constexpr int K = KCH * 32;
    constexpr int DEPTH = KCH % 12 == 0 ? 12 : 8;  // chunks in flight per lane
    static_assert(KCH % DEPTH == 0, "the ring must tile K");
    static_assert(K <= GEMV_MAXC, "staged rows");
    __shared__ __align__(16) half_t xs[MR * (K + GEMV_XPAD)];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const int xstride = K + GEMV_XPAD;
    const int ntiles = (OC + 7) / 8, nwarps = gridDim.x * LM_WARPS;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    // This lane's weight row of tile t, at its k offset (rows past OC are
    // clamped to a valid one and never stored).
    auto wrow = [&](int t) { return W + (size_t)min(t * 8 + g, OC - 1) * K + q * 8; };
    int tile = blockIdx.x * LM_WARPS + warp;
    uint4 wv[DEPTH];
    grid_dep_launch();
    if (tile < ntiles) {
        const half_t* p = wrow(tile);
#pragma unroll
        for (int u = 0; u < DEPTH; u++) wv[u] = ld_stream(p + u * 32);
    }
    if (warp == 0) prefetch_ln_weights(lnw, lnb, K);
    grid_dep_wait();  // the residual stream and the outputs belong to earlier kernels
    stage_ln_rows<MR, LM_WARPS>(xs, xstride, resid, rows, lnw, lnb, eps, M, K);
    __syncthreads();
    for (; tile < ntiles; tile += nwarps) {
        const half_t* p = wrow(tile);
        const int next = tile + nwarps;
        const half_t* pn = wrow(min(next, ntiles - 1));
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int u = 0; u < KCH; u++) {
            const int k = u * 32 + q * 8;
            const uint4 xa = *(const uint4*)(xs + g * xstride + k);
            const uint4 xb = MR > 8 ? *(const uint4*)(xs + (g + 8) * xstride + k) : zero;
            const uint4 w = wv[u % DEPTH];
            mma16816(acc, xa.x, xb.x, xa.y, xb.y, w.x, w.y);
            mma16816(acc, xa.z, xb.z, xa.w, xb.w, w.z, w.w);
            if (u + DEPTH < KCH) {
                wv[u % DEPTH] = ld_stream(p + (u + DEPTH) * 32);
            } else if (next < ntiles) {
                wv[u % DEPTH] = ld_stream(pn + (u + DEPTH - KCH) * 32);
            }
        }
        // acc: rows g (0, 1) and g + 8 (2, 3), columns n and n + 1.
        const int n = tile * 8 + q * 2;
#pragma unroll
        for (int h = 0; h < (MR > 8 ? 2 : 1); h++) {
            const int row = g + 8 * h;
            const float v0 = acc[2 * h], v1 = acc[2 * h + 1];
            uint32_t key = n < OC ? float_key(finite_or_neginf(v0)) : 0u;
            if (n + 1 < OC) key = max(key, float_key(finite_or_neginf(v1)));
            key = max(key, __shfl_xor_sync(0xffffffffu, key, 1));
            key = max(key, __shfl_xor_sync(0xffffffffu, key, 2));
            if (row < M) {
                float* o = out + (size_t)row * ldo + n;
                if (n + 1 < OC) {
                    *(float2*)o = make_float2(v0, v1);
                } else if (n < OC) {
                    *o = v0;
                }
                if (q == 0) keys[(size_t)row * ldk + tile] = key;
            }
        }
    }
}

// out (M, ldo) fp32, ldo even; keys (M, ldk) with ldk >= ceil(OC / 8); K =
// KCH * 32 channels; M <= MR.
#define LMHEAD_KERNEL(MR, KCH)                                                                                        \
    extern "C" __global__ void __launch_bounds__(LM_WARPS * 32) lmhead_ln_r##MR##_k##KCH(                           \
        float* out, int ldo, uint32_t* keys, int ldk, const float* resid, const int* rows, const float* lnw,        \
        const float* lnb, float eps, const half_t* W, int M, int OC) {                                              \
        lmhead_impl<MR, KCH>(out, ldo, keys, ldk, resid, rows, lnw, lnb, eps, W, M, OC);                           \
    }

// K = 256 (the tests' small model), 768 (GPT-2 small), 1024 (medium).
LMHEAD_KERNEL(8, 8)
LMHEAD_KERNEL(16, 8)
LMHEAD_KERNEL(8, 24)
LMHEAD_KERNEL(16, 24)
LMHEAD_KERNEL(8, 32)
LMHEAD_KERNEL(16, 32)
