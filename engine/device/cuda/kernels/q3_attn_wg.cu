// q3_attn_wg.cu: the rotary block's prompt-chunk attention on Hopper
// (sm_90a only) with warpgroup MMAs and a TMA producer. It keeps
// q3_attn_prefill's grid (tiles, NH) and outputs, and takes
// FlashAttention-3's operand placement and producer warp (Shah et al.,
// 2024) without its register reallocation: a block of 160 threads, warps
// 0-3 the consumer warpgroup holding the tile's 64 query rows of one head,
// lane 0 of warp 4 the producer. Q is copied by cp.async; each 64-key tile
// of K and V comes from the paged cache by the TMA, through a tensor map
// of the layer's cache seen as rows of 128 dims (one a block, KV head and
// slot) in the 128-byte swizzle that wgmma reads, into two stages with a
// full and an empty mbarrier each. S = Q K^T is eight m64n64k16 wgmmas
// with both operands in shared memory; the online softmax runs on the
// accumulators in registers, whose layout is mma.sync's for each warp's 16
// rows (so fa_tile.cuh serves unchanged); O += P V takes P from those
// registers as the A operand and V from shared memory as an MN-major
// (transposed) B.
//
// Why: q3_attn_prefill's mma.sync chains at two blocks an SM ran the
// offline run's 16,384-token prefill attention at 89 TFLOP/s; the wgmma
// version with every thread copying was issue-bound on the ALU, and the
// producer warp takes the copies' instructions and two block barriers a
// tile off the warps that run the MMAs and the softmax (docs/cuda.md).
#define WG_BF16 1
#include "wg.cuh"
#include "fa_tile.cuh"

#define AW_HD 128
#define AW_BR 64                       // query rows of a tile (one wgmma M)
#define AW_BC 64                       // keys of a tile
#define AW_HALF (AW_BC * 128)          // bytes of 64 rows of 64 dims
#define AW_TILE (2 * AW_HALF)          // bytes of a 64 x 128 tile of Q, K or V
#define AW_SMEM (5 * AW_TILE + 1024)   // Q, two stages of K and V, and the swizzle's alignment

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// aw_swz is the byte offset of 16-byte chunk c (dims 8c .. 8c + 7) of row r
// of a 64 x 128 tile: dims 0-63 first, then 64-127, each half 64 rows of
// 128 bytes whose chunks the 128-byte swizzle permutes (chunk ^ row % 8;
// the tile is 1024-byte aligned).
__device__ __forceinline__ uint32_t aw_swz(int r, int c) {
    return (c >> 3) * AW_HALF + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// wgmma_rs_n64_tb: d(64 x 64) += A(64 x 16) B(16 x 64), A from registers
// (each warp's 16 rows in mma.sync's A fragment), B in shared memory with
// N contiguous (MN-major: the transpose flag): one 64-dim half of 16 keys
// of V, rows of 128 bytes, 8-row groups 1024 bytes apart (wg_desc).
__device__ __forceinline__ void wgmma_rs_n64_tb(float* d, const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// aw_fence keeps the compiler from moving uses of registers that a wgmma
// in flight reads or writes across its issue or its wait.
template <int N>
__device__ __forceinline__ void aw_fence(float* r) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}

// q3_attn_prefill_wg: the producer walks the tile's cache blocks in
// boxes of min(B, 64) keys x 64 dims through kmap and vmap (passed by
// value, first, as launchClusterRefs passes them); a box past the
// sequence's last key starts at row -box, which the TMA fills with zeros.
// The consumers wait on a stage's full barrier (the TMA's bytes), never
// copy and never meet a block barrier, and arrive on its empty one when
// their MMAs are done with it. In the last tile, where the sequence's last
// cache block may hold stale values past its last key, they zero those
// rows of V (P = 0 must not meet NaN; the keys there are masked).
#define AT_STAGES 2
extern "C" __global__ void __launch_bounds__(160, 2) q3_attn_prefill_wg(
    const __grid_constant__ TmaMap kmap, const __grid_constant__ TmaMap vmap, bf16_t* out, const bf16_t* qkv, const int* q_start, const int* q_len,
    const int* ctx_len, const int* tile_seq, const int* tile_q0, const int* block_tables, const int* bt_stride, int NH,
    int NKV, int B, float scale) {
    grid_dep_launch();
    extern __shared__ __align__(16) unsigned char aw_sm[];
    // Q; stage s's K at qs + (1 + 2s) AW_TILE, its V after it; then full[s]
    // at bars + 8s and empty[s] at bars + 8 (AT_STAGES + s).
    const uint32_t qs = (smem_u32(aw_sm) + 1023) & ~1023u, bars = qs + (1 + 2 * AT_STAGES) * AW_TILE;
    const PrefillTile pt = prefill_tile(q_start, q_len, ctx_len, tile_seq, tile_q0, block_tables, bt_stride, NH, NKV, AW_BR);
    const int q0 = pt.q0, h = pt.h, kvh = pt.kvh, len = pt.len, ctx = pt.ctx, qrow = pt.qrow, last = pt.last;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2;
    const int ntiles = last / AW_BC + 1;
    if (tid == 0) {
        for (int s = 0; s < AT_STAGES; s++) mbar_init(bars + 8 * s, 1), mbar_init(bars + 8 * (AT_STAGES + s), 128);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();  // the only block barrier: the producer leaves below
    if (warp == 4) {
        grid_dep_wait();  // this step's keys and values (q3_qk_rope_kv)
        if (lane == 0) {
            const int box = min(B, AW_BC);
            for (int t = 0; t < ntiles; t++) {
                const int s = t % AT_STAGES;
                if (t >= AT_STAGES) mbar_wait(bars + 8 * (AT_STAGES + s), (t / AT_STAGES - 1) & 1);
                const uint32_t ks = qs + (1 + 2 * s) * AW_TILE, vs = ks + AW_TILE, full = bars + 8 * s;
                mbar_expect(full, 2 * AW_TILE);
                for (int k = 0; k < AW_BC; k += box) {
                    const int j = t * AW_BC + k;
                    // the map's row of key j: its cache offset in rows of 128 dims
                    const int row = j <= last ? (int)kv_offset(pt.bt[kv_block(j, B)], kvh, kv_slot(j, B), NKV, B, 1) : -box;
#pragma unroll
                    for (int half = 0; half < 2; half++) {
                        tma_load(ks + half * AW_HALF + k * 128, &kmap, 64 * half, row, full, 0);
                        tma_load(vs + half * AW_HALF + k * 128, &vmap, 64 * half, row, full, 0);
                    }
                }
            }
        }
        return;
    }
    const int width = (NH + 2 * NKV) * AW_HD, C = NH * AW_HD;
    grid_dep_wait();
    {  // Q: rows past the chunk read as zeros
#pragma unroll
        for (int u = 0; u < AW_BR * 16 / 128; u++) {
            const int c = tid + 128 * u, r = c >> 4, ch = c & 15;
            const bool ok = q0 + r < len;
            cp16(qs + aw_swz(r, ch), qkv + (ok ? (size_t)(qrow + q0 + r) * width + h * AW_HD + ch * 8 : 0), ok);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        asm volatile("cp.async.wait_group 0;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync 1, 128;" ::: "memory");
    }
    const int r0 = warp * 16 + g;  // this thread's rows in the tile: r0 and r0 + 8
    const int qp0 = ctx + q0 + r0, qp1 = qp0 + 8;  // their absolute positions
    float o[16][4];
#pragma unroll
    for (int nt = 0; nt < 16; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
    float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;
    for (int t = 0; t < ntiles; t++) {
        const int k0 = t * AW_BC, s = t % AT_STAGES;
        const uint32_t ks = qs + (1 + 2 * s) * AW_TILE, vs = ks + AW_TILE;
        mbar_wait(bars + 8 * s, (t / AT_STAGES) & 1);
        float sc[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
        aw_fence<32>(&sc[0][0]);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < AW_HD / 16; kk++) {
            const uint32_t at = (kk >> 2) * AW_HALF + (kk & 3) * 32;
            wgmma_n64(&sc[0][0], wg_desc(qs + at), wg_desc(ks + at));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        aw_fence<32>(&sc[0][0]);
        uint32_t pa[4][4];
        auto pack = [](float lo, float hi) { return pack_bf2(lo, hi); };
        if (k0 + AW_BC - 1 <= min(ctx + q0, last)) {  // every key at or before every row: no mask
            fa_softmax_tile<16, true, false>(sc, o, pa, m0, m1, l0, l1, k0, qp0, qp1, last, scale, pack);
        } else {
            fa_softmax_tile<16, true>(sc, o, pa, m0, m1, l0, l1, k0, qp0, qp1, last, scale, pack);
        }
        if (k0 + AW_BC - 1 > last) {  // stale values past the last key: zeros
            for (int c = tid; c < (k0 + AW_BC - 1 - last) * 16; c += 128) {
                const int r = last - k0 + 1 + (c >> 4), ch = c & 15;
                asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(vs + aw_swz(r, ch)), "r"(0u) : "memory");
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            asm volatile("bar.sync 1, 128;" ::: "memory");
        }
        aw_fence<64>(&o[0][0]);
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++) asm volatile("" : "+r"(pa[kk][i])::"memory");
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int hd = 0; hd < 2; hd++) wgmma_rs_n64_tb(&o[8 * hd][0], pa[kk], wg_desc(vs + hd * AW_HALF + kk * 16 * 128));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        aw_fence<64>(&o[0][0]);
        mbar_arrive(bars + 8 * (AT_STAGES + s));  // this thread is done with the stage
    }
    fa_store<16>(out, o, l0, l1, qrow, q0 + r0, len, C, h * AW_HD, [](float lo, float hi) { return pack_bf2(lo, hi); });
}
#endif
