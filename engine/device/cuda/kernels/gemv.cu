// gemv.cu: the projections of steps with at most 16 token rows (small-batch
// decode), where cuBLASLt's tiles leave most SMs idle and each LayerNorm is a
// launch of its own. out(M, OC) = act(M, K) @ W(OC, K)^T, then an epilogue.
//
// A block of 8 warps owns NT tiles of 8 output columns at a time (grid-stride
// over tiles) and splits K among its warps; the partial sums meet in shared
// memory. Each lane streams 16-byte pieces of weight rows (a quad of lanes
// reads 64 consecutive bytes of one row), several pieces in flight, and the
// products run on the tensor cores: mma.sync m16n8k16 with the M rows as the
// 16-row operand. The dot product does not care in which order k is summed,
// so a lane's 8 consecutive halves of a weight row serve as its B fragments
// of two MMAs, and the activations are loaded with the same k permutation.
//
// The _ln kernels take the fp32 residual stream and apply LayerNorm first
// (the same arithmetic as layernorm_forward, rounded to fp16), staging the
// normalised rows in shared memory: the LayerNorm kernel disappears.
#include "common.cuh"
#include "mma.cuh"
#include "ln_stage.cuh"

#define GEMV_WARPS 8
#define GEMV_U 6         // 32-wide k chunks per warp per round (loads in flight); see GU

// gemv_impl: M <= MR rows. LN: the input is LayerNorm(resid[rows[m]]) (rows
// may be null: row m), K = C; else x (M, ldx) fp16. W (OC, K) fp16 rows.
template <int MR, int NT, bool LN>
__device__ __forceinline__ void gemv_impl(void* out, int ldo, const half_t* x, int ldx, const float* resid,
                                          const int* rows, const float* lnw, const float* lnb, float eps,
                                          const half_t* W, const half_t* bias16, const float* bias32, int M,
                                          int K, int OC, int mode) {
    __shared__ __align__(16) half_t xs[LN ? MR * (GEMV_MAXC + GEMV_XPAD) : 8];
    __shared__ float red[GEMV_WARPS][NT * 4][32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const int xstride = K + GEMV_XPAD;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const int nchunk = K / 32;
    const int c_beg = warp * nchunk / GEMV_WARPS, c_end = (warp + 1) * nchunk / GEMV_WARPS;
    const int ntiles = (OC + NT * 8 - 1) / (NT * 8);
    // Chunks per round: the one-tile 8-row kernels hold twice as many in
    // the same registers, so a K = 3072 projection (12 chunks a warp) is
    // requested whole before the wait instead of half of it after.
    constexpr int GU = (MR == 8 && NT == 1) ? 2 * GEMV_U : GEMV_U;
    // load_w: this lane's pieces of chunks c..c+GU-1 of the tile's
    // columns. Chunks past c_end are not read (their products meet zero
    // activations: with K = 768 a warp has 3 chunks, so most slots stay
    // empty); columns past OC are clamped to a valid address and never stored.
    uint4 wv[GU][NT];
    auto load_w = [&](int tile, int c) {
#pragma unroll
        for (int u = 0; u < GU; u++) {
            const int k = (c + u) * 32 + q * 8;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const int n = min(tile * NT * 8 + t * 8 + g, OC - 1);
                wv[u][t] = c + u < c_end ? ld_stream(W + (size_t)n * K + k) : zero;
            }
        }
    };
    // The first round's weights are requested before waiting for the
    // previous kernel (programmatic dependent launch) and before the
    // LayerNorm staging, so those latencies overlap.
    grid_dep_launch();
    bool preloaded = blockIdx.x < ntiles && c_beg < c_end;
    if (preloaded) load_w(blockIdx.x, c_beg);
    // Warp 0 stores the first tile: its bias (a weight) is fetched before
    // the wait and its residual values right after it, so the epilogue does
    // not start with a memory round trip.
    float pre_b[NT][2], pre_r[NT][4];
    const bool pre = warp == 0 && blockIdx.x < ntiles;
    if (pre) {
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int n = blockIdx.x * NT * 8 + t * 8 + q * 2 + j;
                pre_b[t][j] = bias_of(n, OC, bias16, bias32, mode);
            }
    }
    if (LN && warp == 0) prefetch_ln_weights(lnw, lnb, K);  // into this SM's L1 for the staging below
    grid_dep_wait();  // activations and outputs belong to earlier kernels
    if (pre && mode == GEMV_RESIDUAL) {
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = g + (e >= 2 ? 8 : 0), n = blockIdx.x * NT * 8 + t * 8 + q * 2 + (e & 1);
                pre_r[t][e] = row < M && n < OC ? ((const float*)out)[(size_t)row * ldo + n] : 0.f;
            }
    }
    if (LN) {
        stage_ln_rows<MR, GEMV_WARPS>(xs, xstride, resid, rows, lnw, lnb, eps, M, K);
        __syncthreads();
    }
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const int n0 = tile * NT * 8;
        float acc[NT][4];
#pragma unroll
        for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
        for (int c = c_beg; c < c_end; c += GU) {
            if (!preloaded) load_w(tile, c);
            preloaded = false;
            uint4 xa[GU], xb[GU];
#pragma unroll
            for (int u = 0; u < GU; u++) {
                const int k = (c + u) * 32 + q * 8;
                const bool ok = c + u < c_end;
                if (LN) {
                    xa[u] = ok ? *(const uint4*)(xs + g * xstride + k) : zero;
                    xb[u] = (ok && MR > 8) ? *(const uint4*)(xs + (g + 8) * xstride + k) : zero;
                } else {
                    xa[u] = (ok && g < M) ? *(const uint4*)(x + (size_t)g * ldx + k) : zero;
                    xb[u] = (ok && MR > 8 && g + 8 < M) ? *(const uint4*)(x + (size_t)(g + 8) * ldx + k) : zero;
                }
            }
            // Lane (g, q) holds k = 32c + 8q .. +7 of row g (x) and column g (W):
            // halves 0-3 are the first MMA's k = 2q, 2q+1, 2q+8, 2q+9, halves 4-7 the second's.
#pragma unroll
            for (int u = 0; u < GU; u++) {
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    mma16816(acc[t], xa[u].x, xb[u].x, xa[u].y, xb[u].y, wv[u][t].x, wv[u][t].y);
                    mma16816(acc[t], xa[u].z, xb[u].z, xa[u].w, xb[u].w, wv[u][t].z, wv[u][t].w);
                }
            }
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
#pragma unroll
            for (int e = 0; e < 4; e++) red[warp][t * 4 + e][lane] = acc[t][e];
        }
        // The next tile's first weights are requested before this tile's
        // reduction and stores (the LM head loops over ~12 tiles a block).
        if (tile + gridDim.x < ntiles && c_beg < c_end) {
            load_w(tile + gridDim.x, c_beg);
            preloaded = true;
        }
        __syncthreads();
        if (warp == 0) {
#pragma unroll
            for (int t = 0; t < NT; t++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = g + (e >= 2 ? 8 : 0), n = n0 + t * 8 + q * 2 + (e & 1);
                    if (row >= M || n >= OC) continue;
                    float s = red[0][t * 4 + e][lane];
#pragma unroll
                    for (int w = 1; w < GEMV_WARPS; w++) s += red[w][t * 4 + e][lane];
                    if (tile != blockIdx.x) {  // a later tile of a grid-stride loop
                        epilogue(out, (size_t)row * ldo + n, n, s, bias16, bias32, mode);
                        continue;
                    }
                    store_biased(out, (size_t)row * ldo + n, s + pre_b[t][e & 1], mode, pre_r[t][e]);
                }
            }
        }
        __syncthreads();
    }
}

#define GEMV_KERNELS(MR, NT)                                                                                          \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_ln_r##MR##_n##NT(                            \
        void* out, int ldo, const float* resid, const int* rows, const float* lnw, const float* lnb, float eps,       \
        const half_t* W, const half_t* bias16, const float* bias32, int M, int K, int OC, int mode) {                 \
        gemv_impl<MR, NT, true>(out, ldo, nullptr, 0, resid, rows, lnw, lnb, eps, W, bias16, bias32, M, K, OC, mode); \
    }                                                                                                                 \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_r##MR##_n##NT(                               \
        void* out, int ldo, const half_t* x, int ldx, const half_t* W, const half_t* bias16, const float* bias32,     \
        int M, int K, int OC, int mode) {                                                                             \
        gemv_impl<MR, NT, false>(out, ldo, x, ldx, nullptr, nullptr, nullptr, nullptr, 0.f, W, bias16, bias32, M, K,  \
                                 OC, mode);                                                                           \
    }

GEMV_KERNELS(8, 1)
GEMV_KERNELS(8, 2)
GEMV_KERNELS(16, 1)
GEMV_KERNELS(16, 2)
