// layernorm.cu: LayerNorm of the fp32 residual stream into fp16 GEMM input,
// and the residual add used when a GEMM cannot accumulate into fp32 itself.
//
// The residual add is normally fused into the cuBLASLt epilogue of the
// attention and MLP projections (beta = 1 into the fp32 stream), so a plain
// LayerNorm reads the already-updated residual: one pass, no extra buffer.
#include "common.cuh"
#include "ln_stage.cuh"

// ln_row_vec: one warp normalises one row (C % 128 == 0, C <= 128 * NV):
// lane owns 4 consecutive channels per 128, 16-byte loads, 8-byte stores.
// The LayerNorm weights are requested with the row, so the row's load and
// theirs overlap. The statistics are ln_mean_rstd's, as in the fused
// LayerNorms (ln_stage.cuh).
template <int NV>
__device__ __forceinline__ void ln_row_vec(half_t* o, const float* x, const float* w, const float* b, int C, float eps,
                                           int lane) {
    float4 v[NV], ww[NV], bv[NV];
    const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < NV; k++) {  // weights: before the wait
        int i = (k * 32 + lane) * 4;
        ww[k] = i < C ? *(const float4*)(w + i) : z;
        bv[k] = i < C ? *(const float4*)(b + i) : z;
    }
    grid_dep_wait();
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int i = (k * 32 + lane) * 4;
        v[k] = i < C ? *(const float4*)(x + i) : z;
    }
    float mean, rstd;
    ln_mean_rstd<NV>(v, C, eps, lane, mean, rstd);
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int i = (k * 32 + lane) * 4;
        if (i < C) {
            uint2 pk;
            pk.x = (uint32_t)f2h((v[k].x - mean) * rstd * ww[k].x + bv[k].x) | ((uint32_t)f2h((v[k].y - mean) * rstd * ww[k].y + bv[k].y) << 16);
            pk.y = (uint32_t)f2h((v[k].z - mean) * rstd * ww[k].z + bv[k].z) | ((uint32_t)f2h((v[k].w - mean) * rstd * ww[k].w + bv[k].w) << 16);
            *(uint2*)(o + i) = pk;
        }
    }
}

// out (R, C) fp16 = LN(inp[row]) * w + b, row = rows ? rows[r] : r. One warp
// per row; the row is read once into registers (C <= 32 * LN_MAX_PER_LANE;
// vectorised for C % 128 == 0 up to 1024) and mean and variance come from them. rows lets the final LayerNorm run
// only where a token is sampled.
#define LN_MAX_PER_LANE 64
extern "C" __global__ void layernorm_forward(half_t* out, const float* inp, const int* rows,
                                             const float* w, const float* b, int R, int C, float eps) {
    grid_dep_launch();
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= R) return;  // rows (an input) may be read before the wait
    int row = rows ? rows[r] : r;
    const float* x = inp + (size_t)row * C;
    half_t* o = out + (size_t)r * C;
    if (C % 128 == 0 && C <= 1024) {
        ln_row_vec<8>(o, x, w, b, C, eps, lane);
        return;
    }
    grid_dep_wait();
    float v[LN_MAX_PER_LANE];
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < LN_MAX_PER_LANE; k++) {
        int i = k * 32 + lane;
        v[k] = i < C ? x[i] : 0.f;
        sum += v[k];
    }
    float mean = warp_sum(sum) / C;
    float var = 0.f;
#pragma unroll
    for (int k = 0; k < LN_MAX_PER_LANE; k++) {
        int i = k * 32 + lane;
        float d = v[k] - mean;
        if (i < C) var += d * d;
    }
    float rstd = rsqrtf(warp_sum(var) / C + eps);
#pragma unroll
    for (int k = 0; k < LN_MAX_PER_LANE; k++) {
        int i = k * 32 + lane;
        if (i < C) o[i] = f2h((v[k] - mean) * rstd * w[i] + b[i]);
    }
}

// residual (N, C) fp32 += delta (N, C) fp16.
extern "C" __global__ void residual_add(float* residual, const half_t* delta, int n) {
    grid_dep_launch();
    grid_dep_wait();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) residual[i] += h2f(delta[i]);
}

// gather_rows_f16: out (R, C) = inp[rows[r]] (fp16), for tests and the LM
// head of layers that keep fp16 activations.
extern "C" __global__ void gather_rows_f16(half_t* out, const half_t* inp, const int* rows, int R, int C) {
    grid_dep_launch();
    grid_dep_wait();
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)R * C) return;
    int r = idx / C, c = idx % C;
    out[idx] = inp[(size_t)rows[r] * C + c];
}
