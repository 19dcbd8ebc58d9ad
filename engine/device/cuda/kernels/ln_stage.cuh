// ln_stage.cuh: LayerNorm (GPT-2) and RMSNorm (the rotary block) fused into
// the small-batch projections (gemv.cuh, lmhead.cu): a block normalises its
// few input rows once and keeps them in shared memory in 16-bit, the
// arithmetic of layernorm_forward and q3_rmsnorm.
#pragma once
#include "common.cuh"
#include "mma.cuh"

#define GEMV_MAXC 1024   // largest K of the LayerNorm kernels (staged rows)
#define GEMV_XPAD 32     // halves of padding per staged row: quads of rows hit different banks

// ln_mean_rstd: the mean and 1 / sqrt(variance + eps) of a row of C
// channels that a warp holds as NV float4 a lane (channels (32k + lane) * 4
// .. +3, zeros past C): the statistics of every LayerNorm here (layernorm.cu
// and the fused ones), two passes over registers.
template <int NV>
__device__ __forceinline__ void ln_mean_rstd(const float4* v, int C, float eps, int lane, float& mean, float& rstd) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < NV; k++) sum += v[k].x + v[k].y + v[k].z + v[k].w;
    mean = warp_sum(sum) / C;
    float var = 0.f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int i = (k * 32 + lane) * 4;
        if (i < C) {
            float a = v[k].x - mean, b = v[k].y - mean, c = v[k].z - mean, d = v[k].w - mean;
            var += a * a + b * b + c * c + d * d;
        }
    }
    rstd = rsqrtf(warp_sum(var) / C + eps);
}

// stage_ln_rows: the block's warps write LayerNorm(resid[rows[m]]) (rows
// null: row m) for m < MR into xs (row stride xstride halves), rows M..MR-1
// as zeros. K <= GEMV_MAXC channels, a multiple of 128. The caller
// synchronises the block before reading xs.
template <int MR, int NWARPS>
__device__ __forceinline__ void stage_ln_rows(half_t* xs, int xstride, const float* resid, const int* rows,
                                              const float* lnw, const float* lnb, float eps, int M, int K) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int m = warp; m < MR; m += NWARPS) {
        half_t* o = xs + m * xstride;
        if (m >= M) {
            for (int c = lane * 8; c < K; c += 256) *(uint4*)(o + c) = zero;
            continue;
        }
        const float* xr = resid + (size_t)(rows ? rows[m] : m) * K;
        float4 v[GEMV_MAXC / 128];
#pragma unroll
        for (int k = 0; k < GEMV_MAXC / 128; k++) {
            int i = (k * 32 + lane) * 4;
            v[k] = i < K ? *(const float4*)(xr + i) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        float mean, rstd;
        ln_mean_rstd<GEMV_MAXC / 128>(v, K, eps, lane, mean, rstd);
#pragma unroll
        for (int k = 0; k < GEMV_MAXC / 128; k++) {
            int i = (k * 32 + lane) * 4;
            if (i < K) {
                float4 ww = *(const float4*)(lnw + i), bv = *(const float4*)(lnb + i);
                uint2 pk;
                pk.x = (uint32_t)f2h((v[k].x - mean) * rstd * ww.x + bv.x) | ((uint32_t)f2h((v[k].y - mean) * rstd * ww.y + bv.y) << 16);
                pk.y = (uint32_t)f2h((v[k].z - mean) * rstd * ww.z + bv.z) | ((uint32_t)f2h((v[k].w - mean) * rstd * ww.w + bv.w) << 16);
                *(uint2*)(o + i) = pk;
            }
        }
    }
}

// stage_rms_rows is stage_ln_rows for RMSNorm into E's 16-bit type:
// x / sqrt(mean(x^2) + eps) * w, rounded as q3_rmsnorm rounds it.
template <typename E, int MR, int NWARPS>
__device__ __forceinline__ void stage_rms_rows(half_t* xs, int xstride, const float* resid, const int* rows,
                                               const float* w, float eps, int M, int K) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int m = warp; m < MR; m += NWARPS) {
        half_t* o = xs + m * xstride;
        if (m >= M) {
            for (int c = lane * 8; c < K; c += 256) *(uint4*)(o + c) = zero;
            continue;
        }
        const float* xr = resid + (size_t)(rows ? rows[m] : m) * K;
        float4 v[GEMV_MAXC / 128];
        float ss = 0.f;
#pragma unroll
        for (int k = 0; k < GEMV_MAXC / 128; k++) {
            int i = (k * 32 + lane) * 4;
            v[k] = i < K ? *(const float4*)(xr + i) : make_float4(0.f, 0.f, 0.f, 0.f);
            ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
        }
        const float inv = rsqrtf(warp_sum(ss) / K + eps);
#pragma unroll
        for (int k = 0; k < GEMV_MAXC / 128; k++) {
            int i = (k * 32 + lane) * 4;
            if (i < K) {
                float4 g = *(const float4*)(w + i);
                uint2 pk;
                pk.x = (uint32_t)E::from_f(v[k].x * inv * g.x) | ((uint32_t)E::from_f(v[k].y * inv * g.y) << 16);
                pk.y = (uint32_t)E::from_f(v[k].z * inv * g.z) | ((uint32_t)E::from_f(v[k].w * inv * g.w) << 16);
                *(uint2*)(o + i) = pk;
            }
        }
    }
}

// prefetch_ln_weights: one warp brings the LayerNorm weights into this SM's
// L1 (a 128-byte line per lane) ahead of stage_ln_rows (RMSNorm passes its
// weight as both).
__device__ __forceinline__ void prefetch_ln_weights(const float* lnw, const float* lnb, int K) {
    for (int i = (threadIdx.x % 32) * 32; i < K; i += 32 * 32) {
        asm volatile("prefetch.global.L1 [%0];" ::"l"(lnw + i));
        asm volatile("prefetch.global.L1 [%0];" ::"l"(lnb + i));
    }
}
