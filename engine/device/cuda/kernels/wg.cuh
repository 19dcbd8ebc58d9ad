// wg.cuh: the TMA + warpgroup MMA projection kernel (Hopper, sm_90a only)
// that gemm_wg.cu (GPT-2's fp16 projections) and q3_wg.cu (the rotary
// block's bf16 ones) instantiate; gemm_wg.cu's header says how it works and
// why. An including file may first define WG_BF16 1 (bf16 operands and
// the bf16 epilogues; fp16 and GPT-2's epilogues otherwise) and WG_MAX_KT,
// the k tiles a block holds.
#pragma once
#include "common.cuh"
#include "mma.cuh"

#ifndef WG_BF16
#define WG_BF16 0
#endif
#if WG_BF16
#define WG_AB "bf16"  // the operands' type in wgmma's PTX
#else
#define WG_AB "f16"
#endif

// The bf16 epilogues (q3_wg.cu): mma.cuh's GEMV_* modes 0-3 and the
// LayerNorm fold's 4 and 5 are the others.
// The bf16 kernels take no bias (bias16 and bias32 are ignored).
#define WG_OUT_BF16 6     // out bf16 = acc
#define WG_SWIGLU_BF16 7  // out (M, OC / 2) bf16 = SiLU(acc[2j]) * acc[2j + 1]: gate|up weights interleaved

#define WG_BM 64      // rows of a tile (one wgmma M)
#define WG_BK 64      // halves of a k tile: one 128-byte swizzled row
#ifndef WG_MAX_KT
#define WG_MAX_KT 12  // wgMaxKT: k tiles a block holds (K <= 768)
#endif
#define WG_WBOX 16    // wgWeightBoxRows: weight rows per TMA box

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// tma_load copies the box at (c0 = column, c1 = row) of the tensor map at
// map (global memory) into shared memory at dst, completing on bar; with a
// cta mask other than 0, into dst and onto bar in every block of the mask
// (same offsets), as one read from L2.
__device__ __forceinline__ void tma_load(uint32_t dst, const void* map, int c0, int c1, uint32_t bar, unsigned short mask) {
    if (mask == 0)
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
            "l"(map), "r"(c0), "r"(c1), "r"(bar)
            : "memory");
    else
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
            "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
            : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ uint32_t cluster_size() {
    uint32_t n;
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

// wg_desc describes a K-major operand at addr (1024-byte aligned tile, plus
// 32 bytes per k16 step) laid out by the 128-byte swizzle: 8-row groups
// 1024 bytes apart.
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

// wgmma_n16: d(64 x 16) += A(64 x 16) B(16 x 16)^T, both K-major in shared memory.
__device__ __forceinline__ void wgmma_n16(float* d, uint64_t a, uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k16.f32." WG_AB "." WG_AB " "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, 1, 1, 1, 0, 0;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a), "l"(b));
}

// wgmma_n32: d(64 x 32) += A(64 x 16) B(32 x 16)^T, both K-major in shared memory.
__device__ __forceinline__ void wgmma_n32(float* d, uint64_t a, uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k16.f32." WG_AB "." WG_AB " "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, 1, 1, 1, 0, 0;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(a), "l"(b));
}

// wgmma_n48: d(64 x 48) += A(64 x 16) B(48 x 16)^T, both K-major in shared memory.
__device__ __forceinline__ void wgmma_n48(float* d, uint64_t a, uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n48k16.f32." WG_AB "." WG_AB " "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, %24, %25, 1, 1, 1, 0, 0;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
        : "l"(a), "l"(b));
}

// wgmma_n64: d(64 x 64) += A(64 x 16) B(64 x 16)^T, both K-major in shared memory.
__device__ __forceinline__ void wgmma_n64(float* d, uint64_t a, uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." WG_AB "." WG_AB " "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, 0, 0;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b));
}

template <int BN>
__device__ __forceinline__ void wgmma_step(float* d, uint64_t a, uint64_t b) {
    if constexpr (BN == 16) wgmma_n16(d, a, b);
    if constexpr (BN == 32) wgmma_n32(d, a, b);
    if constexpr (BN == 48) wgmma_n48(d, a, b);
    if constexpr (BN == 64) wgmma_n64(d, a, b);
}

// A warpgroup's epilogue over its 64 x BN tile at (m0, n0). Accumulator
// j * 4 + e of a thread: row 16 * warp + lane / 4 (+8 for e >= 2), column
// 8 * j + 2 * (lane % 4) (+1 for odd e), as mma.sync's. wg_epilogue_load
// fetches the thread's biases and (residual epilogue) prior output values
// once the grid wait is over, before the main loop, so their round trip
// overlaps it; loaded between the stores they would each wait for the
// one before (out may alias them, as far as the compiler knows).
template <int BN>
struct WgEpilogue {
    float bias[BN / 4], prior[BN / 2];
};

__device__ __forceinline__ int wg_row(int m0, int e) { return m0 + threadIdx.x / 32 % 4 * 16 + threadIdx.x % 32 / 4 + (e >> 1) * 8; }
__device__ __forceinline__ int wg_col(int n0, int j, int e) { return n0 + j * 8 + threadIdx.x % 4 * 2 + (e & 1); }

// With K split over the grid's z (split: block z has slice z of gridDim.z),
// the residual epilogue adds each slice's sum into out with
// red.global.add instead of reading the prior value (slices land in any
// order, so the fp32 sums may differ in their last bits from run to run);
// the first slice adds the bias.
template <int BN>
__device__ __forceinline__ void wg_epilogue_load(WgEpilogue<BN>& ep, int m0, int n0, const void* out, int ldo, const half_t* bias16,
                                                 const float* bias32, int M, int OC, int mode, bool split) {
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = wg_row(m0, e), col = wg_col(n0, j, e);
            if (e < 2) ep.bias[j * 2 + e] = WG_BF16 || split && blockIdx.z > 0 ? 0.f : bias_of(col, OC, bias16, bias32, mode);
            ep.prior[j * 4 + e] = !split && mode == GEMV_RESIDUAL && row < M && col < OC ? ((const float*)out)[(size_t)row * ldo + col] : 0.f;
        }
}

__device__ __forceinline__ void red_add2(float* p, float a, float b) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
}

template <int BN>
__device__ __forceinline__ void wg_store(const float* acc, const WgEpilogue<BN>& ep, int m0, int n0, void* out, int ldo, int M, int OC, int mode,
                                         bool split) {
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = wg_row(m0, e), col = wg_col(n0, j, e);
            if (row >= M || col >= OC) continue;
            const size_t o = (size_t)row * ldo + col;
            const float v = acc[j * 4 + e] + ep.bias[j * 2 + (e & 1)];
            if (WG_BF16 && (mode == WG_OUT_BF16 || mode == WG_SWIGLU_BF16)) {
                if (e & 1) continue;  // columns col and col + 1 (OC is a multiple of BN), as one store
                const float v1 = acc[j * 4 + e + 1] + ep.bias[j * 2 + 1];
                if (mode == WG_OUT_BF16)
                    *reinterpret_cast<uint32_t*>((bf16_t*)out + o) = pack_bf2(v, v1);
                else  // (gate, up) of output column col / 2 of rows of ldo
                    ((bf16_t*)out)[(size_t)row * ldo + col / 2] = f2bf(v / (1.f + __expf(-v)) * v1);
            } else if (!split) {
                store_biased(out, o, v, mode, ep.prior[j * 4 + e]);
            } else if ((e & 1) == 0) {  // columns col and col + 1 (OC is a multiple of BN)
                red_add2((float*)out + o, v, acc[j * 4 + e + 1] + ep.bias[j * 2 + 1]);
            }
        }
}

// The LayerNorm fold (KIND WG_LN): the LayerNorm between the attention
// output projection and fc runs in no kernel of its own. With x the
// residual row after attproj, gamma / beta the LayerNorm's, mean and rstd
// the row's:
//   LN(x) W^T + b = rstd (x * gamma) W^T - rstd mean s + b',
//   s = gamma W^T, b' = beta W^T + b (per output column, gemm_wg.go),
// so attproj's epilogue (WG_RESIDUAL_LNSTATS) also writes x * gamma in fp16
// (fc's x) and adds its columns' share of the row's sum and sum of squares
// into stats (2 floats a row, zeroed when the step starts), and fc's
// epilogue (WG_OUT16_LNFOLD_GELU) applies rstd, mean, s and b' (the
// variance as E[x^2] - mean^2 in fp32: the sums come from many blocks).
// Why: a LayerNorm kernel costs ~1.75 us inside a batch-128 graph (24 of
// them knocked out: 42 us), most of it the grid boundary, not its work;
// folded, the batch-128 step is 10-12 us shorter on the H100
// (docs/cuda.md). The LayerNorm before qkv stays a kernel: fcproj's K slices add
// into the residual in any order, so no block sees a row's final values.
#define WG_RESIDUAL_LNSTATS 4   // out fp32 += acc + bias32; x16 = fp16(out * lns); stats += (sum, sum of squares)
#define WG_OUT16_LNFOLD_GELU 5  // out fp16 = gelu(rstd acc - rstd mean lns + bias32), (mean, rstd) from stats

template <int BN>
struct WgLN {
    float g[BN / 4];         // lns of the thread's columns: gamma (stats) or s (fold)
    float b[BN / 4];         // fold: b' (bias32) of the thread's columns
    float mean[2], rstd[2];  // fold: the thread's two rows
};

// wg_ln_load fetches what the LayerNorm epilogues need once the grid wait
// is over: lns (and, fold, b') of the thread's columns and (fold) its rows'
// statistics. (The stats epilogue's bias32 and prior values come through
// wg_epilogue_load as the residual epilogue's.)
template <int BN>
__device__ __forceinline__ void wg_ln_load(WgLN<BN>& ln, int m0, int n0, const float* lns, const float* bias32, const float* stats, int M,
                                           int K, int mode, float eps) {
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            ln.g[j * 2 + e] = lns[wg_col(n0, j, e)];
            ln.b[j * 2 + e] = mode == WG_OUT16_LNFOLD_GELU ? bias32[wg_col(n0, j, e)] : 0.f;
        }
    if (mode != WG_OUT16_LNFOLD_GELU) return;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = wg_row(m0, 2 * h);
        const float2 st = row < M ? *reinterpret_cast<const float2*>(stats + 2 * row) : make_float2(0.f, 0.f);
        const float mean = st.x / K;
        ln.mean[h] = mean;
        ln.rstd[h] = rsqrtf(fmaxf(st.y / K - mean * mean, 0.f) + eps);
    }
}

template <int BN>
__device__ __forceinline__ void wg_store_ln(const float* acc, const WgEpilogue<BN>& ep, const WgLN<BN>& ln, int m0, int n0, void* out,
                                            int ldo, int M, int mode, float* stats, half_t* x16, int ldx) {  // x16 (M, ldx)
    float s1[2] = {0.f, 0.f}, s2[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int h = e >> 1, row = wg_row(m0, e), col = wg_col(n0, j, e);
            const float g = ln.g[j * 2 + (e & 1)];
            if (mode == WG_OUT16_LNFOLD_GELU) {
                if (row < M)
                    ((half_t*)out)[(size_t)row * ldo + col] =
                        f2h(gelu_tanh(ln.rstd[h] * acc[j * 4 + e] - ln.rstd[h] * ln.mean[h] * g + ln.b[j * 2 + (e & 1)]));
                continue;
            }
            const float v = ep.prior[j * 4 + e] + acc[j * 4 + e] + ep.bias[j * 2 + (e & 1)];
            if (row < M) {
                ((float*)out)[(size_t)row * ldo + col] = v;
                x16[(size_t)row * ldx + col] = f2h(v * g);
                s1[h] += v, s2[h] += v * v;
            }
        }
    if (mode == WG_OUT16_LNFOLD_GELU) return;
    // The four lanes of a quad hold the same two rows.
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
            s1[h] += __shfl_xor_sync(0xffffffffu, s1[h], o);
            s2[h] += __shfl_xor_sync(0xffffffffu, s2[h], o);
        }
        const int row = wg_row(m0, 2 * h);
        if (threadIdx.x % 4 == 0 && row < M) {
            atomicAdd(stats + 2 * row, s1[h]);
            atomicAdd(stats + 2 * row + 1, s2[h]);
        }
    }
}

// wg_mma: acc (64 x BN) = the x tiles at x0 + kt * xs times the weight
// tiles at w0 + kt * ws, k tile kt once its mbarrier bar0 + 8 kt (parity 0)
// says both have landed.
template <int BN>
__device__ __forceinline__ void wg_mma(float* acc, uint32_t x0, uint32_t xs, uint32_t w0, uint32_t ws, uint32_t bar0, int KT) {
#pragma unroll
    for (int i = 0; i < BN / 2; i++) acc[i] = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 2; i++) asm volatile("" : "+f"(acc[i])::"memory");
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    for (int kt = 0; kt < KT; kt++) {
        mbar_wait(bar0 + 8 * kt, 0);
        const uint32_t a = x0 + kt * xs, b = w0 + kt * ws;
#pragma unroll
        for (int kk = 0; kk < WG_BK / 16; kk++) wgmma_step<BN>(acc, wg_desc(a + kk * 32), wg_desc(b + kk * 32));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
    for (int i = 0; i < BN / 2; i++) asm volatile("" : "+f"(acc[i])::"memory");
}

// wg_ln_rest: a LayerNorm fold tile once its x boxes are asked for, the
// part gemm_wg_impl's WG_LN kind and gemm_wg_pair's phases share: the
// epilogue's inputs (the stats epilogue takes bias32 and the prior values
// as the residual one does; the fold takes neither, b' comes with
// wg_ln_load), the MMAs over k tiles xstride and wstride bytes apart from
// x0 and w0, the epilogue.
template <int BN>
__device__ __forceinline__ void wg_ln_rest(uint32_t x0, uint32_t xstride, uint32_t w0, uint32_t wstride, uint32_t bar0, int KT, int m0,
                                           int n0, void* out, int ldo, const half_t* bias16, const float* bias32, const float* lns,
                                           float* stats, half_t* x16, int M, int K, int OC, int mode, float eps) {
    WgEpilogue<BN> ep;
    wg_epilogue_load<BN>(ep, m0, n0, out, ldo, bias16, bias32, M, OC, mode == WG_RESIDUAL_LNSTATS ? GEMV_RESIDUAL : GEMV_OUT32, false);
    WgLN<BN> ln;
    wg_ln_load<BN>(ln, m0, n0, lns, bias32, stats, M, K, mode, eps);
    float acc[BN / 2];
    wg_mma<BN>(acc, x0, xstride, w0, wstride, bar0, KT);
    wg_store_ln<BN>(acc, ep, ln, m0, n0, out, ldo, M, mode, stats, x16, OC);
}

// Grid (ceil(M / 64), OC / BN, S) in clusters of (1, C, 1) (C = 1, 2 or 4:
// the blocks of a cluster share their x rows), 128 threads, KT * (64 + BN) *
// 128 + 1024 bytes of dynamic shared memory (wgSmem). tx maps x (rows x S K,
// box 64 x 64 halves), tw maps W (OC x S K, box WG_WBOX x 64); both are
// CUtensorMaps passed by value (__grid_constant__: the TMA reads them in
// parameter memory). K (a slice's) is a multiple of 64, at most WG_MAX_KT
// tiles; OC a multiple of BN * C; x's map covers every row of the last
// tile. S > 1 (the residual epilogue only) splits K: block z takes columns
// z K .. (z + 1) K - 1 of x and W and adds its sums into out (wg_store).
// KIND: WG_PLAIN (S = 1), WG_SPLIT, or WG_LN (S = 1, wg_ln_rest). Separate
// kernels, so the plain one keeps its registers and code: one kernel with
// the split epilogue (and a LayerNorm stage, docs/cuda.md) as
// runtime branches took 60 -> 140 registers for BN 32 and every projection
// ~2 us longer in a chain.
//
// Each block of a cluster fetches every C-th k tile of the x rows and the
// TMA multicasts it to all C (one L2 read instead of C: the column tiles
// all want the same x lines at the same moment, and L2 serves lines that
// many blocks ask for at once slowly, docs/cuda.md). The device launches
// C = 1 (gemm_wg.go: 3-9 us shorter overlapped steps at batch 48-128 on
// the H100 than C = 4); the tests launch 2 and 4.
#define WG_PLAIN 0
#define WG_SPLIT 1
#define WG_LN 2  // K in one slice, the LayerNorm fold's epilogues (modes WG_RESIDUAL_LNSTATS, WG_OUT16_LNFOLD_GELU)
template <int BN, int KIND>
__device__ __forceinline__ void gemm_wg_impl(const void* tx, const void* tw, void* out, int ldo, const half_t* bias16,
                                             const float* bias32, int M, int K, int OC, int mode, const float* lns, float* stats,
                                             half_t* x16, float eps) {
    extern __shared__ unsigned char wg_raw[];
    __shared__ __align__(8) uint64_t bars[WG_MAX_KT];
    constexpr int A_BYTES = WG_BM * WG_BK * 2, W_BYTES = BN * WG_BK * 2, STAGE = A_BYTES + W_BYTES;
    const int KT = K / WG_BK, n0 = blockIdx.y * BN, m0 = blockIdx.x * WG_BM, k0 = blockIdx.z * K;
    constexpr bool split = KIND == WG_SPLIT;
    const uint32_t base = (smem_u32(wg_raw) + 1023u) & ~1023u, bar0 = smem_u32(bars);
    const uint32_t crank = cluster_rank(), csize = cluster_size();

    grid_dep_launch();
    if (threadIdx.x == 0) {
        for (int kt = 0; kt < KT; kt++) mbar_init(bar0 + 8 * kt, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        // Weights first: no kernel of this step writes them.
        for (int kt = 0; kt < KT; kt++) {
            mbar_expect(bar0 + 8 * kt, STAGE);  // the weight and the x boxes of tile kt
            for (int j = 0; j < BN / WG_WBOX; j++)
                tma_load(base + kt * STAGE + A_BYTES + j * WG_WBOX * WG_BK * 2, tw, k0 + kt * WG_BK, n0 + j * WG_WBOX, bar0 + 8 * kt, 0);
        }
    }
    // Every block's barriers are initialised before anyone waits on them or
    // multicasts onto them.
    if (csize > 1)
        cluster_sync();
    else
        __syncthreads();
    grid_dep_wait();  // x and the output belong to earlier kernels
    if (threadIdx.x == 0) {
        const unsigned short mask = csize > 1 ? (unsigned short)((1u << csize) - 1) : 0;
        for (int kt = 0; kt < KT; kt++)
            if (kt % csize == crank) tma_load(base + kt * STAGE, tx, k0 + kt * WG_BK, m0, bar0 + 8 * kt, mask);
    }
    // Every x box this block multicasts lands in the others too: each
    // waits for all of its own (wg_mma) before its epilogue, so no block
    // leaves while its shared memory is still a destination.
    if constexpr (KIND == WG_LN) {
        wg_ln_rest<BN>(base, STAGE, base + A_BYTES, STAGE, bar0, KT, m0, n0, out, ldo, bias16, bias32, lns, stats, x16, M, K, OC, mode,
                       eps);
    } else {
        WgEpilogue<BN> ep;
        wg_epilogue_load<BN>(ep, m0, n0, out, ldo, bias16, bias32, M, OC, mode, split);
        float acc[BN / 2];
        wg_mma<BN>(acc, base, STAGE, base + A_BYTES, STAGE, bar0, KT);
        wg_store<BN>(acc, ep, m0, n0, out, ldo, M, OC, mode, split);
    }
}
#endif

// TmaMap is a CUtensorMap (cuda.h), opaque to the kernel.
struct __align__(64) TmaMap {
    unsigned long long opaque[16];
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_BODY(BN, KIND) gemm_wg_impl<BN, KIND>(&tx, &tw, out, ldo, bias16, bias32, M, K, OC, mode, lns, stats, x16, eps);
#else
#define WG_BODY(BN, KIND)
#endif

// gemm_wg_n<BN> (plain), gemm_wg_sk_n<BN> (split K) and gemm_wg_ln_n<BN>
// (the LayerNorm fold) take the same arguments; lns, stats, x16 and eps are
// the fold's (x16: rows of K halves).
#define WG_KERNEL(NAME, BN, KIND)                                                                                  \
    extern "C" __global__ void __launch_bounds__(128, 1)                                                           \
        NAME(const __grid_constant__ TmaMap tx, const __grid_constant__ TmaMap tw, void* out, int ldo, const half_t* bias16, const float* bias32, \
             int M, int K, int OC, int mode, const float* lns, float* stats, half_t* x16, float eps) {             \
        WG_BODY(BN, KIND)                                                                                          \
    }
