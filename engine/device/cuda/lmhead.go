package cuda

import "fmt"

// The LM head of small steps (lmhead.cu): at most maxGemvRows sampled rows,
// LayerNorm_f fused, a warp per 8-column tile over all of K with a ring of
// weight loads that runs from tile to tile, and each tile's largest logit
// (as a float_key) written beside the logits, so the sampler reads one
// eighth of a row to find its argmax and top-k bound.

const lmheadTileCols = 8 // columns per tile key

// lmheadKernelName is lmhead.cu's kernel for rows <= 8 (or 16) and K = 32*kch.
func lmheadKernelName(rows16 bool, kch int) string {
	mr := 8
	if rows16 {
		mr = 16
	}
	return fmt.Sprintf("lmhead_ln_r%d_k%d", mr, kch)
}

// lmheadChunks are the K / 32 values lmhead.cu is instantiated for: the
// tests' small model (256 channels), GPT-2 small (768) and medium (1024).
var lmheadChunks = []int{8, 24, 32}

func lmheadKernelNames() []string {
	var names []string
	for _, kch := range lmheadChunks {
		names = append(names, lmheadKernelName(false, kch), lmheadKernelName(true, kch))
	}
	return names
}

// resolveLMHead picks the model's lmhead.cu kernels; lmheadOK stays false
// (the gemv.cu LM head and the sampler's full-row scan) for other widths.
func (d *Device) resolveLMHead(get func(*kernel, string) error) error {
	d.path.lmheadOK = false
	if !d.path.gemvOK || d.opts.force.gemvLMHead {
		return nil
	}
	for _, kch := range lmheadChunks {
		if d.cfg.Channels != 32*kch {
			continue
		}
		for i, rows16 := range []bool{false, true} {
			if err := get(&d.k.lmHead[i], lmheadKernelName(rows16, kch)); err != nil {
				return err
			}
		}
		d.path.lmheadOK = true
	}
	return nil
}

// lmheadKeyStride is the tile-key row length for logits rows of ld columns.
func lmheadKeyStride(ld int) int { return ld / lmheadTileCols }

// lmhead writes logits(M, vocabPadded) and their tile keys for the M sampled
// rows (sel: their residual rows), on two blocks per SM of all SMs but one:
// the sampler's block that follows needs a whole SM's registers, and on a
// free SM it is resident and waiting on the grid dependency when the LM head
// ends, instead of launching only once an SM drains.
func (d *Device) lmhead(sel devPtr, M int) error {
	k := d.k.lmHead[0]
	if M > 8 {
		k = d.k.lmHead[1]
	}
	tiles := ceilDiv(d.vocabPadded, lmheadTileCols)
	grid := min(ceilDiv(tiles, gemvThreads/32), 2*max(1, d.g.smCount-1))
	return d.g.launch(k, grid, 1, 1, gemvThreads, 0,
		argPtr(d.act.logits), argInt(d.vocabPadded), argPtr(d.act.tileKeys), argInt(lmheadKeyStride(d.vocabPadded)),
		argPtr(d.act.residual), argPtr(sel), argPtr(d.w.lnfW), argPtr(d.w.lnfB), argF32(d.cfg.LayerNormEpsilon),
		argPtr(d.w.wte), argInt(M), argInt(d.vocabPadded))
}
