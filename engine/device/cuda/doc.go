// Package cuda is roseinfer's NVIDIA GPU device: a model family's Program
// (engine/model/arch) lowered onto fused kernels: the pre-LayerNorm block
// with learned positions and a GELU MLP (GPT-2's; lower.go, fp16 weights)
// or the rotary block with RMSNorm, grouped-query attention and SwiGLU
// (Qwen3's; qwen3_lower.go and qwen3.go, bf16 weights, or fp32 throughout
// with Options.Float32 to check numerics: q3_f32.cu), fp32
// accumulation, a paged KV cache in one device allocation, attention over
// mixed prefill chunks and decode tokens, sampling on the GPU, CUDA graphs for
// decode steps and an asynchronous Submit/Collect pair for overlap scheduling.
//
// Nothing is linked at build time: libcuda, libnvrtc and libcublasLt are
// opened at run time through purego (CGO_ENABLED=0 builds), and the kernels
// (kernels/*.cu, embedded) are compiled by NVRTC for the GPU at hand on first
// use and cached on disk. On a machine without CUDA, Available reports what is
// missing and New fails with the same error.
//
// It implements device.Device, device.AsyncDevice and phase.SpanReporter; it
// imports engine/model, engine/model/arch, engine/device and
// engine/profile/phase only.
//
// # Product and lab
//
// The product is what roseinfer serve, bench offline and the tests need. The
// lab (cmd/cudabench's ceilings, projection diagnostics, per-op profile and
// switches, and the ROSEINFER_CUDA_STATS step statistics) lives in lab_*.go
// files behind the cudalab build tag: they keep the package's private access
// without an exported hook for every probe, and none of it is in a product
// binary. Instrumentation reaches a step through one nil-checked hook
// (hook.go), which the GPU spans of the product implement too.
//
// # Fallbacks
//
// Each fast path has a slower one the device takes where the fast one cannot
// run; the tests force each (Options.force) so that one H100 covers them.
//   - LayerNorm kernels and cuBLASLt for a step's projections: steps that
//     gemv.cu (up to 16 rows; channels a multiple of 128, at most 1024),
//     gemm_skinny.cu (17-32 rows; compute capability 9+, enough shared
//     memory) and gemm_wg.cu (up to 128 rows; sm_90a, NVRTC 12+, a driver
//     with cuTensorMapEncodeTiled, at most 768 channels) do not take; the LM
//     head of steps of more than 16 sampled rows always.
//   - The gemv.cu LM head with the sampler scanning whole rows: small steps
//     of a model whose width lmhead.cu is not instantiated for (256, 768 and
//     1024 channels).
//   - The block-per-(sequence, head) decode attention kernel and the
//     CUDA-core prefill attention kernel: head sizes other than 64.
//   - An unfused residual add (cuBLASLt writes fp16, residual_add adds it):
//     where cuBLASLt has no fp16-in/fp32-out algorithm for the residual GEMM.
//   - attproj and fc as two gemm_wg.cu grids instead of one gemm_wg_pair
//     grid: an MPS client limited to part of the SMs
//     (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE below 100), or pair kernels that do
//     not load or fit.
//   - Launches without programmatic dependent launch: drivers without
//     cuLaunchKernelEx.
//   - The rotary block's projections through cuBLASLt (and its SwiGLU
//     kernel) at 17-128 rows instead of q3_wg.cu: GPUs other than sm_90a,
//     NVRTC before 12, drivers without cuTensorMapEncodeTiled, or a model
//     whose projections fit none of its launch shapes.
//   - The rotary block's prompt-chunk attention through q3_attn_prefill
//     (mma.sync) instead of q3_attn_wg.cu's wgmma kernel with its TMA
//     producer: GPUs other than sm_90a, NVRTC before 12, and drivers without
//     cuTensorMapEncodeTiled or cuLaunchKernelEx (the fp32 mode has
//     q3f_attn_prefill).
//   - The rotary block's q/k norm and rotation as their own kernel
//     (q3_qk_rope_kv) before the attention: steps with prompt chunks, and
//     decode-only steps of more than 64 rows, where it is faster than the
//     attention doing it (q3_attn_rows_rope); in steps of 1,024 rows or
//     more q|k|v's GEMM does it (q3_gemm_ws_qkv) on sm_90a with NVRTC 12+
//     and cuTensorMapEncodeTiled, for 128-dim heads of even query and KV
//     head counts.
//   - Gate|up through cuBLASLt and q3_swiglu in steps of 1,024 rows or
//     more: where q3_gemm_ws_swiglu cannot run (as q3_gemm_ws_qkv).
//   - The decode-row attention without the keys and values it reads first
//     asked for ahead (q3_kv_prefetch on a side stream, kvprefetch.go):
//     GPUs other than Hopper, the fp32 mode, and steps with prompt chunks
//     or outside 33-192 decode rows.
package cuda
