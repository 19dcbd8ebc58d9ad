// q3_wg.cu: the rotary block's projections at 17-128 token rows on
// Hopper (sm_90a only), through wg.cuh's TMA + warpgroup MMA kernel in
// bf16: o_proj and down_proj adding into the fp32 residual stream
// (GEMV_RESIDUAL), K split over blocks that add their sums with
// red.global.add; up to 64 rows (rotaryWGOneSliceRows) also q|k|v
// (WG_OUT_BF16) and gate|up with SwiGLU in the epilogue (WG_SWIGLU_BF16)
// in one K slice of up to 16 k tiles (K = 1024 for Qwen3-0.6B). q3_wg.go
// picks the widths and slices.
//
// Why not cuBLASLt at these rows: on the H100 its four projections of a
// batch-128 decode step take 39 us a layer for 31.5 MB of weights (0.8
// TB/s; o_proj's 1,024 output columns are 8 of its 128-column tiles), and
// its kernels do not wait under programmatic dependent launch, so none
// fetches its weights while the kernel before it ends (docs/cuda.md).
#define WG_BF16 1
#define WG_MAX_KT 16
#include "wg.cuh"

// q3_wg_n<BN> (one K slice) and q3_wg_sk_n<BN> (K split over the grid's
// z): wg.cuh's arguments (bias16, lns, stats, x16 and eps unused, null).
#define Q3_WG_KERNELS(PREFIX, KIND)          \
    WG_KERNEL(q3_wg_##PREFIX##n16, 16, KIND) \
    WG_KERNEL(q3_wg_##PREFIX##n32, 32, KIND) \
    WG_KERNEL(q3_wg_##PREFIX##n48, 48, KIND) \
    WG_KERNEL(q3_wg_##PREFIX##n64, 64, KIND)
Q3_WG_KERNELS(, WG_PLAIN)
Q3_WG_KERNELS(sk_, WG_SPLIT)
