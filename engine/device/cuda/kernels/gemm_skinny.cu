// gemm_skinny.cu: the projections of steps with 17..128 token rows (decode at
// medium and large batch), where cuBLASLt's tiles for so few rows reach a
// fifth to a half of the memory bandwidth. out(M, OC) = x(M, K) @ W(OC, K)^T,
// then the epilogue of mma.cuh; x is fp16.
//
// A block owns BN output columns and all M rows over one slice of K
// (split-K), so the weights are read once and there are enough blocks for
// every SM. Its slice of x and W (at most a few hundred k) is copied into
// shared memory in one go (cp.async: one memory latency, weights requested
// before the grid wait), and its 8 warps (4 row groups x 2 column groups)
// run m16n8k16 MMAs from there with gemv.cu's k permutation: a lane's 8
// consecutive halves of a row serve as its fragments of two MMAs.
//
// The splits of a column tile form a thread-block cluster (Hopper): each
// block leaves its fp32 partial tile in its own shared memory, and after a
// cluster barrier block r sums rows r*M/S.. of every block's tile through
// distributed shared memory, in split order (results do not depend on
// timing), and applies the epilogue. No workspace, no atomics, no counters.
#include "common.cuh"
#include "mma.cuh"

#define SK_ROWS 128  // most rows (M)
#define SK_PAD 8     // halves of padding per staged row: rows start in different banks
#define SK_MAX_SPLITS 8  // maxSkinnySplits: the portable cluster size

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    uint64_t a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (uint32_t)a;
}

// cp16 copies 16 bytes global -> shared, or writes zeros when !valid.
__device__ __forceinline__ void cp16(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

// cluster_sync: arrive has release and wait acquire semantics by default
// (spelled out, the qualifiers need PTX ISA 8.0; older NVRTCs reject them).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
}

// ld_cluster4 reads 16 bytes of block rank's shared memory at the address
// this block's copy of the same variable has.
__device__ __forceinline__ float4 ld_cluster4(uint32_t local, int rank) {
    uint32_t remote;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(remote));
    return v;
}

// Grid (ceil(OC / BN), S), cluster (1, S, 1), 256 threads, dynamic shared
// memory max((SK_ROWS + BN) * (kl + SK_PAD) * 2, SK_ROWS * (BN + 4) * 4)
// bytes, kl the longest K slice (skinnySmem in gemv.go).
template <int BN>
__device__ __forceinline__ void gemm_skinny_impl(void* out, int ldo, const half_t* x, int ldx, const half_t* W,
                                                 const half_t* bias16, const float* bias32, int M, int K, int OC,
                                                 int mode) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(16) unsigned char sk_smem[];
    constexpr int WN = BN / 2;  // columns per warp
    constexpr int NT = WN / 8;  // 8-column MMA tiles per warp
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const int wm = warp >> 1, wn = warp & 1;  // 4 row groups of 32 x 2 column groups of WN
    const int tile = blockIdx.x, split = blockIdx.y, S = gridDim.y;
    const int nchunk = K / 32;
    const int c_beg = split * nchunk / S, c_end = (split + 1) * nchunk / S;
    const int kl = (c_end - c_beg) * 32, k0 = c_beg * 32;
    const int stride = kl + SK_PAD;  // halves per staged row
    half_t* xs = (half_t*)sk_smem;   // SK_ROWS rows
    half_t* ws = xs + SK_ROWS * stride;  // BN rows (output columns)
    const int n0 = tile * BN;
    const int pieces = kl / 8;  // 16-byte pieces per row; a warp copies rows, its lanes the pieces
    // The epilogue's columns are fixed per thread (see below): their bias,
    // a weight, is fetched now.
    const int ecol = (threadIdx.x % (BN / 4)) * 4;
    float eb[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int n = n0 + ecol + e;
        eb[e] = n >= OC ? 0.f : mode == GEMV_RESIDUAL ? bias32[n] : mode == GEMV_OUT32 ? 0.f : h2f(bias16[n]);
    }
    grid_dep_launch();
    // Weights first: they do not depend on earlier kernels.
    for (int r = warp; r < BN; r += 8) {
        const half_t* src = W + (size_t)min(n0 + r, OC - 1) * K + k0;  // columns past OC: never stored
        for (int p = lane; p < pieces; p += 32) cp16(smem_u32(ws + r * stride + p * 8), src + p * 8, true);
    }
    grid_dep_wait();  // x belongs to earlier kernels
    const int rows = (M + 15) & ~15;  // MMA row tiles that hold real rows
    for (int r = warp; r < rows; r += 8) {
        const half_t* src = x + (size_t)min(r, M - 1) * ldx + k0;
        for (int p = lane; p < pieces; p += 32) cp16(smem_u32(xs + r * stride + p * 8), src + p * 8, r < M);
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();

    float acc[2][NT][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[mt][t][0] = acc[mt][t][1] = acc[mt][t][2] = acc[mt][t][3] = 0.f;
    const int row0 = wm * 32;
    if (row0 < rows) {  // warp-uniform
        for (int c = 0; c < kl; c += 32) {
            const int k = c + q * 8;
            uint4 xa[2], xb[2], wv[NT];
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                xa[mt] = *(const uint4*)(xs + (row0 + mt * 16 + g) * stride + k);
                xb[mt] = *(const uint4*)(xs + (row0 + mt * 16 + g + 8) * stride + k);
            }
#pragma unroll
            for (int t = 0; t < NT; t++) wv[t] = *(const uint4*)(ws + (wn * WN + t * 8 + g) * stride + k);
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    mma16816(acc[mt][t], xa[mt].x, xb[mt].x, xa[mt].y, xb[mt].y, wv[t].x, wv[t].y);
                    mma16816(acc[mt][t], xa[mt].z, xb[mt].z, xa[mt].w, xb[mt].w, wv[t].z, wv[t].w);
                }
        }
    }
    // The partial tile, fp32 [SK_ROWS][BN + 4], replaces the staged slices.
    __syncthreads();
    float* part = (float*)sk_smem;
    constexpr int pstride = BN + 4;
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = row0 + mt * 16 + g + (e >= 2 ? 8 : 0), col = wn * WN + t * 8 + q * 2 + (e & 1);
                part[row * pstride + col] = acc[mt][t][e];
            }
    cluster_sync();  // every split's partial tile is written and visible
    // This block's rows of the tile: sums over the splits, then the epilogue.
    // Every split's 16 bytes are requested before any is added (in split
    // order: results do not depend on timing). blockDim.x is a multiple of
    // BN / 4, so a thread's four columns stay ecol.. for all its rows.
    const int r_beg = split * M / S, r_end = (split + 1) * M / S;
    for (int row = r_beg + threadIdx.x / (BN / 4); row < r_end; row += blockDim.x / (BN / 4)) {
        const uint32_t local = smem_u32(part + row * pstride + ecol);
        float4 v[SK_MAX_SPLITS];
#pragma unroll
        for (int sp = 0; sp < SK_MAX_SPLITS; sp++)
            if (sp < S) v[sp] = ld_cluster4(local, sp);
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int sp = 0; sp < SK_MAX_SPLITS; sp++)
            if (sp < S) s.x += v[sp].x, s.y += v[sp].y, s.z += v[sp].z, s.w += v[sp].w;
        const float s4[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int n = n0 + ecol + e;
            if (n >= OC) continue;
            const size_t o = (size_t)row * ldo + n;
            store_biased(out, o, s4[e] + eb[e], mode, mode == GEMV_RESIDUAL ? ((const float*)out)[o] : 0.f);
        }
    }
    cluster_sync();  // no block leaves while another still reads its tile
#else
    __trap();  // thread-block clusters need sm_90; the host never launches this elsewhere
#endif
}

#define GEMM_SKINNY(BN)                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) gemm_skinny_n##BN(                                            \
        void* out, int ldo, const half_t* x, int ldx, const half_t* W, const half_t* bias16, const float* bias32,    \
        int M, int K, int OC, int mode) {                                                                            \
        gemm_skinny_impl<BN>(out, ldo, x, ldx, W, bias16, bias32, M, K, OC, mode);                                   \
    }

GEMM_SKINNY(32)
GEMM_SKINNY(64)
