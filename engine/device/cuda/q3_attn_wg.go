package cuda

// q3_attn_wg.cu: the rotary block's prompt-chunk attention on Hopper
// (q3_attn_prefill's grid and outputs through warpgroup MMAs and a TMA
// producer warp; the file's header says how).

const (
	q3AttnWGFile   = "q3_attn_wg.cu"
	q3AttnWGKernel = "q3_attn_prefill_wg"
	// q3AttnWGThreads is its block: the consumer warpgroup and the
	// producer warp.
	q3AttnWGThreads = 160

	// rotaryPrefillWGSmem is its dynamic shared memory (AW_SMEM and the
	// barriers): Q and two stages of keys and values, 64 x 128 bf16 each,
	// 1 KiB to align them to the swizzle's 1024-byte groups, and each
	// stage's full and empty mbarriers.
	rotaryPrefillWGSmem = 5*64*128*2 + 1024 + 2*2*8
)

// usePrefillWG takes q3_attn_wg.cu's kernel for the prompt chunks where it
// was built (sm_90a), the driver encodes tensor maps and launches with
// attributes, and the bf16 path runs, unless the lab turned it off; it
// encodes the maps of every layer's keys and values: the layer's cache as
// rows of 128 elements, one a (block, KV head, slot), in boxes of
// min(B, 64) rows. It runs once the cache exists.
func (d *Device) usePrefillWG() error {
	q, g := d.q3, d.g
	k, ok := g.kernels[q3AttnWGKernel]
	if !ok || q.f32 || d.opts.force.noPrefillWG || g.drv.cuTensorMapEncodeTiled == 0 || g.drv.cuLaunchKernelEx == 0 {
		return nil
	}
	if err := g.setMaxDynamicSmem(k, rotaryPrefillWGSmem); err != nil {
		return err
	}
	rows, box := d.cache.layerBytes/(2*rotaryHeadDim), min(d.kv.BlockSizeTokens, 64)
	var mats []tmaMatrix
	for l := range d.cfg.NumLayers {
		kc, vc := d.kvLayer(l)
		mats = append(mats, tmaMatrix{kc, rows, rotaryHeadDim, box}, tmaMatrix{vc, rows, rotaryHeadDim, box})
	}
	maps, err := g.encodeTensorMaps(mats)
	if err != nil {
		return err
	}
	q.attnMaps, q.k.attnPrefill, q.prefillSmem = maps, k, rotaryPrefillWGSmem
	return nil
}

// launchAttnPrefill launches the prompt-chunk attention kernel k over tiles
// x NH blocks: q3_attn_prefill_wg takes the tensor maps of the cache's keys
// and values (maps, keyed by kc and vc) by value ahead of out and qkv, the
// others kc and vc after them; rest are the arguments every one takes
// after those (q_start .. scale).
func (g *gpu) launchAttnPrefill(k kernel, maps wgMaps, tiles, NH, smem int, out, qkv, kc, vc devPtr, rest ...uint64) error {
	if k.name == q3AttnWGKernel {
		return g.launchClusterRefs(k, tiles, NH, 1, 1, q3AttnWGThreads, smem, []uintptr{maps.maps[kc], maps.maps[vc]},
			append([]uint64{argPtr(out), argPtr(qkv)}, rest...)...)
	}
	return g.launch(k, tiles, NH, 1, 128, smem, append([]uint64{argPtr(out), argPtr(qkv), argPtr(kc), argPtr(vc)}, rest...)...)
}
