package cpu

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/model"
)

// kvCache is the paged KV storage the engine's block ids point into. Each
// layer has a K and a V array of NumBlocks·B token slots of C floats, C
// being NKV·HS here (all KV heads side by side; the model's C for GPT-2);
// block b holds slots [b·B, (b+1)·B), and position t of a sequence lives in
// slot table[t/B]·B + t%B of its block table.
type kvCache struct {
	numBlocks, blockSize, C int
	k, v                    [][]float32 // (L) × (NumBlocks·B, C)
}

func newKVCache(L, C, numBlocks, blockSize int) (*kvCache, error) {
	if numBlocks < 1 || blockSize < 1 {
		return nil, fmt.Errorf("cpu: KV cache needs NumBlocks >= 1 and BlockSizeTokens >= 1, got %d and %d", numBlocks, blockSize)
	}
	perLayer := int64(numBlocks) * int64(blockSize) * int64(C)
	if perLayer > 1<<36 {
		return nil, fmt.Errorf("cpu: KV cache of %d blocks x %d tokens x %d channels is too large", numBlocks, blockSize, C)
	}
	kv := &kvCache{numBlocks: numBlocks, blockSize: blockSize, C: C}
	for range L {
		kv.k = append(kv.k, make([]float32, perLayer))
		kv.v = append(kv.v, make([]float32, perLayer))
	}
	return kv, nil
}

// slot is the KV slot of position pos of a sequence with this block table.
func (kv *kvCache) slot(table []int32, pos int) int {
	return int(table[pos/kv.blockSize])*kv.blockSize + pos%kv.blockSize
}

// kvAppendForward stores each token's key and value (NKV·HS each, after
// its NH·HS query in its qkv row (BT, (NH+2·NKV)·HS)) into its slot of
// layer l's cache, before attention reads them: a token attends to itself
// and to its chunk's earlier tokens through the cache, exactly as to tokens
// of earlier steps.
func kvAppendForward(kv *kvCache, l int, qkv []float32, st *stepLayout, BT, NH, NKV, HS int) {
	kc, vc := kv.k[l], kv.v[l]
	qWidth, C := NH*HS, NKV*HS
	rowWidth := qWidth + 2*C
	for i := 0; i < BT; i++ {
		s := kv.slot(st.blockTables[st.seqIndex[i]], int(st.positions[i]))
		row := qkv[i*rowWidth : (i+1)*rowWidth]
		copy(kc[s*C:(s+1)*C], row[qWidth:qWidth+C])
		copy(vc[s*C:(s+1)*C], row[qWidth+C:qWidth+2*C])
	}
}

// KVBytesPerBlock is the host memory one KV block takes on this device (K
// and V, every layer, fp32), for sizing NumBlocks from a memory budget.
func KVBytesPerBlock(c model.Config, blockSizeTokens int) int {
	return 2 * c.NumLayers * blockSizeTokens * c.KVChannels() * 4
}
