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

// LoadCheckpoint reads an HF GPT-2 directory (config.json + model.safetensors)
// into fp32 weights. Tokenizer files in the directory are not its concern.
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

// WriteCheckpoint writes dir/config.json and dir/model.safetensors (HF GPT-2
// naming without the "transformer." prefix, like the published gpt2
// checkpoint; lm_head omitted because it is tied to wte) so that
// transformers' GPT2LMHeadModel.from_pretrained(dir) loads the same model.
// cfg must be w's config; it is passed so the call site says what it writes.
func WriteCheckpoint(dir string, cfg Config, w *Weights, dtype DType) error {
	if cfg != w.Config {
		return fmt.Errorf("model: WriteCheckpoint: config %+v differs from the weights' %+v", cfg, w.Config)
	}
	if !dtype.valid() {
		return fmt.Errorf("model: WriteCheckpoint: invalid dtype %v", dtype)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: create %s: %w", dir, err)
	}
	if err := writeSafetensors(filepath.Join(dir, SafetensorsFile), w.Tensors(), dtype); err != nil {
		return err
	}
	return WriteConfig(filepath.Join(dir, ConfigFile), cfg, dtype.torchName())
}
