// Package model is the front door to model families: the registry (lookup
// by HF model_type and by preset name), HF checkpoint directories
// (config.json + model.safetensors) in both directions, dispatched by
// config.json's model_type, and deterministic random weights for the
// presets.
//
// What a model is made of (Config, Weights, tensor specs, ops, the Family
// record) is defined in engine/model/arch, below this package and the
// family packages, and re-exported here; each family is one package
// (engine/model/gpt2, …). arch's package doc says how to add a family. It
// owns no compute: devices (engine/device/cpu, engine/device/cuda) run a
// family's Program over the Weights. It imports nothing from the engine.
package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/roseinfer/roseinfer/engine/model/arch"
	"github.com/roseinfer/roseinfer/engine/model/gpt2"
)

// Config and Weights are arch's: the sizes every device needs, and the
// parameters in the canonical layout.
type (
	Config  = arch.Config
	Weights = arch.Weights
	Family  = arch.Family
)

// GPT2VocabSize is the real GPT-2 vocabulary, kept by every GPT-2 preset.
const GPT2VocabSize = gpt2.VocabSize

// Lookup returns the family of an HF model_type ("" is GPT-2); an unknown
// one is an error listing the supported types.
func Lookup(modelType string) (*Family, error) { return arch.Lookup(modelType) }

// Preset returns the configuration of a built-in model (PresetNames).
func Preset(name string) (Config, error) {
	_, c, ok := arch.LookupPreset(name)
	if !ok {
		return Config{}, fmt.Errorf("model: unknown preset %q (known: %v)", name, PresetNames())
	}
	return c, nil
}

// PresetNames lists the built-in presets of every family, sorted.
func PresetNames() []string { return arch.PresetNames() }

// NewWeights allocates zeroed weights for c, in one buffer.
func NewWeights(c Config) (*Weights, error) { return arch.NewWeights(c) }

// ReadConfig reads an HF config.json of any registered family.
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("model: read config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("model: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes config.json bytes with the family its model_type
// names (absent: GPT-2), which rejects variants its Program does not
// implement, so that a checkpoint never loads into the wrong math.
func ParseConfig(data []byte) (Config, error) {
	var head struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Config{}, fmt.Errorf("decode config.json: %w", err)
	}
	f, err := arch.Lookup(head.ModelType)
	if err != nil {
		return Config{}, err
	}
	return f.ParseConfig(data)
}

// WriteConfig writes config.json as transformers writes it for c's family,
// so its from_pretrained reads it as the same model. torchDtype is the
// safetensors dtype written beside it ("float32", "float16", "bfloat16").
func WriteConfig(path string, c Config, torchDtype string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	c = c.Complete()
	f, _ := arch.Lookup(c.Family)
	data, err := f.ConfigJSON(c, torchDtype)
	if err != nil {
		return fmt.Errorf("model: encode config: %w", err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// writeFileAtomic writes through a temporary file and a rename, so a reader
// never sees half a checkpoint file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("model: create %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Chmod(0o644) // CreateTemp makes 0600; checkpoints are shared files
	}
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("model: write %s: %w", path, werr)
	}
	return nil
}
