// Package arch is the vocabulary a model family is described in: the generic
// Config (the sizes every device needs), Weights (one fp32 allocation of
// named tensors in the canonical layout the devices agree on), the tensor
// specs that map them to a checkpoint's names and layout, the ops of a
// forward pass, and the Family record that ties one family's description
// together, with the registry of known families.
//
// It sits below engine/model and the family packages (engine/model/gpt2, …):
// a family imports arch to describe itself, and engine/model imports the
// families to register them, so arch imports nothing from the engine.
// Callers reach Config and Weights through engine/model, which re-exports
// them; devices read the op vocabulary (op.go) here.
//
// Size letters, used in shape comments across engine/ (as in llm.c):
//
//	L    number of layers                 (n_layer, num_hidden_layers)
//	NH   number of query heads            (n_head, num_attention_heads)
//	NKV  number of key/value heads        (NH without grouped-query attention)
//	HS   head size                        (C / NH for GPT-2; head_dim)
//	C    channels, the residual width     (n_embd, hidden_size)
//	I    MLP hidden width                 (4C for GPT-2; intermediate_size)
//	V    vocabulary size                  (vocab_size)
//	maxT maximum sequence length          (n_positions, max_position_embeddings)
//	T    tokens of one sequence, T <= maxT
//	BT   tokens of one forward step (all sequences of a batch, flattened)
//	M    rows that sample in a step (one per sampling sequence)
//
// # How to add a family
//
//  1. Write a package under engine/model (say engine/model/qwen3) that
//     declares one Family value: HF config.json parsing and writing,
//     presets, the tensor specs (canonical names and shapes, the checkpoint's
//     names, whether the file stores a matrix transposed or as several
//     stacked parts, as Qwen3's q|k|v and gate|up), the random-init
//     rule, the Program (the ops of the embedding, of one layer, of the
//     head), its tokenizer kind and its chat format.
//  2. Register it: the package's init calls Register, and one import line in
//     engine/model/families.go links it into every binary.
//  3. If its Program uses an op kind no family used before, add the kind
//     to op.go and implement it on each device (engine/device/cpu,
//     engine/device/cuda); a device rejects at construction a Program with
//     a kind it lacks. (Qwen3 added OpRMSNorm, OpSwiGLU and attention's
//     q/k norms, rotary positions and NKV < NH with HS != C/NH; the CPU
//     device runs them, the CUDA device does not yet.)
//  4. If its tokenizer kind is new, engine/launch maps the kind to a
//     tokenizer.
//
// Devices never name a family: they run the Program over the Weights.
package arch

import (
	"fmt"
	"sort"
)

// Family describes one model family, e.g. GPT-2, in one place.
type Family struct {
	Name  string // HF config.json "model_type", e.g. "gpt2"
	Title string // for messages, e.g. "GPT-2"

	// Presets are the built-in shapes, by preset name (unique across
	// families). Their weights come from InitRandom.
	Presets map[string]Config
	// TokenizerKind names the tokenizer that reads the family's files and,
	// where the family has one, the built-in tokenizer used when a checkpoint
	// has no tokenizer files ("gpt2-bpe": GPT-2's byte-level BPE).
	TokenizerKind string
	// Chat renders a conversation as the prompt the model continues; an
	// error is the client's (a message the format cannot render).
	Chat func(msgs []ChatMessage, opts ChatOptions) (string, error)

	// ParseConfig decodes config.json and rejects variants the Program does
	// not implement; the result is complete and valid.
	ParseConfig func(data []byte) (Config, error)
	// ConfigJSON encodes c as config.json, as transformers writes it for
	// this model type; torchDtype is the safetensors dtype beside it.
	ConfigJSON func(c Config, torchDtype string) ([]byte, error)
	// Complete fills the sizes the family derives from others when they
	// are zero (as HF's n_inner: null means 4·n_embd).
	Complete func(c Config) Config
	// Validate checks what the family's Program relies on, in the family's
	// config.json vocabulary; c is complete.
	Validate func(c Config) error

	// Tensors lists every parameter, in Weights.Data order. Consecutive
	// per-layer specs are stored layer-major in the checkpoint file
	// (all of layer 0's, then layer 1's), the others in list order.
	Tensors func(c Config) []TensorSpec
	// FileName maps a tensor name found in model.safetensors to the
	// spelling of TensorSpec.File, or reports false for tensors the model
	// does not use (causal-mask buffers, a tied LM head).
	FileName func(name string) (string, bool)
	// InitRandom gives the distribution of the checkpoint tensor fileName
	// (one layer's, already formatted) in random weights.
	InitRandom func(c Config, fileName string) (mean, std float64)

	// Program is the forward pass as ops.
	Program func(c Config) Program
}

// ChatMessage is one turn of a chat conversation: role is "system",
// "developer", "user" or "assistant" (the server has validated it).
type ChatMessage struct {
	Role, Content string
	// ReasoningContent is an assistant turn's reasoning given apart from
	// its content (vLLM's reasoning_content); nil when absent, which a
	// template tells from "".
	ReasoningContent *string
}

// ChatOptions are a chat format's switches, as HF apply_chat_template and
// vLLM's chat_template_kwargs name them. A format without them ignores
// what it does not use.
type ChatOptions struct {
	// AddGenerationPrompt ends the prompt with the opening of the
	// assistant's turn; the chat completions API always sets it.
	AddGenerationPrompt bool
	// EnableThinking lets a reasoning model think before it answers. The
	// templates' default is true; the server sets it true unless the
	// request's chat_template_kwargs say false.
	EnableThinking bool
}

// LegacyFamily is the family of a Config whose Family is empty: Go literals
// that name only sizes, and config.json files without "model_type", are
// GPT-2 models.
const LegacyFamily = "gpt2"

var families = map[string]*Family{}

// Register adds a family; each family package registers itself in its
// init, and engine/model/families.go imports every one. A name or preset
// registered twice panics.
func Register(f *Family) {
	if _, dup := families[f.Name]; dup {
		panic("arch: family " + f.Name + " registered twice")
	}
	for name := range f.Presets {
		if other, _, ok := LookupPreset(name); ok {
			panic(fmt.Sprintf("arch: preset %q of %s is also %s's", name, f.Name, other.Name))
		}
	}
	families[f.Name] = f
}

// Lookup returns the family whose HF model_type is name ("" means
// LegacyFamily).
func Lookup(name string) (*Family, error) {
	if name == "" {
		name = LegacyFamily
	}
	f, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("model_type %q is not supported (supported: %v)", name, FamilyNames())
	}
	return f, nil
}

// LookupPreset finds the family that has a preset of this name.
func LookupPreset(name string) (*Family, Config, bool) {
	for _, f := range families {
		if c, ok := f.Presets[name]; ok {
			return f, c, true
		}
	}
	return nil, Config{}, false
}

// FamilyNames lists the registered model types, sorted.
func FamilyNames() []string {
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PresetNames lists every family's presets, sorted.
func PresetNames() []string {
	var names []string
	for _, f := range families {
		for n := range f.Presets {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
