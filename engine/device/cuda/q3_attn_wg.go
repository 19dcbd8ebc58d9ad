package cuda

// q3_attn_wg.cu: the rotary block's prompt-chunk attention on Hopper
// (q3_attn_prefill's contract through warpgroup MMAs; the file's header
// says how).

const (
	q3AttnWGFile   = "q3_attn_wg.cu"
	q3AttnWGKernel = "q3_attn_prefill_wg"

	// rotaryPrefillWGSmem is its dynamic shared memory (AW_SMEM): Q and two
	// stages of keys and values, 64 x 128 bf16 each, and 1 KiB to align
	// them to the swizzle's 1024-byte groups.
	rotaryPrefillWGSmem = 5*64*128*2 + 1024
)

// usePrefillWG takes q3_attn_wg.cu's kernel for the prompt chunks where it
// was built (sm_90a) and the bf16 path runs, unless the lab turned it off.
func (d *Device) usePrefillWG() error {
	q, g := d.q3, d.g
	k, ok := g.kernels[q3AttnWGKernel]
	if !ok || q.f32 || d.opts.force.noPrefillWG {
		return nil
	}
	if err := g.setMaxDynamicSmem(k, rotaryPrefillWGSmem); err != nil {
		return err
	}
	q.k.attnPrefill, q.prefillSmem = k, rotaryPrefillWGSmem
	return nil
}
