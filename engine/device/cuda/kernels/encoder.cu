// encoder.cu: token + position embedding into the fp32 residual stream.
#include "common.cuh"

// out (N, C) fp32 = wte[tokens[i]] + wpe[pos[i]]; wte (V, C), wpe (maxT, C) fp16.
extern "C" __global__ void encoder_forward(float* out, const int* tokens, const int* pos,
                                           const half_t* wte, const half_t* wpe, int N, int C) {
    grid_dep_launch();
    grid_dep_wait();
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) return;
    int i = idx / C, c = idx % C;
    out[idx] = h2f(wte[(size_t)tokens[i] * C + c]) + h2f(wpe[(size_t)pos[i] * C + c]);
}

// resolve_tokens: with overlap scheduling a decode step is queued before the
// host has seen the previous step's samples; rows with src_rows[i] >= 0 take
// their token from the previous step's output (still on the GPU).
extern "C" __global__ void resolve_tokens(int* tokens, const int* prev_out, const int* src_rows, int N) {
    grid_dep_launch();
    grid_dep_wait();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N && src_rows[i] >= 0) tokens[i] = prev_out[src_rows[i]];
}
