// encoder.cu: token + position embedding into the fp32 residual stream.
#include "common.cuh"

// out (N, C) fp32 = wte[token(i)] + wpe[pos[i]]; wte (V, C), wpe (maxT, C)
// fp16. token(i) is tokens[i], or prev_out[src_rows[i]] where src_rows[i]
// >= 0: with overlap scheduling a decode step is queued before the host has
// seen the previous step's samples, which are still on the GPU. (Resolving
// them here rather than in a kernel of its own saves a launch that, as the
// step's first, cannot overlap anything.) zero (nzero words) is cleared too:
// the LayerNorm fold's row statistics and barrier counters, which the step's
// later kernels add into; a memset before the encoder would put one more node
// ahead of it on every step's critical path.
extern "C" __global__ void encoder_forward(float* out, const int* tokens, const int* prev_out, const int* src_rows,
                                           const int* pos, const half_t* wte, const half_t* wpe, int N, int C,
                                           unsigned* zero, int nzero) {
    grid_dep_launch();
    grid_dep_wait();
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t z = idx; z < (size_t)nzero; z += (size_t)gridDim.x * blockDim.x) zero[z] = 0u;
    if (idx >= (size_t)N * C) return;
    int i = idx / C, c = idx % C;
    const int src = src_rows[i];
    const int tok = src >= 0 ? prev_out[src] : tokens[i];
    out[idx] = h2f(wte[(size_t)tok * C + c]) + h2f(wpe[(size_t)pos[i] * C + c]);
}
