package launch

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/qwen3"
	qwen3data "github.com/roseinfer/roseinfer/engine/tokenizer/data/qwen3"
)

// WriteModelFiles writes what a checkpoint directory of cfg's family carries
// beside config.json and the weights: for Qwen3, generation_config.json (bos
// and the two stop ids) and the real tokenizer files committed at
// engine/tokenizer/data/qwen3; for the other families, the files of their
// built-in tokenizer. init-model and the harness's test checkpoints share it.
func WriteModelFiles(dir string, cfg model.Config) error {
	fam, err := model.Lookup(cfg.Family)
	if err != nil {
		return err
	}
	if fam.Name != qwen3.Family.Name {
		tok, err := BuiltinTokenizer(fam.TokenizerKind)
		if err != nil {
			return err
		}
		return tok.WriteFiles(dir)
	}
	gen, err := qwen3.GenerationConfigJSON(cfg)
	if err != nil {
		return err
	}
	tokJSON, err := qwen3data.TokenizerJSON()
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{GenerationConfigFile: gen, "tokenizer.json": tokJSON,
		"tokenizer_config.json": qwen3data.TokenizerConfigJSON()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
