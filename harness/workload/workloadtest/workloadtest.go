// Package workloadtest writes checkpoint directories for harness tests: the
// files `roseinfer init-model` writes, through the same engine calls, so a
// test needs no built binary to get a model directory. Tests only.
package workloadtest

import (
	"github.com/roseinfer/roseinfer/engine/launch"
	"github.com/roseinfer/roseinfer/engine/model"
)

// Qwen3Tiny writes a qwen3-tiny checkpoint (random bf16 weights, seed 1)
// with generation_config.json and the real Qwen3 tokenizer files into dir,
// as `roseinfer init-model --preset qwen3-tiny --out dir` does.
func Qwen3Tiny(dir string) error {
	cfg, err := model.Preset("qwen3-tiny")
	if err != nil {
		return err
	}
	w, err := model.InitRandom(cfg, 1)
	if err != nil {
		return err
	}
	if err := model.WriteCheckpoint(dir, cfg, w, model.BF16); err != nil {
		return err
	}
	return launch.WriteModelFiles(dir, cfg)
}
