package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Load reads the tokenizer of an HF model directory. Like HF's fast tokenizer
// it prefers tokenizer.json; without one it reads vocab.json + merges.txt, with
// added tokens and EOS from tokenizer_config.json and special_tokens_map.json
// when present (GPT2Tokenizer's defaults otherwise: <|endoftext|> is EOS and
// special). Any byte-level BPE with GPT-2's pre-tokenizer loads, not only
// GPT-2's own vocabulary; anything Encode would tokenize differently from HF
// (a normalizer, a prefix space, a post-processor that adds BOS, dropout,
// subword prefixes) is refused with an error naming it.
func Load(dir string) (*Tokenizer, error) {
	return load(dir, func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) })
}

// load is Load with the directory's files read by readFile (os.ReadFile
// under dir, or the files compiled into the binary).
func load(dir string, readFile func(name string) ([]byte, error)) (*Tokenizer, error) {
	cfg, err := readTokenizerConfig(readFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var spec vocabSpec
	if data, err := readFile("tokenizer.json"); err == nil {
		spec, err = parseTokenizerJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "tokenizer.json"), err)
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		spec, err = readVocabAndMerges(dir, cfg.isAdded)
		if err != nil {
			return nil, err
		}
	} else {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	spec.added = mergeAdded(spec.added, cfg.added)
	if err := cfg.addNamedSpecials(&spec); err != nil {
		return nil, fmt.Errorf("tokenizer in %s: %w", dir, err)
	}
	tok, err := newTokenizer(spec)
	if err != nil {
		return nil, fmt.Errorf("tokenizer in %s: %w", dir, err)
	}
	return tok, nil
}

// dirConfig is what tokenizer_config.json and special_tokens_map.json add.
type dirConfig struct {
	added    []addedToken
	eos      string   // "" if neither file names one
	specials []string // bos/eos/unk/pad/... contents, made special if in the vocabulary
}

// isAdded reports whether content is an added or named special token, whose
// vocabulary entry is its plain text rather than byte-level spelling.
func (cfg dirConfig) isAdded(content string) bool {
	for _, a := range cfg.added {
		if a.content == content {
			return true
		}
	}
	for _, s := range cfg.specials {
		if s == content {
			return true
		}
	}
	return content == gpt2EndOfText
}

func readTokenizerConfig(readFile func(name string) ([]byte, error)) (dirConfig, error) {
	var cfg dirConfig
	var raw struct {
		AddedTokensDecoder map[string]struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens_decoder"`
		AddPrefixSpace bool `json:"add_prefix_space"`
		AddBOSToken    bool `json:"add_bos_token"`
	}
	// The named special tokens (eos_token, additional_special_tokens, ...) are
	// in tokenizer_config.json (Qwen's) or special_tokens_map.json (GPT-2's);
	// the second wins where both name one.
	var configSpecial, special map[string]json.RawMessage
	for _, f := range []struct {
		name string
		into any
	}{{"tokenizer_config.json", &raw}, {"tokenizer_config.json", &configSpecial}, {"special_tokens_map.json", &special}} {
		data, err := readFile(f.name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = json.Unmarshal(data, f.into)
		}
		if err != nil {
			return cfg, fmt.Errorf("tokenizer: %s: %w", f.name, err)
		}
	}
	if raw.AddPrefixSpace || raw.AddBOSToken {
		return cfg, fmt.Errorf("tokenizer: tokenizer_config.json: add_prefix_space/add_bos_token are not supported")
	}
	for idText, a := range raw.AddedTokensDecoder {
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil || id < 0 {
			return cfg, fmt.Errorf("tokenizer: tokenizer_config.json: added token id %q", idText)
		}
		cfg.added = append(cfg.added, addedToken{content: a.Content, id: int32(id), special: a.Special})
	}
	// special_tokens_map.json values are a string or {"content": ...}; lists
	// (additional_special_tokens) hold the same.
	for key := range namedSpecialKeys {
		if v, ok := configSpecial[key]; ok {
			if _, override := special[key]; !override {
				if special == nil {
					special = map[string]json.RawMessage{}
				}
				special[key] = v
			}
		}
	}
	for key, v := range special {
		for _, content := range tokenContents(v) {
			if content == "" { // "bos_token": null
				continue
			}
			cfg.specials = append(cfg.specials, content)
			if key == "eos_token" {
				cfg.eos = content
			}
		}
	}
	return cfg, nil
}

// namedSpecialKeys are the keys of HF's special tokens (SPECIAL_TOKENS_ATTRIBUTES).
var namedSpecialKeys = map[string]bool{"bos_token": true, "eos_token": true, "unk_token": true, "sep_token": true,
	"pad_token": true, "cls_token": true, "mask_token": true, "additional_special_tokens": true}

func tokenContents(v json.RawMessage) []string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return []string{s}
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(v, &obj) == nil && obj.Content != "" {
		return []string{obj.Content}
	}
	var list []json.RawMessage
	var out []string
	if json.Unmarshal(v, &list) == nil {
		for _, item := range list {
			out = append(out, tokenContents(item)...)
		}
	}
	return out
}

// addNamedSpecials makes the named special tokens (and GPT-2's default
// <|endoftext|>) added tokens and sets EOS.
func (cfg dirConfig) addNamedSpecials(spec *vocabSpec) error {
	idOf := func(content string) (int32, bool) {
		for _, a := range spec.added {
			if a.content == content {
				return a.id, true
			}
		}
		for id, raw := range spec.tokens {
			if raw != nil && string(raw) == content {
				return int32(id), true
			}
		}
		return 0, false
	}
	for _, content := range append(cfg.specials, gpt2EndOfText) {
		if id, ok := idOf(content); ok {
			spec.added = mergeAdded(spec.added, []addedToken{{content: content, id: id, special: true}})
		}
	}
	eos := cfg.eos
	if eos == "" {
		eos = gpt2EndOfText
	}
	id, ok := idOf(eos)
	if !ok {
		return fmt.Errorf("EOS token %q is not in the vocabulary", eos)
	}
	spec.eos = id
	// An added token beyond the BPE vocabulary extends it.
	for _, a := range spec.added {
		for int(a.id) >= len(spec.tokens) {
			spec.tokens = append(spec.tokens, nil)
		}
		spec.tokens[a.id] = []byte(a.content)
	}
	return nil
}

// mergeAdded appends the tokens of more whose id is not in added yet.
func mergeAdded(added, more []addedToken) []addedToken {
	for _, m := range more {
		known := false
		for _, a := range added {
			known = known || a.id == m.id
		}
		if !known {
			added = append(added, m)
		}
	}
	return added
}

func readVocabAndMerges(dir string, isAdded func(string) bool) (vocabSpec, error) {
	vocabPath, mergesPath := filepath.Join(dir, "vocab.json"), filepath.Join(dir, "merges.txt")
	vocabData, err := os.ReadFile(vocabPath)
	if err != nil {
		return vocabSpec{}, fmt.Errorf("tokenizer: no tokenizer.json, and %w", err)
	}
	var vocab map[string]int
	if err := json.Unmarshal(vocabData, &vocab); err != nil {
		return vocabSpec{}, fmt.Errorf("tokenizer: %s: %w", vocabPath, err)
	}
	mergesData, err := os.ReadFile(mergesPath)
	if err != nil {
		return vocabSpec{}, fmt.Errorf("tokenizer: %w", err)
	}
	var merges [][2]string
	sc := bufio.NewScanner(bytes.NewReader(mergesData))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if text == "" || (line == 1 && strings.HasPrefix(text, "#version")) {
			continue
		}
		left, right, ok := splitMerge(text)
		if !ok {
			return vocabSpec{}, fmt.Errorf("tokenizer: %s:%d: want two tokens separated by one space", mergesPath, line)
		}
		merges = append(merges, [2]string{left, right})
	}
	spec, err := buildSpec(vocab, merges, isAdded)
	if err != nil {
		return vocabSpec{}, fmt.Errorf("tokenizer: %s + merges.txt: %w", vocabPath, err)
	}
	return spec, nil
}

// buildSpec turns vocab.json-style strings into raw token bytes and merges
// into id pairs. Added tokens are spelled as plain text, the rest in the
// byte-level alphabet.
func buildSpec(vocab map[string]int, merges [][2]string, isAdded func(string) bool) (vocabSpec, error) {
	var spec vocabSpec
	for text, id := range vocab {
		if id < 0 || id > 1<<24 {
			return spec, fmt.Errorf("token %q has id %d", text, id)
		}
		for id >= len(spec.tokens) {
			spec.tokens = append(spec.tokens, nil)
		}
		if spec.tokens[id] != nil {
			return spec, fmt.Errorf("id %d is used twice", id)
		}
		raw, ok := byteLevelBytes(text)
		if isAdded(text) {
			raw, ok = []byte(text), true
		}
		if !ok {
			return spec, fmt.Errorf("token %q (id %d) is not in the byte-level alphabet", text, id)
		}
		spec.tokens[id] = raw
	}
	for i, m := range merges {
		left, okL := vocab[m[0]]
		right, okR := vocab[m[1]]
		if !okL || !okR {
			return spec, fmt.Errorf("merge %d (%q %q) uses a token not in the vocabulary", i+1, m[0], m[1])
		}
		spec.merges = append(spec.merges, [2]int32{int32(left), int32(right)})
	}
	return spec, nil
}

// splitMerge splits a merges.txt line "a b" into its two tokens.
func splitMerge(line string) (left, right string, ok bool) {
	left, right, ok = strings.Cut(line, " ")
	return left, right, ok && left != "" && right != "" && !strings.Contains(right, " ")
}
