package cuda

import "fmt"

// Small steps of the rotary block (q3_gemv.cu): with at most maxGemvRows
// token rows a layer's projections are gemv.cuh's bf16 GEMVs, which read the
// weights once at full bandwidth and take part in programmatic dependent
// launch, with the RMSNorms and SwiGLU folded into them (SwiGLU into the
// gate|up projection's epilogue, which is why the gate|up weights are stored
// interleaved: uploadRotaryWeights): a layer is six or seven launches instead
// of nine or ten, none of them cuBLASLt's. The final norm and the LM head at
// the sampled rows are one launch too.

// q3Gemv* index rotaryKernels.gemv's first dimension: the kernels' input.
const (
	q3GemvPlain = iota // x as it is (o_proj, down_proj)
	q3GemvRMS          // RMSNorm of the residual rows (q|k|v, gate|up, the LM head)
)

// The bf16 epilogues (GEMV_* in gemv.cuh) beside gemvOut32.
const (
	gemvOut16  = 4 // bf16 out = acc
	gemvAdd    = 5 // fp32 out += acc (the residual)
	gemvSwiGLU = 6 // bf16 out (rows, oc/2) = SiLU(acc[2j]) * acc[2j+1]
)

func q3GemvKernelName(input, big, nt int) string {
	prefix := [...]string{"q3_gemv_", "q3_gemv_rms_"}[input]
	return fmt.Sprintf("%sr%d_n%d", prefix, 8<<big, nt+1)
}

// q3GemvKernelNames lists q3_gemv.cu's kernels.
func q3GemvKernelNames() []string {
	var names []string
	for input := range 2 {
		for big := range 2 {
			for nt := range 2 {
				names = append(names, q3GemvKernelName(input, big, nt))
			}
		}
	}
	return names
}

// rotaryGemvOK reports whether the block's shape fits gemv.cuh: the hidden
// size staged in shared memory (at most gemvMaxChannels, a multiple of 128)
// and every K a multiple of its 32-wide chunks.
func rotaryGemvOK(C, attWidth, I int) bool {
	return C%128 == 0 && C <= gemvMaxChannels && attWidth%32 == 0 && I%32 == 0
}

// useGemv reports whether a step of n token rows (or an LM head of n
// sampled rows) runs through q3_gemv.cu.
func (q *rotaryState) useGemv(n int) bool {
	return q.gemvOK && n > 0 && n <= maxGemvRows
}

func (s *rotaryStep) useGemv(n int) bool { return s.q.useGemv(n) }

// gemv launches q3_gemv kernel input over rows x oc: out (row stride ldo,
// counted in outputs of oc columns even for gemvSwiGLU) in mode's epilogue.
// For q3GemvRMS, x is the residual, sel the rows' indices (0: the first
// rows) and norm the RMSNorm weight; otherwise x has row stride ldx.
func (s *rotaryStep) gemv(name string, input int, out devPtr, ldo int, x devPtr, ldx int, sel, norm, w devPtr,
	rows, K, oc, mode int) {
	if s.err != nil {
		return
	}
	d := s.d
	perSM := 4
	if input == q3GemvRMS {
		perSM = 2 // each block stages its rows' norm once
	}
	big, nt, grid := d.gemvGrid(rows, oc, perSM, 0)
	k := s.q.k.gemv[input][big][nt]
	var err error
	if input == q3GemvRMS {
		err = d.g.launch(k, grid, 1, 1, gemvThreads, 0, argPtr(out), argInt(ldo), argPtr(x), argPtr(sel), argPtr(norm),
			argF32(s.q.eps), argPtr(w), argInt(rows), argInt(K), argInt(oc), argInt(mode))
	} else {
		err = d.g.launch(k, grid, 1, 1, gemvThreads, 0, argPtr(out), argInt(ldo), argPtr(x), argInt(ldx), argPtr(w),
			argInt(rows), argInt(K), argInt(oc), argInt(mode))
	}
	s.end(name, err)
}
