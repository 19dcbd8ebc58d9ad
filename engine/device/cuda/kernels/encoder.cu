// encoder.cu: token + position embedding into the fp32 residual stream.
#include "common.cuh"

// out (N, C) fp32 = wte[tokens[i]] + wpe[pos[i]]; wte (V, C), wpe (maxT, C) fp16.
extern "C" __global__ void encoder_forward(float* out, const int* tokens, const int* pos,
                                           const half_t* wte, const half_t* wpe, int N, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) return;
    int i = idx / C, c = idx % C;
    out[idx] = h2f(wte[(size_t)tokens[i] * C + c]) + h2f(wpe[(size_t)pos[i] * C + c]);
}
