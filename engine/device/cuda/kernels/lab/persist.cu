// persist.cu (lab): a probe of a persistent batch-1 decode loop for the
// rotary block. One block an SM runs every layer of a one-token step at
// position 0, where attention over the row's one key is its value: RMSNorm,
// q|k|v, attention, o_proj into the residual, RMSNorm, gate|up with SwiGLU,
// down_proj into the residual, with a grid-wide barrier after each of the
// five stages. Each block owns a contiguous run of each projection's
// weight rows and streams it into shared memory with bulk copies two
// projections ahead, so the weight reads go on while blocks wait at the
// barriers. lab_persist.go times it against the chain of kernels.
#include "common.cuh"

struct ProbeLayer {
    const bf16_t* qkv;   // ((NH + 2 NKV) HD, C)
    const bf16_t* o;     // (C, NH HD)
    const bf16_t* gu;    // (2I, C): gate j at row 2j, up j at row 2j + 1
    const bf16_t* down;  // (C, I)
    const float* ln1;
    const float* ln2;
};

#define PB_THREADS 512
#define PB_WARPS (PB_THREADS / 32)
#define PB_STAGE_BYTES (96 * 1024)  // one projection's rows of a block
#define PB_MAXK 3072                // the widest input staged (I)
#define PB_PIECE 16384              // bytes of one bulk copy
#define PB_HD 128

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t pb_smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// pb_grid_sync: every block of the grid (all resident) adds one to a
// counter that only grows and waits until it reaches the next multiple of
// the grid size (target, this block's count of barriers so far times the
// grid, from the counter's value at launch): one atomic a block, no reset.
__device__ __forceinline__ void pb_grid_sync(unsigned* count, unsigned& target) {
    __syncthreads();
    target += gridDim.x;
    if (threadIdx.x == 0) {
        __threadfence();
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
        unsigned v;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
        } while ((int)(v - target) < 0);
    }
    __syncthreads();
}

struct PbJob {
    const bf16_t* w;
    int oc, k;
};

// pb_job: projection j of the run (4 a layer: q|k|v, o, gate|up, down).
__device__ __forceinline__ PbJob pb_job(const ProbeLayer* layers, int j, int C, int QKV, int A, int I) {
    const ProbeLayer& L = layers[j >> 2];
    switch (j & 3) {
        case 0: return {L.qkv, QKV, C};
        case 1: return {L.o, C, A};
        case 2: return {L.gu, 2 * I, C};
        default: return {L.down, C, I};
    }
}

// pb_rows: a block's rows of an oc-row projection (even, for SwiGLU's pairs).
__device__ __forceinline__ int pb_rows(int oc) { return ((oc + gridDim.x - 1) / gridDim.x + 1) & ~1; }
#endif

extern "C" __global__ void __launch_bounds__(PB_THREADS, 1)
    persist_probe(const ProbeLayer* layers, int nLayers, float* x, float* qkv, float* att, float* hidden, unsigned* bar,
                  unsigned bar0, int C, int NH, int NKV, int I, float eps, int noBarriers) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char pb_sm[];
    // wbuf: projection j's buffer (j & 1).
    auto wbuf = [&](int j) { return (bf16_t*)(pb_sm + (j & 1) * PB_STAGE_BYTES); };
    float* in = (float*)(pb_sm + 2 * PB_STAGE_BYTES);  // 16-byte aligned: read as float4
    unsigned long long* mbar = (unsigned long long*)(in + PB_MAXK);
    float* red = (float*)(mbar + 2);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int QKV = (NH + 2 * NKV) * PB_HD, A = NH * PB_HD, jobs = 4 * nLayers;
    if (tid == 0) {
        for (int b = 0; b < 2; b++) mbar_init(pb_smem(&mbar[b]), 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    // issue: projection j's rows of this block into buffer j & 1 (the
    // buffer's readers are done: callers sync first).
    auto issue = [&](int j) {
        if (j >= jobs || tid != 0) return;
        const PbJob p = pb_job(layers, j, C, QKV, A, I);
        const int R = pb_rows(p.oc), r0 = blockIdx.x * R, n = max(0, min(R, p.oc - r0));
        const uint32_t bytes = (uint32_t)n * p.k * 2, b = pb_smem(&mbar[j & 1]);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        mbar_expect(b, bytes);
        const unsigned char* src = (const unsigned char*)(p.w + (size_t)r0 * p.k);
        const uint32_t dst = pb_smem(wbuf(j));
        for (uint32_t o = 0; o < bytes; o += PB_PIECE) {
            const uint32_t len = min((uint32_t)PB_PIECE, bytes - o);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst + o),
                         "l"(src + o), "r"(len), "r"(b)
                         : "memory");
        }
    };
    // dot: row r of buffer j & 1 (k wide) with in.
    auto dot = [&](int j, int r, int k) {
        const bf16_t* w = wbuf(j) + (size_t)r * k;
        float s = 0.f;
        for (int c = lane * 8; c < k; c += 256) {
            const uint4 v = *(const uint4*)(w + c);
            const float4 a = *(const float4*)(in + c), b = *(const float4*)(in + c + 4);
            s += bf2f((bf16_t)(v.x & 0xffff)) * a.x + bf2f((bf16_t)(v.x >> 16)) * a.y + bf2f((bf16_t)(v.y & 0xffff)) * a.z +
                 bf2f((bf16_t)(v.y >> 16)) * a.w + bf2f((bf16_t)(v.z & 0xffff)) * b.x + bf2f((bf16_t)(v.z >> 16)) * b.y +
                 bf2f((bf16_t)(v.w & 0xffff)) * b.z + bf2f((bf16_t)(v.w >> 16)) * b.w;
        }
#pragma unroll
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        return s;
    };
    // stage_norm: in = RMSNorm(x; w), read through L2 (other blocks wrote x).
    auto stage_norm = [&](const float* w) {
        float ss = 0.f;
        for (int c = tid; c < C; c += PB_THREADS) {
            const float v = __ldcg(x + c);
            in[c] = v;
            ss += v * v;
        }
#pragma unroll
        for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0) red[warp] = ss;
        __syncthreads();
        float t = 0.f;
        for (int i = 0; i < PB_WARPS; i++) t += red[i];
        const float inv = rsqrtf(t / C + eps);
        for (int c = tid; c < C; c += PB_THREADS) in[c] = in[c] * inv * w[c];
        __syncthreads();
    };
    auto stage_in = [&](const float* src, int k) {
        for (int c = tid; c < k; c += PB_THREADS) in[c] = __ldcg(src + c);
        __syncthreads();
    };
    unsigned target = bar0;  // the barrier counter at launch
    auto sync_grid = [&]() {
        if (noBarriers)
            __syncthreads();
        else
            pb_grid_sync(bar, target);
    };
    // wait_job: projection j's rows are in its buffer.
    auto wait_job = [&](int j) { mbar_wait(pb_smem(&mbar[j & 1]), (j >> 1) & 1); };
    // done_job: j's buffer is free for projection j + 2; then the grid waits
    // for every block's part of j.
    auto done_job = [&](int j) {
        __syncthreads();
        issue(j + 2);
        sync_grid();
    };
    // into_residual: x += projection j of the k-wide src (o_proj, down_proj).
    auto into_residual = [&](int j, const float* src, int k) {
        stage_in(src, k);
        wait_job(j);
        const int R = pb_rows(C), r0 = blockIdx.x * R, n = max(0, min(R, C - r0));
        for (int r = warp; r < n; r += PB_WARPS) {
            const float s = dot(j, r, k);
            if (lane == 0) x[r0 + r] = __ldcg(x + r0 + r) + s;
        }
        done_job(j);
    };
    issue(0);
    issue(1);
    for (int l = 0; l < nLayers; l++) {
        const ProbeLayer& L = layers[l];
        const int j = 4 * l;
        // q|k|v of RMSNorm(x).
        stage_norm(L.ln1);
        wait_job(j);
        {
            const int R = pb_rows(QKV), r0 = blockIdx.x * R, n = max(0, min(R, QKV - r0));
            for (int r = warp; r < n; r += PB_WARPS) {
                const float s = dot(j, r, C);
                if (lane == 0) qkv[r0 + r] = s;
            }
        }
        done_job(j);
        // Attention over the row's one key: each query head's output is its
        // KV head's value.
        for (int e = blockIdx.x * PB_THREADS + tid; e < A; e += gridDim.x * PB_THREADS) {
            const int h = e / PB_HD, kvh = h / (NH / NKV);
            att[e] = __ldcg(qkv + (NH + NKV + kvh) * PB_HD + e % PB_HD);
        }
        sync_grid();
        into_residual(j + 1, att, A);
        // gate|up of RMSNorm(x), SwiGLU.
        stage_norm(L.ln2);
        wait_job(j + 2);
        {
            const int R = pb_rows(2 * I), r0 = blockIdx.x * R, n = max(0, min(R, 2 * I - r0));
            for (int p = warp; 2 * p < n; p += PB_WARPS) {
                const float g = dot(j + 2, 2 * p, C), u = dot(j + 2, 2 * p + 1, C);
                if (lane == 0) hidden[r0 / 2 + p] = g / (1.f + __expf(-g)) * u;
            }
        }
        done_job(j + 2);
        into_residual(j + 3, hidden, I);
    }
#endif
}
