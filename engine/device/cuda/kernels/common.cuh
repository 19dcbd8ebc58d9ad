// common.cuh: what every roseinfer kernel shares. fp16 is stored as a raw
// 16-bit integer and converted with PTX, so no CUDA header is needed and any
// NVRTC (11.x to 13.x) compiles the kernels without an include path.
#pragma once

typedef unsigned short half_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float h2f(half_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ half_t f2h(float f) {
    half_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// bf16 is stored the same way (the rotary block's weights and activations).
typedef unsigned short bf16_t;

__device__ __forceinline__ float bf2f(bf16_t h) { return __uint_as_float((uint32_t)h << 16); }

// f2bf rounds to the nearest bf16, ties to even; NaN stays NaN.
__device__ __forceinline__ bf16_t f2bf(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);
}

// pack_bf2 rounds two floats into a bf16 pair, lo in the low half.
__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi) {
    return (uint32_t)f2bf(lo) | ((uint32_t)f2bf(hi) << 16);
}

// Programmatic dependent launch (Hopper; no-ops elsewhere and when a kernel
// was launched without the attribute). Every kernel signals at its start
// that the next kernel in the stream may be scheduled (grid_dep_launch), and
// calls grid_dep_wait before it reads anything an earlier kernel wrote or
// writes anything: the wait returns once all earlier kernels have completed
// and their memory is visible. What comes before the wait may read only
// what no kernel of this step writes (weights, the step's inputs copied
// from the host, KV cache entries of earlier steps: each step's first
// kernels launch without the attribute, so earlier steps have ended), so a
// kernel's weight fetch overlaps the previous kernel's tail and the launch
// latency.
__device__ __forceinline__ void grid_dep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// mbarriers (Hopper): a block's waits on its own TMA and bulk copies
// (wg.cuh, lab/persist.cu).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// mbar_expect: this thread's arrival, announcing bytes of TMA traffic.
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// mbar_arrive: this thread's arrival, without traffic.
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n.reg .pred P1;\nMBAR_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
        "@!P1 bra MBAR_WAIT;\n}" ::"r"(bar),
        "r"(parity)
        : "memory");
}
#endif

// unpack8 turns a 16-byte load of 8 halves into floats.
__device__ __forceinline__ void unpack8(uint4 u, float* f) {
    const half_t* h = reinterpret_cast<const half_t*>(&u);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = h2f(h[i]);
}

// unpack_bf8 turns a 16-byte load of 8 bf16 into floats (exactly).
__device__ __forceinline__ void unpack_bf8(uint4 u, float* f) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Logit order, shared by the sampler and the LM head's tile maxima: NaN
// counts as -inf.
__device__ __forceinline__ float finite_or_neginf(float x) { return x != x ? NEG_INF : x; }

// float_key orders floats as unsigned integers (larger float -> larger key);
// -0 maps to +0's key, since the CPU rule compares floats and -0 == +0.
__device__ __forceinline__ uint32_t float_key(float x) {
    uint32_t b = __float_as_uint(x);
    if (b == 0x80000000u) b = 0u;
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_float(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// kv_block and kv_slot are position p's block-table index and slot for a
// power-of-two block size B (the rotary block's kernels; initRotary checks
// it): a shift and a mask, where a runtime division per key cost its decode
// attention a third of its instructions. __ffs(B) is loop-invariant, so
// loops compute it once. GPT-2's kernels divide: their tests cover odd B.
__device__ __forceinline__ int kv_block(int p, int B) { return p >> (__ffs(B) - 1); }
__device__ __forceinline__ int kv_slot(int p, int B) { return p & (B - 1); }

// Paged KV cache, one layer: k and v each [num_blocks][NH][B][HD] halves, so
// one (block, head) is a contiguous B*HD run that a warp reads coalesced.
__device__ __forceinline__ size_t kv_offset(int block, int head, int slot, int NH, int B, int HD) {
    return ((size_t)(block * NH + head) * B + slot) * HD;
}

// dec_row_head maps a decode-row attention block of grid (rows, NKV, *) to
// its entry index j (into dec_seqs) and KV head. The GPU starts blocks in
// index order and the host lists the entries longest context first, in runs
// of equal context: dec_runs[2j] and dec_runs[2j + 1] are the first entry and
// the length n of j's run. A run's n * NKV blocks take its KV heads one after
// another, each over the run's n entries, so a step of equal contexts keeps
// the order of one KV head at a time, and a step of mixed contexts starts its
// longest rows, every KV head, first (plan.go's longestFirst). dec_runs null
// is one run of all the rows. dec_row_head_at is the same for the block at
// linear index lin of a grid of rows rows.
__device__ __forceinline__ void dec_row_head_at(int& j, int& kvh, int lin, int rows, const int* dec_runs, int NKV) {
    int first = 0, n = rows;
    if (dec_runs != nullptr) {
        const int e = lin / NKV;
        first = dec_runs[2 * e], n = dec_runs[2 * e + 1];
    }
    const int off = lin - first * NKV;
    kvh = off / n, j = first + off % n;
}
__device__ __forceinline__ void dec_row_head(int& j, int& kvh, const int* dec_runs, int NKV) {
    dec_row_head_at(j, kvh, blockIdx.x + gridDim.x * blockIdx.y, gridDim.x, dec_runs, NKV);
}

// swiglu_cols is the first column c of the per (4, or 2 where I is not a
// multiple of 4) outputs of a row that this thread of the SwiGLU grid
// (q3_swiglu, q3f_swiglu; x over the columns, y striding over the rows)
// computes; false where c is past the row's I.
__device__ __forceinline__ bool swiglu_cols(int I, int& c, int& per) {
    per = I % 4 == 0 ? 4 : 2;
    c = per * (blockIdx.x * blockDim.x + threadIdx.x);
    return c < I;
}

// block_sum_256: the sum of v over a block of 256 threads (8 warps), in
// every thread; part is 8 floats of shared memory the block lends it.
__device__ __forceinline__ float block_sum_256(float v, float* part) {
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0.f;
#pragma unroll
    for (int k = 0; k < 8; k++) v += part[k];
    return v;
}

// q3_head_dst is where head h of a q|k|v row (row: its first element)
// goes after the q/k norm and rotation: a query back into the row, a key
// or value into the rotary block's cache at slot (head size 128), nowhere
// (null) for a key or value of slot < 0.
template <typename T>
__device__ __forceinline__ T* q3_head_dst(T* row, T* kc, T* vc, int h, int NH, int NKV, int slot, int B) {
    if (h < NH) return row + (size_t)h * 128;
    if (slot < 0) return nullptr;
    const bool isV = h >= NH + NKV;
    return (isV ? vc : kc) + kv_offset(kv_block(slot, B), isV ? h - NH - NKV : h - NH, kv_slot(slot, B), NKV, B, 128);
}
