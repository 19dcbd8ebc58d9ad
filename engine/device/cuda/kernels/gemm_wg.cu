// gemm_wg.cu: the projections of medium decode steps (more rows than
// gemm_skinny takes, up to wgGemmRows = 128) whose K fits in shared
// memory whole (qkv, attproj and fc of GPT-2: K = 768) or, for the residual
// epilogue, in equal slices that add into the fp32 output (fcproj: K = 3072
// in 4), on Hopper's tensor memory accelerator and warpgroup MMA. out(M, OC)
// = x(M, K) @ W(OC, K)^T, then the epilogue of mma.cuh.
//
// Why not cuBLASLt: its kernels do not wait under programmatic dependent
// launch (docs/cuda.md), so each one starts only when the kernel
// before it has ended, and its weight fetch cannot overlap that kernel's
// tail. Why not gemm_skinny: at 64-128 rows its ldmatrix + mma.sync main
// loop takes 8.5-11.5 us a projection where cuBLASLt's wgmma kernels take
// 4.2-6.1 (cudabench -gemm-chain).
//
// A block of one warpgroup owns a 64 x BN output tile over all of K. Its
// first thread asks the TMA for every k tile of its weight rows before
// griddepcontrol.wait (weights are never written by a step), then for every
// k tile of its x rows after it; each k tile has its own mbarrier, so the
// warpgroup starts on tile 0 while the rest land. Boxes use the 128-byte
// swizzle, which is the layout wgmma's descriptors read (rows of 64 halves,
// 8-row groups of 1024 bytes). Built for sm_90a only (wgmma); elsewhere the
// kernels are empty and never launched (gemm_wg.go).
//
// Measured on the H100 (docs/cuda.md),
// decode step in a graph against cuBLASLt for the same projections: batch
// 48 0.556-0.563 ms against 0.624-0.687, batch 64 0.609-0.621 against
// 0.681-0.689, batch 80 0.747-0.751 against 0.777-0.780, batch 96
// 0.806-0.812 against 0.840-0.850, batch 128 0.940-0.948 against
// 0.965-0.986. From 65 rows a step takes two row tiles, each reading all
// of W (the second mostly padding at 80 rows), and still gains. So
// wgGemmRows (device.go) is 128.
#include "wg.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// wg_ln_tile: one 64 x BN tile of a LayerNorm fold projection (mode
// WG_RESIDUAL_LNSTATS or WG_OUT16_LNFOLD_GELU, out of OC columns) whose
// weight tiles at ws and the mbarriers at bar0 are armed: the x tiles of
// rows m0.. into xs, then wg_ln_rest.
template <int BN>
__device__ __forceinline__ void wg_ln_tile(const void* tx, uint32_t xs, uint32_t ws, uint32_t bar0, int KT, int m0, int n0, void* out,
                                           const float* bias32, const float* lns, float* stats, half_t* x16, int M, int K, int OC,
                                           int mode, float eps) {
    constexpr int X_BYTES = WG_BM * WG_BK * 2;
    if (threadIdx.x == 0)
        for (int kt = 0; kt < KT; kt++) tma_load(xs + kt * X_BYTES, tx, kt * WG_BK, m0, bar0 + 8 * kt, 0);
    wg_ln_rest<BN>(xs, X_BYTES, ws, BN * WG_BK * 2, bar0, KT, m0, n0, out, OC, nullptr, bias32, lns, stats, x16, M, K, OC, mode, eps);
}

// gemm_wg_pair: attproj with the stats epilogue (phase A) and fc with the
// fold epilogue (phase B) as one grid, a grid barrier between them, so fc
// does not wait for a kernel boundary. With two kernels, fc's blocks (one
// an SM, 174 KB at 128 rows) fit beside none of attproj's (124 KB): 92 of
// its 128 blocks could ask for their weights only once an attproj block
// had left its SM. Here every block asks for its fc weight tiles when it
// starts, beside its attproj tiles, and fc's x tiles go where attproj's
// were. Alternating with the two kernels (`ad76210`), three rounds,
// overlapped step: batch 128 0.826 -> 0.804-0.806 ms, batch 96 0.714-0.716
// -> 0.686-0.687, batch 64 0.532 -> 0.510-0.513, batch 48 0.475-0.477 ->
// 0.454-0.455 (H100, docs/cuda.md).
//
// The barrier needs every block resident at once: the grid is at most one
// block an SM (pairShape in gemm_wg.go), and it lets the next kernel launch
// (PDL) only after the barrier, so no dependent block can take an SM a
// block of this grid still needs. Block b takes attproj's tile b (hasA:
// b below its tile count) and fc's tile b (hasB), row tile fastest.
// counter (zeroed when the step starts with the statistics) counts the
// blocks through the barrier.
template <int BNA, int BNB>
__device__ __forceinline__ void gemm_wg_pair_impl(const void* txA, const void* twA, const void* txB, const void* twB, float* resid,
                                                  half_t* fcout, const float* biasA, const float* gammaA, const float* sB,
                                                  const float* bB, float* stats, half_t* x16, int M, int K, int OCA, int OCB,
                                                  float eps, unsigned* counter) {
    extern __shared__ unsigned char wg_raw[];
    __shared__ __align__(8) uint64_t bars[2 * WG_MAX_KT];
    constexpr int X_BYTES = WG_BM * WG_BK * 2, WA_BYTES = BNA * WG_BK * 2, WB_BYTES = BNB * WG_BK * 2;
    const int KT = K / WG_BK, mt = (M + WG_BM - 1) / WG_BM;
    const bool hasA = blockIdx.x < mt * (OCA / BNA), hasB = blockIdx.x < mt * (OCB / BNB);
    // x tiles (A's, then B's), A's weight tiles, B's weight tiles.
    const uint32_t xs = (smem_u32(wg_raw) + 1023u) & ~1023u, was = xs + KT * X_BYTES, wbs = was + KT * WA_BYTES;
    const uint32_t barA = smem_u32(bars), barB = barA + 8 * WG_MAX_KT;
    const int m0 = blockIdx.x % mt * WG_BM, n0A = blockIdx.x / mt * BNA, n0B = blockIdx.x / mt * BNB;
    if (threadIdx.x == 0) {
        for (int kt = 0; kt < KT; kt++) mbar_init(barA + 8 * kt, 1), mbar_init(barB + 8 * kt, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int kt = 0; kt < KT; kt++) {  // both phases' weights: no kernel of this step writes them
            if (hasA) {
                mbar_expect(barA + 8 * kt, X_BYTES + WA_BYTES);
                for (int j = 0; j < BNA / WG_WBOX; j++)
                    tma_load(was + kt * WA_BYTES + j * WG_WBOX * WG_BK * 2, twA, kt * WG_BK, n0A + j * WG_WBOX, barA + 8 * kt, 0);
            }
            if (hasB) {
                mbar_expect(barB + 8 * kt, X_BYTES + WB_BYTES);
                for (int j = 0; j < BNB / WG_WBOX; j++)
                    tma_load(wbs + kt * WB_BYTES + j * WG_WBOX * WG_BK * 2, twB, kt * WG_BK, n0B + j * WG_WBOX, barB + 8 * kt, 0);
            }
        }
    }
    __syncthreads();
    grid_dep_wait();  // the attention's output, the residual stream and the statistics belong to earlier kernels
    if (hasA) wg_ln_tile<BNA>(txA, xs, was, barA, KT, m0, n0A, resid, biasA, gammaA, stats, x16, M, K, OCA, WG_RESIDUAL_LNSTATS, eps);
    // Every block's attproj stores and row sums are visible before any
    // block reads x16 (by TMA: the async proxy) or the statistics.
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(counter, 1u);
        unsigned n;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(n) : "l"(counter) : "memory");
        } while (n < gridDim.x);
        asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    __syncthreads();
    grid_dep_launch();
    if (hasB) wg_ln_tile<BNB>(txB, xs, wbs, barB, KT, m0, n0B, fcout, bB, sB, stats, nullptr, M, K, OCB, WG_OUT16_LNFOLD_GELU, eps);
}
#endif

// Every width of wgTilesN (gemm_wg.go) for each kind.
#define WG_KERNELS(PREFIX, KIND)              \
    WG_KERNEL(gemm_wg_##PREFIX##n16, 16, KIND) \
    WG_KERNEL(gemm_wg_##PREFIX##n32, 32, KIND) \
    WG_KERNEL(gemm_wg_##PREFIX##n48, 48, KIND) \
    WG_KERNEL(gemm_wg_##PREFIX##n64, 64, KIND)
// gemm_wg_pair_n16_n<BNB>: attproj in 16-column tiles, fc in BNB-column
// ones (wgTileN's choices at 33-128 rows of GPT-2 small: 32 or 48). Grid
// max(tiles of either), 128 threads, KT * (64 + 16 + BNB) * 128 + 1024
// bytes of dynamic shared memory (wgPairSmem). txA maps the attention
// output, twA attproj's weights, txB fc's x (x16), twB fc's weights.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PAIR_BODY(BNB) gemm_wg_pair_impl<16, BNB>(&txA, &twA, &txB, &twB, resid, fcout, biasA, gammaA, sB, bB, stats, x16, M, K, OCA, OCB, eps, counter);
#else
#define PAIR_BODY(BNB)
#endif
#define PAIR_KERNEL(BNB)                                                                                                             \
    extern "C" __global__ void __launch_bounds__(128, 1) gemm_wg_pair_n16_n##BNB(                                                   \
        const __grid_constant__ TmaMap txA, const __grid_constant__ TmaMap twA, const __grid_constant__ TmaMap txB,                 \
        const __grid_constant__ TmaMap twB, float* resid, half_t* fcout, const float* biasA, const float* gammaA, const float* sB,  \
        const float* bB, float* stats, half_t* x16, int M, int K, int OCA, int OCB, float eps, unsigned* counter) {                 \
        PAIR_BODY(BNB)                                                                                                               \
    }
PAIR_KERNEL(16)
PAIR_KERNEL(32)
PAIR_KERNEL(48)
PAIR_KERNEL(64)
WG_KERNELS(, WG_PLAIN)
WG_KERNELS(sk_, WG_SPLIT)
WG_KERNELS(ln_, WG_LN)
