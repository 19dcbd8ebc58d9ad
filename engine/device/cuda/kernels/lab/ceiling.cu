// ceiling.cu: the DRAM read ceiling (Ceilings.ReadGBs), the denominator for
// kernels that mostly read (decode attention over the KV cache, the LM
// head), which the device-to-device copy (half reads, half writes) is not.
#include "common.cuh"

// Each thread streams 16-byte pieces, four loads in flight per iteration
// (grid-stride). The folded value is stored only if it equals a constant
// no fill produces here, so the loads stay but nothing is written.
extern "C" __global__ void read_bandwidth(const uint4* src, size_t n, unsigned* sink) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const uint4 a = __ldcs(src + i), b = __ldcs(src + i + stride), c = __ldcs(src + i + 2 * stride),
                    d = __ldcs(src + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        const uint4 a = __ldcs(src + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;
}

// l2_broadcast_read: every block reads the same n 16-byte pieces, as every
// column tile of a projection reads the whole activation matrix: the rate
// at which L2 feeds each SM when all of them read at once (the caller reads
// the matrix once before, so it is in L2). __ldcg skips L1.
extern "C" __global__ void l2_broadcast_read(const uint4* src, int n, unsigned* sink) {
    unsigned acc = 0;
    int i = threadIdx.x;
    const int s = blockDim.x;
    for (; i + 3 * s < n; i += 4 * s) {
        const uint4 a = __ldcg(src + i), b = __ldcg(src + i + s), c = __ldcg(src + i + 2 * s), d = __ldcg(src + i + 3 * s);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += s) {
        const uint4 a = __ldcg(src + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;
}

// empty_pdl does nothing but take part in programmatic dependent launch:
// in a graph of them, what a launch of a given grid and shared memory size
// costs by itself.
extern "C" __global__ void empty_pdl(int unused) {
    grid_dep_launch();
    grid_dep_wait();
}
