package traces

import (
	"errors"
	"fmt"
	"strings"
)

// TextCodec is a tokenizer, for backends that take text: the base sequence
// is made stable under Decode→Encode so the text they get tokenizes back to
// (a sequence as long as) the ids the others get. engine/tokenizer satisfies
// it; this package does not import it.
type TextCodec interface {
	Encode(text string) []int32
	Decode(ids []int32) string
}

// PrefixMode says how prompts share tokens.
type PrefixMode string

const (
	// PrefixBase is the original's way: every prompt is a prefix of one random
	// base sequence, so any prefix cache sees large hits.
	PrefixBase PrefixMode = "base"
	// PrefixTrace builds prompts from the trace's hash_ids: equal ids are
	// equal token blocks, so the trace's own prefix sharing is reproduced.
	PrefixTrace PrefixMode = "trace"
)

// ParsePrefixMode accepts "base" (also "") or "trace".
func ParsePrefixMode(s string) (PrefixMode, error) {
	switch PrefixMode(strings.ToLower(strings.TrimSpace(s))) {
	case "", PrefixBase:
		return PrefixBase, nil
	case PrefixTrace:
		return PrefixTrace, nil
	}
	return "", fmt.Errorf("unknown prefix mode %q (want base or trace)", s)
}

// PromptOptions configure BuildPrompts.
type PromptOptions struct {
	Mode            PrefixMode
	Seed            int64     // --seed (default 42)
	VocabSize       int       // the model's vocabulary (GPT-2: 50257); ids are drawn from [0, max(1, VocabSize/2)]
	BlockSizeTokens int       // PrefixTrace: tokens per hash id, normally Trace.Format.BlockSizeTokens()
	Codec           TextCodec // PrefixBase: optional, see BaseSequence
	// TokenIDs, when set, are the ids a prompt may hold (a tokenizer's
	// regular tokens): the draws are made as if VocabSize were
	// len(TokenIDs), and draw k becomes TokenIDs[k] (MapTokenIDs). Nil keeps
	// the original's ids over [0, VocabSize/2]. Not with Codec.
	TokenIDs []int32
}

// BuildPrompts returns one exact token-id prompt per row, of length
// row.InputLen (clamp the rows first). In PrefixBase mode the prompts are
// slices of one shared base sequence (capacity = length, so appending to one
// cannot change another); in PrefixTrace mode each prompt is its own slice.
func BuildPrompts(rows []Row, opts PromptOptions) ([][]int32, error) {
	if opts.TokenIDs != nil {
		if opts.Codec != nil {
			return nil, errors.New("prompt token ids from a table cannot be combined with a text codec")
		}
		opts.VocabSize = len(opts.TokenIDs)
	}
	if opts.VocabSize <= 0 {
		return nil, errors.New("vocabulary size must be positive")
	}
	for _, r := range rows {
		if r.InputLen < 0 {
			return nil, fmt.Errorf("row %d: negative input length %d", r.Index, r.InputLen)
		}
	}
	prompts := make([][]int32, len(rows))
	switch opts.Mode {
	case "", PrefixBase:
		maxLen := 0
		for _, r := range rows {
			maxLen = max(maxLen, r.InputLen)
		}
		base, err := BaseSequence(maxLen, opts.Seed, opts.VocabSize, opts.Codec)
		if err != nil {
			return nil, err
		}
		MapTokenIDs(base, opts.TokenIDs)
		for i, r := range rows {
			prompts[i] = base[:r.InputLen:r.InputLen]
		}
	case PrefixTrace:
		if opts.BlockSizeTokens <= 0 {
			return nil, errors.New("prefix mode trace needs a trace with hash_ids (mooncake or qwen) and its block size")
		}
		for i, r := range rows {
			prompts[i] = MapTokenIDs(TracePrompt(r, opts.BlockSizeTokens, opts.Seed, opts.VocabSize), opts.TokenIDs)
		}
	default:
		return nil, fmt.Errorf("unknown prefix mode %q", opts.Mode)
	}
	return prompts, nil
}

// MapTokenIDs replaces each draw k in ids by table[k], in place, and returns
// ids; a nil table leaves ids as drawn. Draws made with vocabulary size
// len(table) are always in range.
func MapTokenIDs(ids, table []int32) []int32 {
	if table == nil {
		return ids
	}
	for i, k := range ids {
		ids[i] = table[k]
	}
	return ids
}

// BaseSequence is the original harness's base prompt: numTokens ids drawn
// with Python's random.Random(seed).randint(0, max(1, vocabSize/2)), bit for
// bit the ids the original drew.
//
// With a codec it then does what the original did for text prompts: decode
// and re-encode; if the length changed, take the re-encoded ids, pad them
// with further draws from the same generator or truncate them to numTokens,
// decode and re-encode once more, and fail if the length is still off. Like
// the original it checks lengths, not ids: a prefix cut inside a word may
// still tokenize differently, which is why backends that take token ids get
// the ids themselves.
func BaseSequence(numTokens int, seed int64, vocabSize int, codec TextCodec) ([]int32, error) {
	if vocabSize <= 0 {
		return nil, errors.New("vocabulary size must be positive")
	}
	if numTokens < 0 {
		return nil, fmt.Errorf("negative base length %d", numTokens)
	}
	rng := newPyRandom(seed)
	hi := max(1, vocabSize/2)
	draw := func(ids []int32, n int) []int32 {
		for range n {
			ids = append(ids, int32(rng.randint(0, hi)))
		}
		return ids
	}
	ids := draw(make([]int32, 0, numTokens), numTokens)
	if codec == nil {
		return ids, nil
	}
	again := codec.Encode(codec.Decode(ids))
	if len(again) == numTokens {
		return ids, nil
	}
	if len(again) < numTokens {
		again = draw(again, numTokens-len(again))
	} else {
		again = again[:numTokens]
	}
	stable := codec.Encode(codec.Decode(again))
	if len(stable) != numTokens {
		return nil, fmt.Errorf("failed to construct a base prompt with stable token length: want %d, re-encoding gives %d", numTokens, len(stable))
	}
	return stable, nil
}

// TracePrompt is a PrefixTrace prompt of row.InputLen tokens: hash id h
// becomes blockSizeTokens pseudo-random ids that depend only on (seed, h),
// so rows sharing a hash id at a position share those tokens. The
// concatenated blocks are truncated to InputLen; if they are shorter (fewer
// hash ids than the length needs), the rest is filled with ids unique to the
// row. Ids lie in [0, max(1, vocabSize/2)], like the base sequence's.
func TracePrompt(row Row, blockSizeTokens int, seed int64, vocabSize int) []int32 {
	span := uint64(max(1, vocabSize/2)) + 1
	token := func(key uint64, pos int) int32 {
		return int32(mix64(key+uint64(pos)*0x9e3779b97f4a7c15) % span)
	}
	ids := make([]int32, row.InputLen)
	blocked := 0
	if blockSizeTokens > 0 {
		blocked = min(len(ids), len(row.HashIDs)*blockSizeTokens)
	}
	for pos := 0; pos < blocked; pos++ {
		// The position counts within the block, so a block's tokens do not
		// depend on where in the prompt it sits.
		key := streamKey(seed, domainBlock, row.HashIDs[pos/blockSizeTokens])
		ids[pos] = token(key, pos%blockSizeTokens)
	}
	pad := streamKey(seed, domainPad, int64(row.Index))
	for pos := blocked; pos < len(ids); pos++ {
		ids[pos] = token(pad, pos)
	}
	return ids
}

// Domains keep block streams and padding streams apart even when a hash id
// equals a row index.
const (
	domainBlock uint64 = 0x626c6f636b // "block"
	domainPad   uint64 = 0x706164     // "pad"
)

func streamKey(seed int64, domain uint64, id int64) uint64 {
	return mix64(mix64(uint64(seed)^domain) ^ uint64(id))
}

// mix64 is the SplitMix64 finaliser: a fast bijective scrambler, enough for
// prompt tokens that only need to be deterministic and well spread.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// BlockSizeMismatches counts rows whose hash_ids do not cover their input in
// blocks of blockSizeTokens (len(hash_ids) != ceil(input_len / block)). Run
// it on unclamped rows: a non-zero count means the block size is wrong for
// this trace (the known 16-vs-512 pitfall makes every prompt 32x short).
func BlockSizeMismatches(rows []Row, blockSizeTokens int) int {
	if blockSizeTokens <= 0 {
		return len(rows)
	}
	n := 0
	for _, r := range rows {
		if len(r.HashIDs) != (r.InputLen+blockSizeTokens-1)/blockSizeTokens {
			n++
		}
	}
	return n
}
