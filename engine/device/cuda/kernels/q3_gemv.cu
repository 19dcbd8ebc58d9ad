// q3_gemv.cu: gemv.cuh's projections for the rotary block (bf16 weights and
// activations) at steps of at most 16 token rows. A layer is four of them
// beside the q/k rotation and attention: RMSNorm fused into the q|k|v and
// gate|up projections (q3_gemv_rms_*, also the LM head at the sampled rows),
// gate|up writing SwiGLU's output (GEMV_SWIGLU), o_proj and down_proj adding
// into the residual (q3_gemv_*, GEMV_ADD). No biases.
#include "gemv.cuh"

#define Q3_GEMV_KERNELS(MR, NT)                                                                                         \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) q3_gemv_rms_r##MR##_n##NT(                          \
        void* out, int ldo, const float* resid, const int* rows, const float* w, float eps, const bf16_t* W, int M,    \
        int K, int OC, int mode) {                                                                                      \
        gemv_impl<BF16, MR, NT, PRO_RMS>(out, ldo, nullptr, 0, resid, rows, w, nullptr, eps, W, nullptr, nullptr, M, K, \
                                         OC, mode);                                                                     \
    }                                                                                                                   \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) q3_gemv_r##MR##_n##NT(                              \
        void* out, int ldo, const bf16_t* x, int ldx, const bf16_t* W, int M, int K, int OC, int mode) {              \
        gemv_impl<BF16, MR, NT, PRO_NONE>(out, ldo, x, ldx, nullptr, nullptr, nullptr, nullptr, 0.f, W, nullptr,       \
                                          nullptr, M, K, OC, mode);                                                     \
    }

Q3_GEMV_KERNELS(8, 1)
Q3_GEMV_KERNELS(8, 2)
Q3_GEMV_KERNELS(16, 1)
Q3_GEMV_KERNELS(16, 2)
