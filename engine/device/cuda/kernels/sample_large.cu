// sample_large.cu: the sampler for vocabularies of up to 262,144 ids
// (Qwen3's 151,936). Its bitmaps take the Scratch past 48 KB, so it lives in
// dynamic shared memory (SAMPLE_DYNAMIC_SMEM bytes, sampleLargeSmem in
// qwen3.go); rows are fp32 (q3_gemv.cu's LM head, the fp32 mode) or bf16
// (cuBLASLt's), with no tile maxima.
#define MAX_V 262144
#define SAMPLE_TILED 0
#define SAMPLE_DYNAMIC_SMEM 98304
#include "sample.cuh"

static_assert(sizeof(Scratch) <= SAMPLE_DYNAMIC_SMEM, "Scratch outgrew the dynamic shared memory the launch asks for");

// logits (M, ld) fp32; tile_keys must be null.
SAMPLE_ROWS_KERNEL(sample_rows_large, float)
// logits (M, ld) bf16 (cuBLASLt's LM head in a bf16 model); tile_keys must
// be null; h, w, C: the LM head's operands for greedy rows (dot_refine).
SAMPLE_ROWS_KERNEL_BF(sample_rows_large_bf)
