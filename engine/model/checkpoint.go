package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Checkpoint file names inside an HF model directory.
const (
	ConfigFile      = "config.json"
	SafetensorsFile = "model.safetensors"
)

// LoadCheckpoint reads an HF checkpoint directory (config.json +
// model.safetensors) of any registered family, chosen by config.json's
// model_type, into fp32 weights in the canonical layout. Tokenizer files in
// the directory are not its concern.
func LoadCheckpoint(dir string) (*Weights, error) {
	cfg, err := ReadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	w, err := NewWeights(cfg)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	path := filepath.Join(dir, SafetensorsFile)
	if err := ReadSafetensorsFile(path, w); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("model: %s has no %s (only single-file safetensors checkpoints are supported): %w", dir, SafetensorsFile, err)
		}
		return nil, err
	}
	return w, nil
}

// ReadSafetensorsFile fills w (already sized by its Config) from a
// safetensors file, which is mapped read-only rather than copied.
func ReadSafetensorsFile(path string, w *Weights) error {
	file, unmap, err := mapFile(path)
	if err != nil {
		return fmt.Errorf("model: open %s: %w", path, err)
	}
	defer unmap()
	if err := readSafetensors(file, w); err != nil {
		return fmt.Errorf("model: %s: %w", path, err)
	}
	return nil
}

// ReadSafetensors fills w from a safetensors file image in memory.
func ReadSafetensors(file []byte, w *Weights) error {
	if err := readSafetensors(file, w); err != nil {
		return fmt.Errorf("model: safetensors: %w", err)
	}
	return nil
}

// WriteCheckpoint writes dir/config.json and dir/model.safetensors in the
// names and layout of w's family (for GPT-2: GPT2Model's names, Conv1D
// matrices, lm_head omitted because it is tied to wte) so that
// transformers' from_pretrained(dir) loads the same model. cfg must be w's
// config; it is passed so the call site says what it writes.
func WriteCheckpoint(dir string, cfg Config, w *Weights, dtype DType) error {
	if cfg.Complete() != w.Config {
		return fmt.Errorf("model: WriteCheckpoint: config %+v differs from the weights' %+v", cfg, w.Config)
	}
	if !dtype.valid() {
		return fmt.Errorf("model: WriteCheckpoint: invalid dtype %v", dtype)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: create %s: %w", dir, err)
	}
	if err := writeSafetensors(filepath.Join(dir, SafetensorsFile), fileTensors(w), dtype); err != nil {
		return err
	}
	return WriteConfig(filepath.Join(dir, ConfigFile), w.Config, dtype.torchName())
}
