package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// WriteFiles writes the tokenizer into dir in HF's GPT-2 layout: vocab.json,
// merges.txt, tokenizer_config.json and special_tokens_map.json, which
// transformers' GPT2Tokenizer/GPT2TokenizerFast and Load read back. The
// built-in Qwen3 tokenizer writes its own tokenizer.json and
// tokenizer_config.json instead (the GPT-2 layout cannot say NFC or Qwen2's
// split); any other tokenizer with Qwen2's pipeline is an error. dir is
// created if missing; existing files are replaced.
func (t *Tokenizer) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tokenizer files: %w", err)
	}
	if t.sourceFiles != nil {
		files, err := t.sourceFiles()
		if err != nil {
			return fmt.Errorf("tokenizer files: %w", err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return fmt.Errorf("tokenizer files: %w", err)
			}
		}
		return nil
	}
	if t.split != splitGPT2 || t.nfc {
		return fmt.Errorf("tokenizer files: only GPT-2's pipeline can be written as vocab.json + merges.txt")
	}
	files := []struct {
		name string
		data []byte
	}{
		{"vocab.json", t.vocabJSON()},
		{"merges.txt", t.mergesTxt()},
		{"tokenizer_config.json", t.tokenizerConfigJSON()},
		{"special_tokens_map.json", t.specialTokensMapJSON()},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return fmt.Errorf("tokenizer files: %w", err)
		}
	}
	return nil
}

// vocabText is how token id is spelled in vocab.json: added tokens by their
// content, BPE tokens in the byte-level alphabet.
func (t *Tokenizer) vocabText(id int32) string {
	for _, a := range t.added {
		if a.id == id {
			return a.content
		}
	}
	return byteLevelString([]byte(t.tokenBytes(id)))
}

// jsonString quotes s as JSON without Go's HTML escaping, so <|endoftext|>
// stays readable.
func jsonString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// vocabJSON is one object, keys in id order (as GPT-2's own file).
func (t *Tokenizer) vocabJSON() []byte {
	out := []byte{'{'}
	first := true
	for id := range t.wholeText {
		if t.tokenBytes(int32(id)) == "" {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, jsonString(t.vocabText(int32(id)))...)
		out = append(out, ':')
		out = strconv.AppendInt(out, int64(id), 10)
	}
	return append(out, '}', '\n')
}

func (t *Tokenizer) mergesTxt() []byte {
	out := []byte("#version: 0.2\n")
	for _, m := range t.mergeList {
		out = append(out, t.vocabText(m[0])...)
		out = append(out, ' ')
		out = append(out, t.vocabText(m[1])...)
		out = append(out, '\n')
	}
	return out
}

// addedTokenJSON is an entry of tokenizer_config.json's added_tokens_decoder.
type addedTokenJSON struct {
	Content    string `json:"content"`
	Lstrip     bool   `json:"lstrip"`
	Normalized bool   `json:"normalized"`
	Rstrip     bool   `json:"rstrip"`
	SingleWord bool   `json:"single_word"`
	Special    bool   `json:"special"`
}

// tokenizerConfigJSON pins the behaviour Encode/Decode implement: no BOS, no
// prefix space, and no clean-up of spaces on decode (HF's clean-up would turn
// " ." into ".", which is not GPT-2's text).
func (t *Tokenizer) tokenizerConfigJSON() []byte {
	eos := t.vocabText(t.eos)
	decoder := map[string]addedTokenJSON{}
	for _, a := range t.added {
		decoder[strconv.Itoa(int(a.id))] = addedTokenJSON{Content: a.content, Normalized: true, Special: a.special}
	}
	cfg := map[string]any{
		"add_bos_token":                false,
		"add_prefix_space":             false,
		"added_tokens_decoder":         decoder,
		"bos_token":                    eos,
		"clean_up_tokenization_spaces": false,
		"eos_token":                    eos,
		"errors":                       "replace",
		"pad_token":                    nil,
		"tokenizer_class":              "GPT2Tokenizer",
		"unk_token":                    eos,
	}
	return marshalIndented(cfg)
}

func (t *Tokenizer) specialTokensMapJSON() []byte {
	eos := t.vocabText(t.eos)
	return marshalIndented(map[string]any{"bos_token": eos, "eos_token": eos, "unk_token": eos})
}

// marshalIndented renders v with sorted keys and no HTML escaping.
func marshalIndented(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // maps of strings, bools and nil always encode
	return buf.Bytes()
}
