package cpu

// encoderForward writes each token's embedding plus, when wpe is not nil,
// its position's: out (BT, C) = wte[tokens] (+ wpe[positions]), with wte
// (V, C), wpe (maxT, C). Positions are per sequence, so a batch mixes many
// of them. Models with rotary positions (Qwen3) have no wpe.
func encoderForward(out []float32, tokens, positions []int32, wte, wpe []float32, BT, C int) {
	for i := 0; i < BT; i++ {
		o := out[i*C : (i+1)*C]
		te := wte[int(tokens[i])*C : (int(tokens[i])+1)*C]
		if wpe == nil {
			copy(o, te)
			continue
		}
		pe := wpe[int(positions[i])*C : (int(positions[i])+1)*C]
		for c := range o {
			o[c] = te[c] + pe[c]
		}
	}
}
