package tokenizer

import (
	"io/fs"
	"sync"

	qwen3data "github.com/roseinfer/roseinfer/engine/tokenizer/data/qwen3"
)

// Qwen3Kind is the tokenizer kind of the Qwen2/Qwen2.5/Qwen3 families
// (model.Family.TokenizerKind), whose built-in tokenizer is Qwen3.
const Qwen3Kind = "qwen2-bpe"

// Qwen3 returns the real Qwen3 tokenizer (151,643 BPE tokens and 26 added
// ones, EOS <|im_end|>) built from data/qwen3, compiled into the binary. It is
// built on the first call and shared after; the build takes a few hundred
// milliseconds (see BenchmarkLoadQwen3).
func Qwen3() (*Tokenizer, error) { return qwen3Tok() }

var qwen3Tok = sync.OnceValues(buildQwen3)

func buildQwen3() (*Tokenizer, error) {
	tok, err := load("data/qwen3 (built in)", func(name string) ([]byte, error) {
		switch name {
		case "tokenizer.json":
			return qwen3data.TokenizerJSON()
		case "tokenizer_config.json":
			return qwen3data.TokenizerConfigJSON(), nil
		}
		return nil, fs.ErrNotExist
	})
	if err != nil {
		return nil, err
	}
	tok.sourceFiles = func() (map[string][]byte, error) {
		tj, err := qwen3data.TokenizerJSON()
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": qwen3data.TokenizerConfigJSON()}, nil
	}
	return tok, nil
}
