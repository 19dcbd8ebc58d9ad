package tokenizer

import (
	"encoding/json"
	"fmt"
)

// tokenizerJSON is the part of HF's tokenizer.json that decides the ids.
type tokenizerJSON struct {
	AddedTokens []struct {
		ID      int32  `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type                    string          `json:"type"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		Dropout                 *float64        `json:"dropout"`
		ContinuingSubwordPrefix string          `json:"continuing_subword_prefix"`
		EndOfWordSuffix         string          `json:"end_of_word_suffix"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
	} `json:"model"`
}

// byteLevelJSON is a ByteLevel pre-tokenizer or post-processor.
type byteLevelJSON struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// preTokenizerJSON is any pre-tokenizer: ByteLevel, Split or a Sequence.
type preTokenizerJSON struct {
	byteLevelJSON
	Pattern struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior      string             `json:"behavior"`
	Invert        bool               `json:"invert"`
	PreTokenizers []preTokenizerJSON `json:"pretokenizers"`
}

func parseTokenizerJSON(data []byte) (vocabSpec, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return vocabSpec{}, err
	}
	split, nfc, err := tj.checkSupported()
	if err != nil {
		return vocabSpec{}, err
	}
	merges, err := parseMergesJSON(tj.Model.Merges)
	if err != nil {
		return vocabSpec{}, err
	}
	var added []addedToken
	for _, a := range tj.AddedTokens {
		added = append(added, addedToken{content: a.Content, id: a.ID, special: a.Special})
	}
	isAdded := func(content string) bool {
		for _, a := range added {
			if a.content == content {
				return true
			}
		}
		return false
	}
	spec, err := buildSpec(tj.Model.Vocab, merges, isAdded)
	if err != nil {
		return vocabSpec{}, err
	}
	spec.added, spec.split, spec.nfc = added, split, nfc
	return spec, nil
}

// checkSupported refuses every setting under which Encode would not give HF's
// ids, naming it, and returns the pre-tokenizer and whether text is
// NFC-normalized. Two pipelines are supported: GPT-2's (no normalizer,
// ByteLevel with its regex) and Qwen2's (NFC, Split with qwen2SplitRegex
// isolated, then ByteLevel without regex).
func (tj *tokenizerJSON) checkSupported() (split splitKind, nfc bool, err error) {
	m := tj.Model
	switch {
	case m.Type != "" && m.Type != "BPE":
		return 0, false, fmt.Errorf("model type %q: only BPE is supported", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return 0, false, fmt.Errorf("BPE dropout is not supported")
	case m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != "":
		return 0, false, fmt.Errorf("BPE subword prefix/suffix is not supported")
	case m.ByteFallback || m.IgnoreMerges:
		return 0, false, fmt.Errorf("BPE byte_fallback/ignore_merges is not supported")
	}
	if !isJSONNull(tj.Normalizer) {
		var norm struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(tj.Normalizer, &norm); err != nil || norm.Type != "NFC" {
			return 0, false, fmt.Errorf("normalizer %.80s: only none or NFC is supported", string(tj.Normalizer))
		}
		nfc = true
	}
	var pre preTokenizerJSON
	if err := json.Unmarshal(tj.PreTokenizer, &pre); err != nil {
		return 0, false, fmt.Errorf("pre_tokenizer: %w", err)
	}
	switch {
	case pre.isByteLevel(true):
		split = splitGPT2
	case pre.Type == "Sequence" && len(pre.PreTokenizers) == 2 && pre.PreTokenizers[0].isQwen2Split() &&
		pre.PreTokenizers[1].isByteLevel(false):
		split = splitQwen2
	default:
		return 0, false, fmt.Errorf("pre_tokenizer %.200s: only ByteLevel with GPT-2's regex, or Split with Qwen2's "+
			"regex then ByteLevel without one, is supported (no prefix space)", string(tj.PreTokenizer))
	}
	if !isJSONNull(tj.PostProcessor) {
		var post byteLevelJSON
		if err := json.Unmarshal(tj.PostProcessor, &post); err != nil || post.Type != "ByteLevel" {
			return 0, false, fmt.Errorf("post_processor %.80s: only none or ByteLevel is supported (Encode adds no BOS/EOS)",
				string(tj.PostProcessor))
		}
	}
	if !isJSONNull(tj.Decoder) {
		var dec byteLevelJSON
		if err := json.Unmarshal(tj.Decoder, &dec); err != nil || dec.Type != "ByteLevel" {
			return 0, false, fmt.Errorf("decoder %.80s: only none or ByteLevel is supported", string(tj.Decoder))
		}
	}
	return split, nfc, nil
}

// isByteLevel reports whether p is ByteLevel without a prefix space, using
// GPT-2's regex (withRegex) or none.
func (p *preTokenizerJSON) isByteLevel(withRegex bool) bool {
	useRegex := p.UseRegex == nil || *p.UseRegex // HF's default is true
	return p.Type == "ByteLevel" && !p.AddPrefixSpace && useRegex == withRegex
}

// isQwen2Split reports whether p is Split on Qwen2's regex, each match a piece.
func (p *preTokenizerJSON) isQwen2Split() bool {
	return p.Type == "Split" && p.Pattern.Regex != nil && *p.Pattern.Regex == qwen2SplitRegex &&
		p.Behavior == "Isolated" && !p.Invert
}

func isJSONNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// parseMergesJSON accepts both spellings HF has used: ["a b", ...] and
// [["a", "b"], ...].
func parseMergesJSON(raw json.RawMessage) ([][2]string, error) {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("model.merges: want [\"a b\", ...] or [[\"a\", \"b\"], ...]")
	}
	pairs = make([][2]string, len(lines))
	for i, line := range lines {
		var ok bool
		pairs[i][0], pairs[i][1], ok = splitMerge(line)
		if !ok {
			return nil, fmt.Errorf("model.merges[%d] %q: want two tokens separated by one space", i, line)
		}
	}
	return pairs, nil
}
