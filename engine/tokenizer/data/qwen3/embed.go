// Package qwen3data carries the real Qwen3 tokenizer files of this folder
// (see README.md) in the binary, so that init-model writes them into a
// checkpoint directory with no network.
package qwen3data

import _ "embed"

// TokenizerJSONGz is tokenizer.json, gzip-compressed.
//
//go:embed tokenizer.json.gz
var TokenizerJSONGz []byte

// TokenizerConfigJSON is tokenizer_config.json, as HF ships it.
//
//go:embed tokenizer_config.json
var TokenizerConfigJSON []byte
