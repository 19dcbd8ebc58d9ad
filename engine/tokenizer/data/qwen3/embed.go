// Package qwen3data carries the real Qwen3 tokenizer files (see README.md for their origin and licence) inside the
// binary, so that roseinfer and its tests need no network and read nothing outside the repository.
package qwen3data

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
)

//go:embed tokenizer.json.gz
var tokenizerJSONGz []byte

//go:embed tokenizer_config.json
var tokenizerConfigJSON []byte

// TokenizerJSON returns HF tokenizer.json of Qwen3, gunzipped (about 11 MB; a fresh copy on every call).
func TokenizerJSON() ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(tokenizerJSONGz))
	if err != nil {
		return nil, fmt.Errorf("qwen3data: tokenizer.json.gz: %w", err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("qwen3data: tokenizer.json.gz: %w", err)
	}
	return b, nil
}

// TokenizerConfigJSON returns HF tokenizer_config.json of Qwen3 as committed (the caller must not modify it).
func TokenizerConfigJSON() []byte { return tokenizerConfigJSON }
