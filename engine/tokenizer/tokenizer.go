// Package tokenizer is byte-level BPE as GPT-2 and Qwen2/Qwen3 use it: text
// to token ids and back, giving exactly the ids of HF's tokenizers for any
// text. Two pipelines are supported, chosen by tokenizer.json: GPT-2's
// (ByteLevel with its regex; pretokenize.go) and Qwen2's (NFC, then Split
// with Qwen2's regex; pretokenize_qwen2.go). It owns the vocabulary files of
// a model directory (Load, WriteFiles), the built-in GPT-2 and Qwen3
// tokenizers (Default, Qwen3), and the streaming detokenizer the server uses
// per generated token. It imports nothing from the rest of the engine but
// its own data/qwen3 files.
//
// Encode never adds BOS or EOS. Added (special) tokens such as <|endoftext|>
// that appear literally in the text are split out first and encoded as their
// ids, as HF does by default. Invalid UTF-8 in the input is read as U+FFFD the
// way encoding/json reads a request body (see utf8.go).
//
// A Tokenizer is immutable after construction and safe for concurrent use.
package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Tokenizer is a byte-level BPE vocabulary with its merge rules.
type Tokenizer struct {
	byteID [256]int32 // id of the one-byte token for each byte
	merges mergeTable // pairKey(left, right) -> packMerge(rank, merged id)
	// mergeList holds the merges in rank order, for WriteFiles.
	mergeList [][2]int32

	// tokenText[tokenStart[id]:tokenStart[id+1]] is the text of token id: raw
	// bytes (possibly a fragment of a UTF-8 character) for BPE tokens, the
	// content for added tokens. An empty range marks an unused id.
	tokenText  string
	tokenStart []uint32
	// wholeText[id] is true when token id's bytes are valid UTF-8 on their own,
	// the detokenizer's allocation-free case.
	wholeText []bool

	added []addedToken // split out of the text before pre-tokenization
	eos   int32

	split splitKind // the pre-tokenizer
	nfc   bool      // NFC-normalize text between added tokens first (Qwen2)

	// sourceFiles, when set, returns the HF files this tokenizer was built
	// from (name → contents), which WriteFiles writes as they are: the
	// built-in Qwen3 tokenizer's tokenizer.json and tokenizer_config.json.
	sourceFiles func() (map[string][]byte, error)
}

// addedToken is a token matched literally in the input (HF "added tokens").
type addedToken struct {
	content string
	id      int32
	special bool
}

// vocabSpec is everything a Tokenizer is built from, whatever the source.
type vocabSpec struct {
	tokens [][]byte   // raw bytes by id; nil for an unused id
	merges [][2]int32 // (left id, right id) in rank order
	added  []addedToken
	eos    int32
	split  splitKind
	nfc    bool
}

func newTokenizer(spec vocabSpec) (*Tokenizer, error) {
	t := &Tokenizer{eos: spec.eos, added: spec.added, split: spec.split, nfc: spec.nfc}
	idOfBytes := make(map[string]int32, len(spec.tokens))
	var text strings.Builder
	t.tokenStart = make([]uint32, len(spec.tokens)+1)
	t.wholeText = make([]bool, len(spec.tokens))
	isAdded := make(map[int32]bool, len(spec.added))
	for _, a := range spec.added {
		isAdded[a.id] = true
	}
	for id, raw := range spec.tokens {
		t.tokenStart[id] = uint32(text.Len())
		text.Write(raw)
		t.wholeText[id] = utf8.Valid(raw)
		if _, dup := idOfBytes[string(raw)]; raw != nil && !dup && !isAdded[int32(id)] {
			idOfBytes[string(raw)] = int32(id)
		}
	}
	t.tokenStart[len(spec.tokens)] = uint32(text.Len())
	t.tokenText = text.String()

	for b := 0; b < 256; b++ {
		id, ok := idOfBytes[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("not a byte-level vocabulary: no token for byte %#02x (%q)", b, byteRune[b])
		}
		t.byteID[b] = id
	}
	t.merges = newMergeTable(len(spec.merges))
	for rank, m := range spec.merges {
		left, right := t.tokenBytes(m[0]), t.tokenBytes(m[1])
		if left == "" || right == "" {
			return nil, fmt.Errorf("merge %d refers to an unknown token id (%d, %d)", rank, m[0], m[1])
		}
		merged, ok := idOfBytes[left+right]
		if !ok {
			return nil, fmt.Errorf("merge %d (%q %q): result %q is not in the vocabulary",
				rank, byteLevelString([]byte(left)), byteLevelString([]byte(right)), byteLevelString([]byte(left+right)))
		}
		key := pairKey(m[0], m[1])
		t.merges.putFirst(key, packMerge(uint32(rank), merged))
	}
	t.mergeList = spec.merges
	if t.tokenBytes(t.eos) == "" {
		return nil, fmt.Errorf("EOS id %d is not in the vocabulary", t.eos)
	}
	for _, a := range t.added {
		if a.content == "" || t.tokenBytes(a.id) != a.content {
			return nil, fmt.Errorf("added token %q (id %d) does not match the vocabulary", a.content, a.id)
		}
	}
	return t, nil
}

// tokenBytes returns the text of id, or "" for an id outside the vocabulary.
func (t *Tokenizer) tokenBytes(id int32) string {
	if id < 0 || int(id) >= len(t.wholeText) {
		return ""
	}
	return t.tokenText[t.tokenStart[id]:t.tokenStart[id+1]]
}

// isWholeText reports whether token id is valid UTF-8 on its own; an id
// outside the vocabulary stands for no text, which is whole.
func (t *Tokenizer) isWholeText(id int32) bool {
	return id < 0 || int(id) >= len(t.wholeText) || t.wholeText[id]
}

// VocabSize is the number of ids (one more than the largest id), the size of
// the model's embedding and logits.
func (t *Tokenizer) VocabSize() int { return len(t.wholeText) }

// EOS is the end-of-text id (50256 for GPT-2).
func (t *Tokenizer) EOS() int32 { return t.eos }

// TokenBytes returns a copy of the bytes token id stands for (not necessarily
// valid UTF-8), or nil for an id outside the vocabulary.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if s := t.tokenBytes(id); s != "" {
		return []byte(s)
	}
	return nil
}

// Encode returns the token ids of text. It never fails: every byte has a token.
func (t *Tokenizer) Encode(text string) []int32 {
	text = validInputText(text)
	ids := make([]int32, 0, len(text)/3+1)
	var sc bpeScratch
	// nextAt[i] is where added token i next occurs at or after start (-1:
	// nowhere), so each search runs over the text once.
	nextAt := make([]int, len(t.added))
	for i := range nextAt {
		nextAt[i] = -2 // not searched yet
	}
	for start := 0; start < len(text); {
		end, tok := len(text), (*addedToken)(nil)
		for i := range t.added {
			a := &t.added[i]
			if nextAt[i] == -2 || (nextAt[i] >= 0 && nextAt[i] < start) {
				nextAt[i] = -1
				if j := strings.Index(text[start:], a.content); j >= 0 {
					nextAt[i] = start + j
				}
			}
			// HF matches added tokens leftmost-longest.
			if j := nextAt[i]; j >= 0 && (j < end || (tok != nil && j == end && len(a.content) > len(tok.content))) {
				end, tok = j, a
			}
		}
		ids = t.appendOrdinaryIDs(ids, text[start:end], &sc)
		if tok == nil {
			break
		}
		ids = append(ids, tok.id)
		start = end + len(tok.content)
	}
	return ids
}

// appendOrdinaryIDs normalizes and pre-tokenizes text (which contains no
// added token) and appends the BPE ids of every piece. Added tokens are
// matched before normalization, as HF does for tokens with normalized false
// (all of Qwen's).
func (t *Tokenizer) appendOrdinaryIDs(ids []int32, text string, sc *bpeScratch) []int32 {
	if t.nfc {
		text = nfcString(text)
	}
	end := pieceEnd
	if t.split == splitQwen2 {
		end = qwen2PieceEnd
	}
	return t.appendPieces(ids, text, end, sc)
}

func (t *Tokenizer) appendPieces(ids []int32, text string, pieceEnd func(string, int) int, sc *bpeScratch) []int32 {
	for start := 0; start < len(text); {
		end := pieceEnd(text, start)
		ids = t.appendPieceIDs(ids, text[start:end], sc)
		start = end
	}
	return ids
}

// Decode returns the text of ids as HF's decode does (special tokens kept, no
// clean-up of spaces): the tokens' bytes joined, with each maximal invalid
// UTF-8 subpart replaced by U+FFFD. Ids outside the vocabulary are skipped,
// as HF's fast tokenizer skips them.
func (t *Tokenizer) Decode(ids []int32) string {
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		buf = append(buf, t.tokenBytes(id)...)
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	return string(appendLossy(nil, buf))
}

// DecodeSkipSpecial is Decode with HF's skip_special_tokens: the added tokens
// marked special (<|im_end|>, <|endoftext|>, ...) are left out; other added
// tokens (Qwen's <think>) are kept.
func (t *Tokenizer) DecodeSkipSpecial(ids []int32) string {
	kept := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !t.IsSpecial(id) {
			kept = append(kept, id)
		}
	}
	return t.Decode(kept)
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int32) bool {
	for _, a := range t.added {
		if a.id == id {
			return a.special
		}
	}
	return false
}
