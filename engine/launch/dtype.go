package launch

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/qwen3"
)

// The --dtype values, with vLLM's names and aliases (float = float32,
// half = float16).
const (
	DTypeAuto     = "auto"
	DTypeFloat32  = "float32"
	DTypeBFloat16 = "bfloat16"
	DTypeFloat16  = "float16"
)

// canonicalDType maps a --dtype value to its canonical name ("" when it is
// none of them).
func canonicalDType(s string) string {
	switch s {
	case "", DTypeAuto:
		return DTypeAuto
	case DTypeFloat32, "float":
		return DTypeFloat32
	case DTypeBFloat16:
		return DTypeBFloat16
	case DTypeFloat16, "half":
		return DTypeFloat16
	}
	return ""
}

// computeDTypes are the precisions a device computes a family in, its
// default (auto) first: cpu is fp32; cuda runs GPT-2 in fp16 and Qwen3 in
// bf16, or in fp32 on request (cuda.Options.Float32); sim computes nothing.
func computeDTypes(dev string, fam *model.Family) []string {
	switch {
	case dev == "cpu":
		return []string{DTypeFloat32}
	case dev == "cuda" && fam.Name == qwen3.Family.Name:
		return []string{DTypeBFloat16, DTypeFloat32}
	case dev == "cuda":
		return []string{DTypeFloat16}
	}
	return nil
}

// checkDType says whether dtype (canonical) is one dev computes fam in.
func checkDType(dtype, dev string, fam *model.Family) error {
	if dtype == DTypeAuto {
		return nil
	}
	ok := computeDTypes(dev, fam)
	for _, d := range ok {
		if d == dtype {
			return nil
		}
	}
	if len(ok) == 0 {
		return fmt.Errorf("--dtype %s: the %s device computes nothing; leave --dtype at auto", dtype, dev)
	}
	return fmt.Errorf("--dtype %s: the %s device runs %s in %v (--dtype auto is %s)", dtype, dev, fam.Title, ok, ok[0])
}
