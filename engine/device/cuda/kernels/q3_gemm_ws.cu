// q3_gemm_ws.cu: the rotary block's gate|up projection of steps of many
// token rows on Hopper (sm_90a only), warp-specialised TMA + warpgroup MMA
// in bf16 with the epilogue cuBLASLt has no form of: SwiGLU applied
// (q3_gemm_ws_swiglu), so that a step neither writes nor reads back the
// gate|up activations (q3_swiglu took 2.9 ms of a 31.5 ms 16,384-token
// step on the H100), and the same GEMM for q|k|v with q3_qk_rope_kv's work
// in its epilogue (q3_gemm_ws_qkv: the q/k RMSNorm and rotation, queries
// back into the q|k|v rows, keys and values into the paged cache; 2.8 ms
// of that step). q3_gemm_ws_out writes the sums as they are (the same
// mainloop, for checking it).
//
// A persistent grid (a block an SM, in clusters of one or two) walks 128 x
// 256 output tiles in groups of row tiles (ws_tile), so that the blocks at
// work at once share x rows and weight tiles in L2. A block is three
// warpgroups: the first's thread 0 is the producer, copying each k tile of
// 64 (x: 128 rows, 16 KB; W: 256 rows, 32 KB) by TMA into a ring of
// WS_STAGES stages in the 128-byte swizzle, each stage a full and an empty
// mbarrier; in a cluster of two each block loads its own x box and half of
// the weight box, multicast to both. The other two warpgroups are
// consumers, each 64 rows of the tile as m64n256k16 wgmmas with both
// operands in shared memory (wg.cuh's descriptors), 128 fp32 accumulators a
// thread. A consumer waits for its own MMAs over a stage and releases it at
// once (the other consumer's MMAs keep the tensor cores busy meanwhile; a
// release one k tile late measured the same), then applies SwiGLU into
// shared memory while the producer fills the next tile's stages; the
// global stores of those outputs run during the next tile's mainloop. On
// the H100 at 16,384 x 1,024 x 6,144 the mainloop alone took 242 us against
// cuBLASLt's 252-260 for the plain GEMM, the whole kernel 291. No
// setmaxnreg: the 168 registers a thread that 384 threads leave hold a
// consumer's 128 sums.
#define WG_BF16 1
#define WG_MAX_KT 1  // wg.cuh's one-block kernel is not instantiated here
#include "wg.cuh"

#define WS_BM 128
#define WS_BN 256
#define WS_BK 64
#define WS_STAGES 4
#define WS_A_BYTES (WS_BM * WS_BK * 2)
#define WS_B_BYTES (WS_BN * WS_BK * 2)
#define WS_STAGE (WS_A_BYTES + WS_B_BYTES)
#define WS_OUT_BYTES (64 * 128 * 2)                          // a consumer's 64 x 128 SwiGLU outputs, bf16
#define WS_SMEM (WS_STAGES * WS_STAGE + 2 * WS_OUT_BYTES + 1024)  // q3GemmWSSmem
#define WS_WBOX_ROWS 128  // weight rows a TMA box (q3GemmWSWeightBox): half a tile, one block's share in a cluster of two

#define WS_SWIGLU 0  // out (M, N / 2) bf16 = SiLU(acc[2j]) * acc[2j + 1]: gate|up weights interleaved
#define WS_OUT 1     // out (M, N) bf16 = acc
#define WS_QKV 2     // q3_qk_rope_kv's epilogue (WsQKV): out (M, N) the q|k|v rows, queries written

// WsQKV: what q3_gemm_ws_qkv's epilogue takes besides the GEMM's operands,
// as q3_qk_rope_kv (qwen3.cu): the layer's caches kc and vc ([block][NKV]
// [B][128]), the q_norm and k_norm weights (128 each), the step's rotation
// table rope ((M, 64) of (cos, sin)), each row's cache slot (< 0: none).
// N is (NH + 2 NKV) 128 with NH and NKV even, so that a 256-column tile is
// two heads of one kind.
struct WsQKV {
    bf16_t *kc, *vc;
    const float *qn, *kn;
    const float2* rope;
    const int* slots;
    int NH, NKV, B;
    float eps;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// wgmma_n256: d(64 x 256) += A(64 x 16) B(256 x 16)^T, both K-major in shared memory.
__device__ __forceinline__ void wgmma_n256(float* d, uint64_t a, uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 0;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(a), "l"(b));
}

// ws_tile is tile t's row tile m and column tile n: tiles run in groups of
// `group` row tiles (all of them: column tile outermost), column tiles
// within a group, so that the blocks at work at once cover a compact patch
// of the output and its x rows and weight tiles stay in L2 (column tile
// outermost streams all of x through L2 for each column tile).
__device__ __forceinline__ void ws_tile(int t, int mt, int nt, int group, int& m, int& n) {
    if (group <= 0 || group > mt) group = mt;
    const int per = group * nt, g = t / per, first = g * group;
    const int rows = min(group, mt - first), in = t - g * per;
    m = first + in % rows;
    n = in / rows;
}

// ws_release arrives on the empty barrier at bar (this block's offset) of
// every block of the cluster: each block's stages take the weight halves of
// all of them.
__device__ __forceinline__ void ws_release(uint32_t bar, uint32_t csize) {
    if (csize == 1) {
        mbar_arrive(bar);
        return;
    }
    for (uint32_t r = 0; r < csize; r++) {
        uint32_t remote;
        asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(r));
        // The default .release.cta: a cluster-scope release is a fence that
        // waits for this warp's outstanding global stores (the last tile's
        // outputs) at every k tile, which took the cluster form to half the
        // speed. The stage's reads are over once wgmma.wait_group returns.
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
    }
}

// ws_store_piece writes piece e (of 1,024: 64 rows of sixteen 16-byte
// chunks) of a consumer's staged SwiGLU outputs (ob, rows of 256 bytes,
// chunks swizzled by row) to out's rows m0 .. of M and columns c0 ...
__device__ __forceinline__ void ws_store_piece(uint32_t ob, int e, bf16_t* out, int m0, int c0, int M, int ldo) {
    const int r = e / 16, ch = e % 16;
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(ob + r * 256 + (ch ^ (r & 7)) * 16));
    if (m0 + r < M) *reinterpret_cast<uint4*>(out + (size_t)(m0 + r) * ldo + c0 + 8 * ch) = v;
}

// ws_qkv_row is the consumer-local row of warp's k-th piece store of row
// half h (ws_qkv_piece: head rows 2 i and 2 i + 1, i = warp + 4 k).
__device__ __forceinline__ int ws_qkv_row(int warp, int k, int h) {
    const int i = warp + 4 * k;
    return 16 * (i / 8) + i % 8 + 8 * h;
}

// ws_qkv_piece writes piece e (of 1,024) of a consumer's staged rows: ob
// holds 32 of its 64 rows (rows 16 w + g + 8 h, w 0..3, g 0..7, for row
// half h) as 64 head rows of 256 bytes, head row 2 i + hd being head hd of
// the tile (head0 + hd) at row 16 (i / 8) + i % 8 + 8 h, 16-byte chunks
// swizzled by head row. A warp's store is two head rows of one token row
// (piece e = tid + 128 k is row ws_qkv_row(warp, k, h)): query heads go to
// their columns of the q|k|v rows (N wide), key and value heads to the
// cache at the row's slot.
__device__ __forceinline__ void ws_qkv_piece(uint32_t ob, int e, bf16_t* out, int m0, int head0, int h, int M, int N, int slot,
                                             const WsQKV& p) {
    const int sr = e / 16, ch = e % 16, head = head0 + sr % 2, row = m0 + ws_qkv_row(e / 32 % 4, e / 128, h);
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(ob + sr * 256 + (ch ^ (sr & 7)) * 16));
    if (row >= M) return;
    bf16_t* dst;
    if (head < p.NH) {
        dst = out + (size_t)row * N + head * 128;
    } else {
        if (slot < 0) return;
        const bool isV = head >= p.NH + p.NKV;
        dst = (isV ? p.vc : p.kc) + kv_offset(kv_block(slot, p.B), head - p.NH - (isV ? p.NKV : 0), kv_slot(slot, p.B), p.NKV, p.B, 128);
    }
    *reinterpret_cast<uint4*>(dst + 8 * ch) = v;
}

// pack_rn rounds two floats into a bf16 pair (lo in the low half) in one
// instruction, where pack_bf2 rounds each in integer arithmetic.
__device__ __forceinline__ uint32_t pack_rn(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// bf_round is x rounded to bf16: the q|k|v sums as cuBLASLt would have
// written them for q3_qk_rope_kv, whose arithmetic the epilogue repeats.
__device__ __forceinline__ float bf_round(float x) {
    unsigned short b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(x));
    return __uint_as_float((uint32_t)b << 16);
}

// ws_qkv_stage puts row half h of the thread's fragments of both heads
// (acc: 32 n8 groups, head hd's 16 from 16 hd; rows 16 warp + g + 8 h,
// dims 8 j + 2 qd, + 1) into ob as ws_qkv_piece reads it. Query and key
// heads (NORM) go through RMSNorm with the weights nw (in shared memory) and
// the rotation by the table's row m0 + r, whose 16 (cos, sin) pairs the
// thread loads once for both heads: dims d and d + 64 are groups j and
// j + 8 of the same thread, so only the sums of squares cross lanes (the
// quad's four). Value heads are stored as they are. The sums are rounded to
// bf16 first, as cuBLASLt's output that q3_qk_rope_kv reads.
template <bool NORM>
__device__ __forceinline__ void ws_qkv_stage(float* acc, int h, uint32_t ob, int warp, int lane, int m0, int M, const float* nw,
                                             const float2* rope, float eps) {
    const int g = lane / 4, qd = lane % 4, i = 8 * warp + g;
    float inv[2];
    if (NORM) {
#pragma unroll
        for (int hd = 0; hd < 2; hd++) {
            float ss = 0.f;
#pragma unroll
            for (int j = 0; j < 16; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float& x = acc[64 * hd + 4 * j + 2 * h + e];
                    x = bf_round(x);
                    ss = fmaf(x, x, ss);
                }
            ss += __shfl_xor_sync(0xffffffffu, ss, 1);
            ss += __shfl_xor_sync(0xffffffffu, ss, 2);
            inv[hd] = rsqrtf(ss / 128 + eps);
        }
    }
    const float4* cs = reinterpret_cast<const float4*>(rope + (size_t)min(m0 + 16 * warp + g + 8 * h, M - 1) * 64 + 2 * qd);
#pragma unroll
    for (int jb = 0; jb < 8; jb += 4) {
        float4 c[4];
        if (NORM)
#pragma unroll
            for (int j = 0; j < 4; j++) c[j] = __ldg(cs + 4 * (jb + j));  // (cos, sin) of dims 8 j + 2 qd and + 1
#pragma unroll
        for (int hd = 0; hd < 2; hd++) {
            const int sr = 2 * i + hd, sw = sr & 7;
            const uint32_t row_at = ob + sr * 256 + 4 * qd;
            const float* a = acc + 64 * hd + 2 * h;
#pragma unroll
            for (int j = jb; j < jb + 4; j++) {
                uint32_t lo = pack_rn(a[4 * j], a[4 * j + 1]), hi = pack_rn(a[4 * (j + 8)], a[4 * (j + 8) + 1]);
                if (NORM) {
                    const float2 wl = *reinterpret_cast<const float2*>(nw + 8 * j + 2 * qd);
                    const float2 wh = *reinterpret_cast<const float2*>(nw + 64 + 8 * j + 2 * qd);
                    const float l0 = a[4 * j] * inv[hd] * wl.x, l1 = a[4 * j + 1] * inv[hd] * wl.y;
                    const float h0 = a[4 * (j + 8)] * inv[hd] * wh.x, h1 = a[4 * (j + 8) + 1] * inv[hd] * wh.y;
                    const float4 cj = c[j - jb];
                    lo = pack_rn(l0 * cj.x - h0 * cj.y, l1 * cj.z - h1 * cj.w);
                    hi = pack_rn(h0 * cj.x + l0 * cj.y, h1 * cj.z + l1 * cj.w);
                }
                asm volatile("st.shared.u32 [%0], %1;" ::"r"(row_at + ((j ^ sw) * 16)), "r"(lo) : "memory");
                asm volatile("st.shared.u32 [%0], %1;" ::"r"(row_at + (((j + 8) ^ sw) * 16)), "r"(hi) : "memory");
            }
        }
    }
}

template <int MODE>
__device__ __forceinline__ void q3_gemm_ws_impl(const void* tx, const void* tw, bf16_t* out, int M, int K, int N, int group,
                                                const WsQKV& qkv) {
    extern __shared__ unsigned char ws_raw[];
    __shared__ __align__(8) uint64_t full[WS_STAGES], empty[WS_STAGES];
    __shared__ __align__(16) float ws_nw[MODE == WS_QKV ? 256 : 1];  // q_norm's weights, then k_norm's
    const uint32_t base = (smem_u32(ws_raw) + 1023u) & ~1023u, fb = smem_u32(full), eb = smem_u32(empty);
    const int wg = threadIdx.x / 128, KT = K / WS_BK;
    // A cluster of csize blocks (1 or 2) takes csize row tiles of one column
    // tile at a time: block crank the row tile csize m + crank, each loading
    // its x box and its half of the weight box, the latter multicast to all.
    const uint32_t crank = cluster_rank(), csize = cluster_size();
    const int cid = blockIdx.y / csize, nclusters = gridDim.y / csize;
    const int mt = (M + WS_BM - 1) / WS_BM, mgroups = (mt + csize - 1) / csize, nt = N / WS_BN, tiles = mgroups * nt;
    const int cgroup = group > 0 ? max(1, group / (int)csize) : 0;
    grid_dep_launch();
    if (threadIdx.x == 0) {
        for (int s = 0; s < WS_STAGES; s++) {
            mbar_init(fb + 8 * s, 1);          // the producer's arrival with the stage's bytes
            mbar_init(eb + 8 * s, 8 * csize);  // lane 0 of each consumer warp of every block of the cluster
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (MODE == WS_QKV && threadIdx.x >= 128) {  // weights: no kernel writes them
        const int d = threadIdx.x - 128;
        ws_nw[d] = d < 128 ? qkv.qn[d] : qkv.kn[d - 128];
    }
    // Every block's barriers (and WS_QKV's weights) are ready before any
    // block multicasts onto them.
    if (csize > 1)
        cluster_sync();
    else
        __syncthreads();
    grid_dep_wait();  // x and out belong to earlier kernels
    if (wg == 0) {
        if (threadIdx.x == 0) {
            const unsigned short mask = (unsigned short)((1u << csize) - 1);
            const int half = WS_BN / (int)csize;  // weight rows this block loads
            int it = 0;  // k tiles issued by this block so far: stage it % WS_STAGES, round it / WS_STAGES
            for (int t = cid; t < tiles; t += nclusters) {
                int mi, ni;
                ws_tile(t, mgroups, nt, cgroup, mi, ni);
                const int m0 = (mi * (int)csize + (int)crank) * WS_BM, n0 = ni * WS_BN;
                for (int kt = 0; kt < KT; kt++, it++) {
                    const int s = it % WS_STAGES;
                    // A fresh barrier counts its phase before the first as complete: the first round passes.
                    mbar_wait(eb + 8 * s, ((it / WS_STAGES) & 1) ^ 1);
                    mbar_expect(fb + 8 * s, WS_STAGE);  // x, and every block's weight half
                    const uint32_t st = base + s * WS_STAGE;
                    tma_load(st, tx, kt * WS_BK, m0, fb + 8 * s, 0);
                    for (int h = (int)crank * half; h < ((int)crank + 1) * half; h += WS_WBOX_ROWS)
                        tma_load(st + WS_A_BYTES + h * WS_BK * 2, tw, kt * WS_BK, n0 + h, fb + 8 * s, csize > 1 ? mask : 0);
                }
            }
        }
    } else {
        const int c = wg - 1, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, tid = threadIdx.x % 128;
        const uint32_t ob = base + WS_STAGES * WS_STAGE + c * WS_OUT_BYTES;
        // The last tile's staged outputs go out during this tile's mainloop,
        // a piece a k tile while the warp waits for its MMAs (pm0 < 0: none;
        // pc0 is their first column, or WS_QKV's 2 head0 + row half).
        int it = 0, pm0 = -1, pc0 = 0, pdone = 0;
        int pslot = -1;  // WS_QKV's keys and values: lane k < 8 holds the slot of the warp's k-th piece row
        auto store_piece = [&](int e) {
            if (MODE == WS_SWIGLU) ws_store_piece(ob, e, out, pm0, pc0, M, N / 2);
            if (MODE == WS_QKV)
                ws_qkv_piece(ob, e, out, pm0, pc0 / 2, pc0 % 2, M, N, __shfl_sync(0xffffffffu, pslot, e / 128), qkv);
        };
        for (int t = cid; t < tiles; t += nclusters) {
            int mi, ni;
            ws_tile(t, mgroups, nt, cgroup, mi, ni);
            const int m0 = (mi * (int)csize + (int)crank) * WS_BM + 64 * c, n0 = ni * WS_BN;
            float acc[128];
#pragma unroll
            for (int i = 0; i < 128; i++) acc[i] = 0.f;
#pragma unroll
            for (int i = 0; i < 128; i++) asm volatile("" : "+f"(acc[i])::"memory");
            for (int kt = 0; kt < KT; kt++, it++) {
                const int s = it % WS_STAGES;
                mbar_wait(fb + 8 * s, (it / WS_STAGES) & 1);
                const uint32_t a = base + s * WS_STAGE + c * (64 * 128), b = base + s * WS_STAGE + WS_A_BYTES;
                asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < WS_BK / 16; kk++) wgmma_n256(acc, wg_desc(a + kk * 32), wg_desc(b + kk * 32));
                asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
                if (MODE != WS_OUT && pm0 >= 0 && pdone < 8) store_piece(tid + 128 * pdone++);
                asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
                if (lane == 0) ws_release(eb + 8 * s, csize);  // this warp is done with the stage
            }
            for (; MODE != WS_OUT && pm0 >= 0 && pdone < 8; pdone++) store_piece(tid + 128 * pdone);
#pragma unroll
            for (int i = 0; i < 128; i++) asm volatile("" : "+f"(acc[i])::"memory");
            // Thread (warp, lane) holds rows 16 warp + lane / 4 (+ 8) and columns
            // 8 j + 2 (lane % 4), + 1 of each n8 group j (mma.sync's layout).
            // SwiGLU's outputs go through shared memory (ob: this consumer's 64
            // rows of 256 bytes, 16-byte chunks swizzled by row) so that the
            // global stores are whole 16-byte pieces of rows, a warp two rows
            // at a time: straight from the fragments they were 8-byte pieces of
            // eight rows, four times the L2 write traffic. q3_gemm_ws_out (a
            // check of the mainloop) stores from the fragments.
            if (MODE == WS_SWIGLU) {
                asm volatile("bar.sync %0, 128;" ::"r"(1 + c) : "memory");  // the last tile's rows are out
                // Lane (g, q) holds gate and up of output 4 j + q of rows g and
                // g + 8 (of its warp's 16) for each n8 group j, and stores it
                // alone (no shuffles to gather a quad's four), rounded by
                // cvt.rn: this part of the epilogue does not overlap the
                // mainloop, so its instructions are the kernel's (tanh.approx
                // for the sigmoid would save a MUFU op but is ~2^-11 off,
                // several times bf16's rounding in SiLU's negative tail).
                const int r0 = 16 * warp + lane / 4, sw = r0 & 7;  // rows r0 and r0 + 8 share the swizzle
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint32_t row_at = ob + (r0 + 8 * h) * 256 + 2 * (lane % 4);
#pragma unroll
                    for (int j = 0; j < WS_BN / 8; j++) {
                        const float gate = acc[4 * j + 2 * h], up = acc[4 * j + 2 * h + 1];
                        const float v = __fdividef(gate, 1.f + __expf(-gate)) * up;
                        unsigned short b;
                        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(v));
                        const uint32_t at = row_at + (((j / 2) ^ sw) * 16) + 8 * (j % 2);
                        asm volatile("st.shared.u16 [%0], %1;" ::"r"(at), "h"(b) : "memory");
                    }
                }
                asm volatile("bar.sync %0, 128;" ::"r"(1 + c) : "memory");
                pm0 = m0, pc0 = n0 / 2, pdone = 0;  // out during the next tile's mainloop, or after the last
            } else if (MODE == WS_QKV) {
                // The tile is two heads of one kind, staged half its rows at a
                // time in ob (ws_qkv_stage): the first half goes out at once,
                // the second during the next tile's mainloop.
                const int head0 = n0 / 128;
                const bool norm = head0 < qkv.NH + qkv.NKV;
                const float* nw = ws_nw + (head0 < qkv.NH ? 0 : 128);
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    asm volatile("bar.sync %0, 128;" ::"r"(1 + c) : "memory");  // ob's last rows are out
                    // A key or value piece's slot is fetched once a row, here
                    // (it arrives while the rows are staged), and passed to the
                    // store by a shuffle: a load in the store would stall the
                    // mainloop the deferred half runs in.
                    if (head0 >= qkv.NH && lane < 8) {
                        const int row = m0 + ws_qkv_row(warp, lane, h);
                        pslot = row < M ? qkv.slots[row] : -1;
                    }
                    if (norm)
                        ws_qkv_stage<true>(acc, h, ob, warp, lane, m0, M, nw, qkv.rope, qkv.eps);
                    else
                        ws_qkv_stage<false>(acc, h, ob, warp, lane, m0, M, nullptr, nullptr, 0.f);
                    asm volatile("bar.sync %0, 128;" ::"r"(1 + c) : "memory");
                    pm0 = m0, pc0 = 2 * head0 + h, pdone = 0;
                    if (h == 0) {
#pragma unroll
                        for (int e = 0; e < 8; e++) store_piece(tid + 128 * e);
                        pdone = 8;
                    }
                }
            } else {
#pragma unroll
                for (int j = 0; j < WS_BN / 8; j++) {
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int row = m0 + 16 * warp + lane / 4 + 8 * h, col = n0 + 8 * j + 2 * (lane % 4);
                        if (row < M) *reinterpret_cast<uint32_t*>(out + (size_t)row * N + col) = pack_bf2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
                    }
                }
            }
        }
        for (; MODE != WS_OUT && pm0 >= 0 && pdone < 8; pdone++) store_piece(tid + 128 * pdone);
    }
    // No block leaves while another may still multicast into its stages or
    // arrive on its barriers.
    if (csize > 1) cluster_sync();
}
#define WS_BODY(MODE, QKV) q3_gemm_ws_impl<MODE>(&tx, &tw, out, M, K, N, group, QKV);
#else
#define WS_BODY(MODE, QKV)
#endif

// Grid: (1, G) in clusters of (1, C, 1), C 1 or 2, G a multiple of C and at
// most one block an SM (the tiles are walked in a loop), 384 threads,
// WS_SMEM bytes of dynamic shared memory. tx maps x (M x K, boxes of 128
// rows x 64), tw W (N x K, boxes of 128 rows x 64); K a multiple of
// 64, N of 256; x rows past M read as zeros and are not stored; group: the
// tile order's row tiles a group (ws_tile; 0: column tile outermost).
extern "C" __global__ void __launch_bounds__(384, 1)
    q3_gemm_ws_swiglu(const __grid_constant__ TmaMap tx, const __grid_constant__ TmaMap tw, bf16_t* out, int M, int K, int N, int group) {
    WS_BODY(WS_SWIGLU, WsQKV{})
}

extern "C" __global__ void __launch_bounds__(384, 1)
    q3_gemm_ws_out(const __grid_constant__ TmaMap tx, const __grid_constant__ TmaMap tw, bf16_t* out, int M, int K, int N, int group) {
    WS_BODY(WS_OUT, WsQKV{})
}

// q3_gemm_ws_qkv: out the q|k|v rows (M x N, N = (NH + 2 NKV) 128, NH and
// NKV even), of which it writes the query columns, normalised and rotated;
// keys (normalised, rotated) and values go to kc and vc at slots (WsQKV).
extern "C" __global__ void __launch_bounds__(384, 1)
    q3_gemm_ws_qkv(const __grid_constant__ TmaMap tx, const __grid_constant__ TmaMap tw, bf16_t* out, int M, int K, int N, int group,
                   bf16_t* kc, bf16_t* vc, const float* qn, const float* kn, const float2* rope, const int* slots, int NH, int NKV,
                   int B, float eps) {
    WS_BODY(WS_QKV, (WsQKV{kc, vc, qn, kn, rope, slots, NH, NKV, B, eps}))
}
