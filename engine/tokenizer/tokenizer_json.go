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

func parseTokenizerJSON(data []byte) (vocabSpec, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return vocabSpec{}, err
	}
	if err := tj.checkSupported(); err != nil {
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
	spec.added = added
	return spec, nil
}

// checkSupported refuses every setting under which Encode would not give HF's
// ids, naming it.
func (tj *tokenizerJSON) checkSupported() error {
	m := tj.Model
	switch {
	case m.Type != "" && m.Type != "BPE":
		return fmt.Errorf("model type %q: only BPE is supported", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return fmt.Errorf("BPE dropout is not supported")
	case m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != "":
		return fmt.Errorf("BPE subword prefix/suffix is not supported")
	case m.ByteFallback || m.IgnoreMerges:
		return fmt.Errorf("BPE byte_fallback/ignore_merges is not supported")
	case !isJSONNull(tj.Normalizer):
		return fmt.Errorf("a normalizer is not supported (GPT-2 has none)")
	}
	var pre byteLevelJSON
	if err := json.Unmarshal(tj.PreTokenizer, &pre); err != nil || pre.Type != "ByteLevel" ||
		pre.AddPrefixSpace || (pre.UseRegex != nil && !*pre.UseRegex) {
		return fmt.Errorf("pre_tokenizer %s: only ByteLevel without prefix space, with GPT-2's regex, is supported",
			string(tj.PreTokenizer))
	}
	if !isJSONNull(tj.PostProcessor) {
		var post byteLevelJSON
		if err := json.Unmarshal(tj.PostProcessor, &post); err != nil || post.Type != "ByteLevel" {
			return fmt.Errorf("post_processor %.80s: only none or ByteLevel is supported (Encode adds no BOS/EOS)",
				string(tj.PostProcessor))
		}
	}
	return nil
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
