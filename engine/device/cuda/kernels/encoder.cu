// encoder.cu: token + position embedding into the fp32 residual stream.
#include "common.cuh"

// out (N, C) fp32 = wte[token(i)] + wpe[pos[i]]; wte (V, C), wpe (maxT, C)
// fp16. token(i) is tokens[i], or prev_out[src_rows[i]] where src_rows[i]
// >= 0: with overlap scheduling a decode step is queued before the host has
// seen the previous step's samples, which are still on the GPU. (Resolving
// them here rather than in a kernel of its own saves a launch that, as the
// step's first, cannot overlap anything.)
extern "C" __global__ void encoder_forward(float* out, const int* tokens, const int* prev_out, const int* src_rows,
                                           const int* pos, const half_t* wte, const half_t* wpe, int N, int C) {
    grid_dep_launch();
    grid_dep_wait();
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) return;
    int i = idx / C, c = idx % C;
    const int src = src_rows[i];
    const int tok = src >= 0 ? prev_out[src] : tokens[i];
    out[idx] = h2f(wte[(size_t)tok * C + c]) + h2f(wpe[(size_t)pos[i] * C + c]);
}
