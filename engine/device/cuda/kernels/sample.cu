// sample.cu: the sampler for vocabularies of up to 65,536 ids (GPT-2's).
#include "sample.cuh"

// logits (M, ld) fp32, tile_keys as above or null.
SAMPLE_ROWS_KERNEL(sample_rows, float)
// logits (M, ld) fp16 (cuBLASLt's LM head); tile_keys must be null.
SAMPLE_ROWS_KERNEL(sample_rows_h, half_t)
