// gemv.cu: gemv.cuh's projections for GPT-2's block (fp16): LayerNorm fused
// (gemv_ln_*) or the input as it is (gemv_*).
#include "gemv.cuh"

#define GEMV_KERNELS(MR, NT)                                                                                          \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_ln_r##MR##_n##NT(                            \
        void* out, int ldo, const float* resid, const int* rows, const float* lnw, const float* lnb, float eps,       \
        const half_t* W, const half_t* bias16, const float* bias32, int M, int K, int OC, int mode) {                 \
        gemv_impl<F16, MR, NT, PRO_LN>(out, ldo, nullptr, 0, resid, rows, lnw, lnb, eps, W, bias16, bias32, M, K, OC, mode); \
    }                                                                                                                 \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_r##MR##_n##NT(                               \
        void* out, int ldo, const half_t* x, int ldx, const half_t* W, const half_t* bias16, const float* bias32,     \
        int M, int K, int OC, int mode) {                                                                             \
        gemv_impl<F16, MR, NT, PRO_NONE>(out, ldo, x, ldx, nullptr, nullptr, nullptr, nullptr, 0.f, W, bias16, bias32, M, K,  \
                                 OC, mode);                                                                           \
    }

GEMV_KERNELS(8, 1)
GEMV_KERNELS(8, 2)
GEMV_KERNELS(16, 1)
GEMV_KERNELS(16, 2)
