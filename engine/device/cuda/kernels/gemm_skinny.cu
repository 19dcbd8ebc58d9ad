// gemm_skinny.cu: the projections of steps with 17..32 token rows by
// default (decode at medium batch; cudabench -gemm-chain runs it up to 128),
// where cuBLASLt's tiles for so few rows leave most SMs idle.
// out(M, OC) = x(M, K) @ W(OC, K)^T, then the epilogue of mma.cuh; x is fp16.
//
// A block owns a BM x 64 output tile over one slice of K (split-K, so that
// a 768-column projection still has a block for most SMs) and streams its
// slice through a SK_STAGES-deep cp.async pipeline of 64-wide k tiles: at
// these sizes a slice is at most about a dozen tiles, so nearly all of it is
// requested at once and the tensor cores start on each tile as it lands.
// The column tiles all read the same x rows, so each block starts at its own
// k tile. Shared-memory rows are 128 bytes with their 16-byte pieces
// XOR-swizzled by row: ldmatrix's eight rows and cp.async's eight pieces of
// a row fall in different banks. Each k group of 4 warps (see
// gemm_skinny_impl) covers the tile, a warp a 32 x (64 * BM / 128) sub-tile
// of m16n8k16 MMAs fed by ldmatrix.
//
// The splits of a tile form a thread-block cluster (Hopper): each block
// leaves its fp32 partial tile in its own shared memory, and after a
// cluster barrier block r sums its share of the tile's elements over every
// block through distributed shared memory, in split order (results do not
// depend on timing), and applies the epilogue. No workspace, no atomics.
//
// Measured on the H100 (docs/cuda.md): faster than cuBLASLt at 24 and 32 rows
// (0.489-0.493 vs 0.530-0.533 and 0.527-0.534 vs 0.570-0.573 ms a decode
// step), slower at 48 and above (1.23-1.33 vs 0.99 ms at 128 for every
// depth, tile height and warp count tried), also with the slices staged
// by bulk copies (TMA) instead of cp.async. Back to back in a graph
// (cudabench -gemm-chain) cuBLASLt takes 5.4-5.8 us a projection at any
// of 24..128 rows, this kernel 5.5 at 32 and 10.7-11.2 at 128.
#include "common.cuh"
#include "mma.cuh"

#define SK_BN 64
#define SK_BK 64          // halves per k tile: a 128-byte shared-memory row
#define SK_STAGES 12      // skinnyStages: the default kernels' pipeline depth
#define SK_THREADS 128    // threads of a k group (4 warps)
#define SK_MAX_SPLITS 8   // maxSkinnySplits: the portable cluster size
#define SK_PSTRIDE (SK_BN + 4)  // floats per partial-tile row

// swz: byte offset of 16-byte piece c of row r in a tile of 128-byte rows.
__device__ __forceinline__ uint32_t swz(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

// ld_cluster4 reads 16 bytes of block rank's shared memory at the address
// this block's copy of the same variable has.
__device__ __forceinline__ float4 ld_cluster4(uint32_t local, int rank) {
    uint32_t remote;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(remote));
    return v;
}

// Grid (ceil(OC / 64), S, ceil(M / BM)), cluster (1, S, 1), KG * SK_THREADS
// threads, STAGES * (BM + 64) * 128 bytes of dynamic shared memory
// (skinnyKernel.smem in gemv.go). K is a multiple of SK_BK.
//
// KG k groups of 4 warps share each k tile: group kg runs its MMA steps
// kg, kg + KG, ... of the tile's four, and the groups' accumulators are
// summed in shared memory at the end, so a block has 4 * KG warps to hide
// its latencies with. With fewer stages than the slice has tiles, the rest
// of the block's weights are asked into L2 before the wait.
template <int BM, int KG, int STAGES>
__device__ __forceinline__ void gemm_skinny_impl(void* out, int ldo, const half_t* x, int ldx, const half_t* W,
                                                 const half_t* bias16, const float* bias32, int M, int K, int OC,
                                                 int mode) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char sk_smem[];
    constexpr int NTHREADS = KG * SK_THREADS;
    constexpr int WARPS_N = BM == 64 ? 2 : 4;  // a group's 4 warps: 2 x 2 or 1 x 4
    constexpr int WN = SK_BN / WARPS_N;        // columns per warp: 32 or 16
    constexpr int NT = WN / 8;                 // 8-column MMA tiles per warp
    constexpr int A_BYTES = BM * 128, STAGE_BYTES = (BM + SK_BN) * 128;
    const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const int kg = threadIdx.x / SK_THREADS, warp = (threadIdx.x % SK_THREADS) / 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int n0 = blockIdx.x * SK_BN, split = blockIdx.y, S = gridDim.y, m0 = blockIdx.z * BM;
    const int nk = K / SK_BK;
    const int kt_beg = split * nk / S, nkt = (split + 1) * nk / S - kt_beg;
    const uint32_t smem = smem_u32(sk_smem);
    // Tile i of the slice is k tile tile_kt(i): each column tile starts at
    // its own offset (a fixed order per block: results do not depend on
    // timing).
    const int rot = nkt > 0 ? blockIdx.x % nkt : 0;
    auto tile_kt = [&](int i) { return kt_beg + (i + rot < nkt ? i + rot : i + rot - nkt); };

    // A stage is the x tile (BM rows) then the W tile (64 rows), each row
    // one k tile of 64 halves. Thread t copies pieces t, t + NTHREADS, ...
    auto load_w = [&](int slot, int kt) {
        const uint32_t base = smem + slot * STAGE_BYTES + A_BYTES;
#pragma unroll
        for (int i = 0; i < SK_BN * 8 / NTHREADS; i++) {
            const int p = threadIdx.x + i * NTHREADS, r = p >> 3, c = p & 7;
            const half_t* src = W + (size_t)min(n0 + r, OC - 1) * K + kt * SK_BK + c * 8;  // past OC: never stored
            cp16(base + swz(r, c), src, true);
        }
    };
    auto load_x = [&](int slot, int kt) {
        const uint32_t base = smem + slot * STAGE_BYTES;
#pragma unroll
        for (int i = 0; i < (BM * 8 + NTHREADS - 1) / NTHREADS; i++) {
            const int p = threadIdx.x + i * NTHREADS, r = p >> 3, c = p & 7;
            if (BM * 8 % NTHREADS != 0 && p >= BM * 8) break;
            const int row = m0 + r;
            cp16(base + swz(r, c), x + (size_t)min(row, M - 1) * ldx + kt * SK_BK + c * 8, row < M);
        }
    };
    auto commit = [] { asm volatile("cp.async.commit_group;" ::: "memory"); };

    grid_dep_launch();
    // Weights first: they do not depend on earlier kernels.
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++)
        if (s < nkt) load_w(s, tile_kt(s));
    // The tiles that do not fit in the pipeline: into L2, a 128-byte row
    // of a weight tile per prefetch.
    for (int p = threadIdx.x; p < (nkt - (STAGES - 1)) * SK_BN; p += NTHREADS) {
        const int r = p % SK_BN, kt = tile_kt(STAGES - 1 + p / SK_BN);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(W + (size_t)min(n0 + r, OC - 1) * K + kt * SK_BK));
    }
    // Without splits each thread stores its own accumulators: their bias
    // (a weight) is fetched before the wait too.
    float eb[NT][2];
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
        for (int j = 0; j < 2; j++) eb[t][j] = S == 1 ? bias_of(n0 + wn * WN + t * 8 + q * 2 + j, OC, bias16, bias32, mode) : 0.f;
    grid_dep_wait();  // x and the output belong to earlier kernels
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nkt) load_x(s, tile_kt(s));
        commit();
    }

    float acc[2][NT][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[mt][t][0] = acc[mt][t][1] = acc[mt][t][2] = acc[mt][t][3] = 0.f;
    // ldmatrix addresses: A matrix j = lane / 8 is rows +8 (j & 1), k piece
    // +(j >> 1); B matrix j is columns +8 (j >> 1), k piece +(j & 1).
    const int a_row = wm * 32 + (lane & 15), a_pc = lane >> 4;
    const int b_row = wn * WN + (lane & 7) + ((lane >> 4) << 3), b_pc = (lane >> 3) & 1;
    for (int i = 0; i < nkt; i++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 2) : "memory");
        __syncthreads();  // tile i has landed for every thread; slot (i - 1) % STAGES is free
        const int next = i + STAGES - 1;
        if (next < nkt) {
            load_w(next % STAGES, tile_kt(next));
            load_x(next % STAGES, tile_kt(next));
        }
        commit();
        const uint32_t a_base = smem + (i % STAGES) * STAGE_BYTES, b_base = a_base + A_BYTES;
#pragma unroll
        for (int kk = kg; kk < SK_BK / 16; kk += KG) {
            uint32_t a[2][4], b[NT][2];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
                ldsm4(a_base + swz(a_row + mt * 16, kk * 2 + a_pc), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
#pragma unroll
            for (int t = 0; t < NT; t += 2)
                ldsm4(b_base + swz(b_row + t * 8, kk * 2 + b_pc), b[t][0], b[t][1], b[t + 1][0], b[t + 1][1]);
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int t = 0; t < NT; t++) mma16816(acc[mt][t], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b[t][0], b[t][1]);
        }
    }

    if (KG > 1) {  // groups 1.. leave their sums in shared memory, group 0 adds them
        asm volatile("cp.async.wait_all;" ::: "memory");
        __syncthreads();
        float* sums = (float*)sk_smem;  // [KG - 1][4 warps][2 * NT * 4][32 lanes]
        // sum_of: group grp's (>= 1) slot for this lane's accumulator (mt, t, e).
        auto sum_of = [&](int grp, int mt, int t, int e) -> float& {
            return sums[(((grp - 1) * 4 + warp) * 2 * NT * 4 + (mt * NT + t) * 4 + e) * 32 + lane];
        };
        auto each_acc = [&](auto f) {
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int t = 0; t < NT; t++)
#pragma unroll
                    for (int e = 0; e < 4; e++) f(mt, t, e);
        };
        if (kg > 0) each_acc([&](int mt, int t, int e) { sum_of(kg, mt, t, e) = acc[mt][t][e]; });
        __syncthreads();
        if (kg == 0)
#pragma unroll
            for (int o = 1; o < KG; o++) each_acc([&](int mt, int t, int e) { acc[mt][t][e] += sum_of(o, mt, t, e); });
        __syncthreads();  // sums are read before the partial tile reuses the memory
        if (kg > 0 && S == 1) return;
    }
    if (S == 1) {  // no cluster: store straight from group 0's accumulators
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int t = 0; t < NT; t++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = m0 + wm * 32 + mt * 16 + g + (e >= 2 ? 8 : 0), n = n0 + wn * WN + t * 8 + q * 2 + (e & 1);
                    if (row >= M || n >= OC) continue;
                    const size_t o = (size_t)row * ldo + n;
                    store_biased(out, o, acc[mt][t][e] + eb[t][e & 1], mode, mode == GEMV_RESIDUAL ? ((const float*)out)[o] : 0.f);
                }
        return;
    }
    // The partial tile, fp32 [BM][SK_PSTRIDE], replaces the pipeline's stages.
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    float* part = (float*)sk_smem;
    if (kg == 0)
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                const int row = wm * 32 + mt * 16 + g + (e >= 2 ? 8 : 0), col = wn * WN + t * 8 + q * 2;
                *(float2*)(part + row * SK_PSTRIDE + col) = make_float2(acc[mt][t][e], acc[mt][t][e + 1]);
            }
    cluster_sync();  // every split's partial tile is written and visible
    // This block's share of the tile's 4-column groups: sums over the
    // splits, every split's 16 bytes requested before any is added.
    for (int i = split * NTHREADS + threadIdx.x; i < BM * SK_BN / 4; i += S * NTHREADS) {
        const int r = i / (SK_BN / 4), c = (i % (SK_BN / 4)) * 4, row = m0 + r;
        if (row >= M) continue;
        const uint32_t local = smem_u32(part + r * SK_PSTRIDE + c);
        float4 v[SK_MAX_SPLITS];
#pragma unroll
        for (int sp = 0; sp < SK_MAX_SPLITS; sp++)
            if (sp < S) v[sp] = ld_cluster4(local, sp);
        float s4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int sp = 0; sp < SK_MAX_SPLITS; sp++)
            if (sp < S) s4[0] += v[sp].x, s4[1] += v[sp].y, s4[2] += v[sp].z, s4[3] += v[sp].w;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int n = n0 + c + e;
            if (n >= OC) continue;
            const size_t o = (size_t)row * ldo + n;
            store_biased(out, o, s4[e] + bias_of(n, OC, bias16, bias32, mode), mode,
                         mode == GEMV_RESIDUAL ? ((const float*)out)[o] : 0.f);
        }
    }
    cluster_sync();  // no block leaves while another still reads its tile
#else
    __trap();  // thread-block clusters need sm_90; the host never launches this elsewhere
#endif
}

#define GEMM_SKINNY(NAME, BM, KG, STAGES)                                                                     \
    extern "C" __global__ void __launch_bounds__(KG * SK_THREADS) NAME(                                          \
        void* out, int ldo, const half_t* x, int ldx, const half_t* W, const half_t* bias16, const float* bias32, \
        int M, int K, int OC, int mode) {                                                                         \
        gemm_skinny_impl<BM, KG, STAGES>(out, ldo, x, ldx, W, bias16, bias32, M, K, OC, mode);                    \
    }

// The defaults (skinnyKernels in gemv.go): 8 warps in two k groups.
GEMM_SKINNY(gemm_skinny_m32, 32, 2, SK_STAGES)
GEMM_SKINNY(gemm_skinny_m64, 64, 2, SK_STAGES)
// One k group of 4 warps, for cudabench -gemm-chain: at 24 and 32 rows a decode step took 0.511-0.516 and
// 0.559-0.568 ms with it vs 0.489-0.493 and 0.527-0.534 with two groups;
// four groups (0.507-0.511, 0.571-0.577) and 16 stages (0.539, 0.585-0.590)
// were slower (H100, docs/cuda.md).
GEMM_SKINNY(gemm_skinny_m32_g1, 32, 1, SK_STAGES)
