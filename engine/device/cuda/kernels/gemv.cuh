// gemv.cuh: the projections of steps with at most 16 token rows (small-batch
// decode), where cuBLASLt's tiles leave most SMs idle and each norm is a
// launch of its own. out(M, OC) = act(M, K) @ W(OC, K)^T, then an epilogue.
// gemv.cu instantiates it for GPT-2's block (fp16), q3_gemv.cu for the
// rotary block (bf16).
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
// The input act is one of (PRO):
// - PRO_NONE: x (M, ldx) as it is;
// - PRO_LN / PRO_RMS: LayerNorm or RMSNorm of the fp32 residual stream's
//   rows (K = C), staged in shared memory by the block: the norm kernel
//   disappears.
// fp16 kernels store through mma.cuh's epilogues (GPT-2's modes, biases);
// bf16 ones through q3_store (no biases), whose GEMV_SWIGLU mode applies
// SwiGLU to gate|up weights stored interleaved (row 2j gate j, row 2j + 1
// up j), so a lane's column pair is one output: the SwiGLU kernel
// disappears.
#pragma once
#include "common.cuh"
#include "mma.cuh"
#include "ln_stage.cuh"

#define PRO_NONE 0
#define PRO_LN 1
#define PRO_RMS 2

// The bf16 kernels' epilogues (mode; GEMV_OUT32 as mma.cuh's).
#define GEMV_OUT16 4   // out bf16 = acc
#define GEMV_ADD 5     // out fp32 += acc (the residual)
#define GEMV_SWIGLU 6  // out (M, OC / 2) bf16 = SiLU(acc[2j]) * acc[2j + 1]

// q3_store stores a bf16 kernel's column pair n, n + 1 (n even) of one row
// (o is the element offset of column n; prior0/1 the residual values
// fetched ahead for GEMV_ADD).
__device__ __forceinline__ void q3_store(void* out, size_t o, int n, int OC, float v0, float v1, int mode, float prior0,
                                         float prior1) {
    switch (mode) {
        case GEMV_SWIGLU:
            ((bf16_t*)out)[o / 2] = f2bf(v0 / (1.f + __expf(-v0)) * v1);
            return;
        case GEMV_OUT16:
            ((bf16_t*)out)[o] = f2bf(v0);
            if (n + 1 < OC) ((bf16_t*)out)[o + 1] = f2bf(v1);
            return;
        case GEMV_ADD:
            ((float*)out)[o] = prior0 + v0;
            if (n + 1 < OC) ((float*)out)[o + 1] = prior1 + v1;
            return;
        default:
            ((float*)out)[o] = v0;
            if (n + 1 < OC) ((float*)out)[o + 1] = v1;
    }
}

#define GEMV_WARPS 8
#define GEMV_U 6         // 32-wide k chunks per warp per round (loads in flight); see GU

// gemv_impl: M <= MR rows of E; the input by PRO (above): for the norms
// resid[rows[m]] (rows may be null: row m) with K = C, lnb unused by RMSNorm.
// W (OC, K) rows of E.
template <typename E, int MR, int NT, int PRO>
__device__ __forceinline__ void gemv_impl(void* out, int ldo, const half_t* x, int ldx, const float* resid,
                                          const int* rows, const float* lnw, const float* lnb, float eps,
                                          const half_t* W, const half_t* bias16, const float* bias32, int M,
                                          int K, int OC, int mode) {
    constexpr bool LN = PRO == PRO_LN || PRO == PRO_RMS;  // rows staged
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
                pre_b[t][j] = E::bf16 ? 0.f : bias_of(n, OC, bias16, bias32, mode);
            }
    }
    if (LN && warp == 0) prefetch_ln_weights(lnw, PRO == PRO_LN ? lnb : lnw, K);  // into this SM's L1 for the staging below
    grid_dep_wait();  // activations and outputs belong to earlier kernels
    if (pre && (mode == GEMV_RESIDUAL || (E::bf16 && mode == GEMV_ADD))) {
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = g + (e >= 2 ? 8 : 0), n = blockIdx.x * NT * 8 + t * 8 + q * 2 + (e & 1);
                pre_r[t][e] = row < M && n < OC ? ((const float*)out)[(size_t)row * ldo + n] : 0.f;
            }
    }
    if (PRO == PRO_LN) stage_ln_rows<MR, GEMV_WARPS>(xs, xstride, resid, rows, lnw, lnb, eps, M, K);
    if (PRO == PRO_RMS) stage_rms_rows<E, MR, GEMV_WARPS>(xs, xstride, resid, rows, lnw, eps, M, K);
    if (LN) __syncthreads();
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
                    E::mma(acc[t], xa[u].x, xb[u].x, xa[u].y, xb[u].y, wv[u][t].x, wv[u][t].y);
                    E::mma(acc[t], xa[u].z, xb[u].z, xa[u].w, xb[u].w, wv[u][t].z, wv[u][t].w);
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
        if (warp == 0 && E::bf16) {
            // A lane's column pair (n, n + 1) of rows g and g + 8: q3_store.
#pragma unroll
            for (int t = 0; t < NT; t++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int row = g + 8 * h, n = n0 + t * 8 + q * 2;
                    if (row >= M || n >= OC) continue;
                    float v[2];
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        v[j] = red[0][t * 4 + 2 * h + j][lane];
#pragma unroll
                        for (int w = 1; w < GEMV_WARPS; w++) v[j] += red[w][t * 4 + 2 * h + j][lane];
                    }
                    const size_t o = (size_t)row * ldo + n;
                    float p0 = 0.f, p1 = 0.f;
                    if (mode == GEMV_ADD) {
                        const bool first = tile == blockIdx.x;  // its residual values were fetched ahead
                        p0 = first ? pre_r[t][2 * h] : ((const float*)out)[o];
                        p1 = first ? pre_r[t][2 * h + 1] : n + 1 < OC ? ((const float*)out)[o + 1] : 0.f;
                    }
                    q3_store(out, o, n, OC, v[0], v[1], mode, p0, p1);
                }
            }
        } else if (warp == 0) {
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
