//go:build cudalab

package cuda

import (
	"os"
	"strconv"
	"strings"
)

// The lab's environment switches, for A/Bs within one binary on the GPU
// machine (no Go there to rebuild):
//   - ROSEINFER_CUDA_FORCE, a comma list: "nopdl" launches without
//     programmatic dependent launch, "cublaslt" takes every projection to
//     cuBLASLt, "rowsblocks=N" has rotarySplits fill N decode-row attention
//     blocks an SM, "noq3wg" leaves q3_wg.cu out, "noropefold" keeps
//     q3_qk_rope_kv in decode-only steps and "ropefoldrows=N" folds it into
//     the attention of decode-only steps of up to N rows, "noattnwg" keeps
//     the prompt chunks' attention on q3_attn_prefill, "batchorder" attends
//     decode rows in the batch's order (not longest context first),
//     "nokvprefetch" forks no KV prefetch and "kvprefetchmb=N" sets its
//     budget a layer (kvprefetch.go), "q3fp32logits" has the rotary
//     block's cuBLASLt LM head write fp32 logits, "normrowsmin=N"
//     sends the RMSNorms of steps of more than N rows through
//     q3_rmsnorm_rows (-1: none), "nogemmws" keeps gate|up and q|k|v on
//     cuBLASLt, q3_swiglu and q3_qk_rope_kv (no q3_gemm_ws.cu),
//     "nogemmwsqkv" q|k|v alone, "gemmwsminrows=N" sends the gate|up and
//     q|k|v of steps of at least N rows through it, "gemmwscluster=N" launches it
//     in clusters of N blocks (1: none), "gemmwsgroup=N" walks its tiles in
//     groups of N row tiles (-1: column tile outermost), "q3wgcluster=N"
//     launches q3_wg.cu in clusters of N, "q3wgslice=N" sends q|k|v and
//     gate|up of up to N rows through q3_wg.cu (forcedPaths);
//   - ROSEINFER_CUDA_KERNELS, a directory whose .cu and .cuh files replace
//     the embedded kernels of the same name (a kernel variant without a
//     rebuild; give each variant its own ROSEINFER_CUDA_CACHE).
func init() {
	labOptions = append(labOptions, func(o *Options) {
		for _, f := range strings.Split(os.Getenv("ROSEINFER_CUDA_FORCE"), ",") {
			switch strings.TrimSpace(f) {
			case "nopdl":
				o.force.noPDL = true
			case "cublaslt":
				o.force.cuBLASLt = true
			case "noq3wg":
				o.force.noRotaryWG = true
			case "noropefold":
				o.force.noRopeInAttention = true
			case "noattnwg":
				o.force.noPrefillWG = true
			case "batchorder":
				o.force.decodeInBatchOrder = true
			case "nogemmws":
				o.force.noGemmWS = true
			case "nogemmwsqkv":
				o.force.noGemmWSQKV = true
			case "nokvprefetch":
				o.force.kvPrefetchMB = -1
			case "q3fp32logits":
				o.force.rotaryFP32Logits = true
			default:
				name, n, ok := strings.Cut(strings.TrimSpace(f), "=")
				if dst := labIntSwitch(&o.force, name); ok && dst != nil {
					*dst, _ = strconv.Atoi(n)
				}
			}
		}
	})
	labKernelDir = os.Getenv("ROSEINFER_CUDA_KERNELS")
}

// labIntSwitch is the forcedPaths field that ROSEINFER_CUDA_FORCE's
// "name=N" sets, or nil.
func labIntSwitch(f *forcedPaths, name string) *int {
	return map[string]*int{
		"rowsblocks": &f.rowsBlocks, "q3wgcluster": &f.rotaryWGCluster, "ropefoldrows": &f.ropeInAttentionRows,
		"kvprefetchmb": &f.kvPrefetchMB, "normrowsmin": &f.normRowsMin, "gemmwsminrows": &f.gemmWSMinRows,
		"gemmwscluster": &f.gemmWSCluster, "gemmwsgroup": &f.gemmWSGroup, "q3wgslice": &f.rotaryWGOneSliceRows,
	}[name]
}
