// mma.cuh: what the tensor-core projection kernels (gemv.cuh, gemm_skinny.cu)
// share: streaming weight loads, the m16n8k16 MMA in fp16 and bf16, GPT-2's
// GELU, GPT-2's epilogues.
#pragma once
#include "common.cuh"

// Epilogues (mode).
#define GEMV_OUT16_BIAS 0       // out fp16 = acc + bias16
#define GEMV_OUT16_BIAS_GELU 1  // out fp16 = gelu(acc + bias16)
#define GEMV_RESIDUAL 2         // out fp32 += acc + bias32
#define GEMV_OUT32 3            // out fp32 = acc

// Weights are read once: keep them out of L1, where the activations live.
// volatile keeps a round's loads ahead of its MMAs (also volatile) in the
// emitted code, so they are all in flight together; without it the
// compiler sank each load next to its use and kept one in flight.
// L2::256B: a miss fetches the whole 256-byte piece of the weight row, which
// the neighbouring chunks read next (H100, overlapped batch-1 step 0.250-
// 0.252 -> 0.246-0.248 ms; the same hint on the KV loads changed nothing).
__device__ __forceinline__ uint4 ld_stream(const half_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// smem_u32 is the shared-memory address of p, as cp.async, ldmatrix, TMA
// and mbarrier instructions take it.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    uint64_t a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (uint32_t)a;
}

// cp16 copies 16 bytes global -> shared (dst a shared address, smem_u32),
// or writes zeros when !valid (nothing is read then).
__device__ __forceinline__ void cp16(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

// ldsm4 loads four 8 x 8 matrices of 16-bit elements from shared memory
// (lane l gives the address of row l % 8 of matrix l / 8); ldsm4_trans the
// same, each transposed.
__device__ __forceinline__ void ldsm4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void ldsm4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

// cluster_sync: arrive has release and wait acquire semantics by default
// (spelled out, the qualifiers need PTX ISA 8.0; older NVRTCs reject them).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
}

// prefetch_l1 brings p's line into L1 without waiting for it.
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

__device__ __forceinline__ void mma16816(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma16816_bf(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The 16-bit element types of weights and activations: fp16 (GPT-2's block)
// and bf16 (the rotary block's, which has no biases). A kernel templated on
// one takes its MMA and its conversions from it.
struct F16 {
    static constexpr bool bf16 = false;
    static __device__ __forceinline__ void mma(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                               uint32_t b1) {
        mma16816(c, a0, a1, a2, a3, b0, b1);
    }
    static __device__ __forceinline__ half_t from_f(float f) { return f2h(f); }
    static __device__ __forceinline__ float to_f(half_t h) { return h2f(h); }
};
struct BF16 {
    static constexpr bool bf16 = true;
    static __device__ __forceinline__ void mma(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                               uint32_t b1) {
        mma16816_bf(c, a0, a1, a2, a3, b0, b1);
    }
    static __device__ __forceinline__ half_t from_f(float f) { return f2bf(f); }
    static __device__ __forceinline__ float to_f(half_t h) { return bf2f(h); }
};

// gelu_new: GPT-2's tanh approximation, as cuBLASLt's GELU epilogue.
__device__ __forceinline__ float gelu_tanh(float x) {
    return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}


// epilogue stores one output element: out[o] of column n.
__device__ __forceinline__ void epilogue(void* out, size_t o, int n, float s, const half_t* bias16, const float* bias32,
                                         int mode) {
    switch (mode) {
        case GEMV_OUT16_BIAS:
            ((half_t*)out)[o] = f2h(s + h2f(bias16[n]));
            break;
        case GEMV_OUT16_BIAS_GELU:
            ((half_t*)out)[o] = f2h(gelu_tanh(s + h2f(bias16[n])));
            break;
        case GEMV_RESIDUAL:
            ((float*)out)[o] += s + bias32[n];
            break;
        default:
            ((float*)out)[o] = s;
    }
}

// bias_of is column n's bias in the epilogue mode (0 past OC), for callers
// that fetch it ahead of the epilogue.
__device__ __forceinline__ float bias_of(int n, int OC, const half_t* bias16, const float* bias32, int mode) {
    return n >= OC ? 0.f : mode == GEMV_RESIDUAL ? bias32[n] : mode == GEMV_OUT32 ? 0.f : h2f(bias16[n]);
}

// store_biased is epilogue() for a caller that fetched the bias (and, for
// the residual epilogue, the output's prior value) ahead of time: v is
// acc + bias already.
__device__ __forceinline__ void store_biased(void* out, size_t o, float v, int mode, float prior) {
    switch (mode) {
        case GEMV_OUT16_BIAS:
            ((half_t*)out)[o] = f2h(v);
            break;
        case GEMV_OUT16_BIAS_GELU:
            ((half_t*)out)[o] = f2h(gelu_tanh(v));
            break;
        case GEMV_RESIDUAL:
            ((float*)out)[o] = prior + v;
            break;
        default:
            ((float*)out)[o] = v;
    }
}
