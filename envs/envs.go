// Package envs owns the isolated Python environments of the third-party
// backends (vLLM, SGLang, TensorRT-LLM): their pinned requirement sets, how
// the harness finds each one's interpreter, how `bench envs setup` creates
// them, what `bench envs check` and `bench envs versions` probe inside them,
// and the small offline drivers that run inside them.
//
// Each backend gets its own environment because their pins conflict (torch
// builds in particular: vllm 0.13.0 ran with torch 2.9.0, sglang 0.5.7 pins
// torch 2.9.1, tensorrt_llm 1.1.0 brings a torch 2.7/2.8; requirements/*.txt
// say where each pin comes from). The package imports nothing of the
// project: harness/backend builds server commands on top of it and cmd/bench
// prints what it returns.
package envs

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Backend is one third-party backend's environment.
type Backend struct {
	Name    string // vllm, sglang, trtllm: the --backends name and the .venvs/<name> directory
	Display string // vLLM, SGLang, TensorRT-LLM
	// Module is the import name probed for "import ok"; Dist the
	// distribution whose version is reported.
	Module string
	Dist   string
	// Python is the interpreter version the pins were made for (seed 001).
	Python string
	// EnvVars name the interpreter, first match wins (the original's
	// ROSELLM_*_PYTHON, then the short form).
	EnvVars []string
	// Requirements is the pinned requirement file under requirements/.
	Requirements string
	// ExtraIndexURLs are package indexes besides PyPI that the pins need.
	ExtraIndexURLs []string
	// SystemPackages are OS packages the runtime needs (not installed by
	// setup; printed as a hint).
	SystemPackages []string
	// TorchDist is the torch distribution whose version is probed too.
	TorchDist string
}

// Backends are the three isolated environments, in the original's run order.
var Backends = []Backend{
	{
		Name: "vllm", Display: "vLLM", Module: "vllm", Dist: "vllm", Python: "3.10",
		EnvVars:      []string{"ROSELLM_VLLM_PYTHON", "VLLM_PYTHON"},
		Requirements: "requirements/vllm.txt",
		// vLLM's wheels of this era are built against CUDA 12.9; its
		// install docs add PyTorch's cu129 index for the matching torch.
		ExtraIndexURLs: []string{"https://download.pytorch.org/whl/cu129"},
		TorchDist:      "torch",
	},
	{
		Name: "sglang", Display: "SGLang", Module: "sglang", Dist: "sglang", Python: "3.10",
		EnvVars:        []string{"ROSELLM_SGLANG_PYTHON", "SGLANG_PYTHON"},
		Requirements:   "requirements/sglang.txt",
		SystemPackages: []string{"libnuma1"},
		TorchDist:      "torch",
	},
	{
		Name: "trtllm", Display: "TensorRT-LLM", Module: "tensorrt_llm", Dist: "tensorrt_llm", Python: "3.12",
		EnvVars:        []string{"ROSELLM_TRTLLM_PYTHON", "TRTLLM_PYTHON"},
		Requirements:   "requirements/trtllm.txt",
		ExtraIndexURLs: []string{"https://pypi.nvidia.com"},
		SystemPackages: []string{"libopenmpi-dev"},
		TorchDist:      "torch",
	},
}

// Lookup finds a backend by name.
func Lookup(name string) (Backend, error) {
	for _, b := range Backends {
		if b.Name == name {
			return b, nil
		}
	}
	return Backend{}, fmt.Errorf("unknown python backend %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// Names lists the backends' names in order.
func Names() []string {
	out := make([]string, len(Backends))
	for i, b := range Backends {
		out[i] = b.Name
	}
	return out
}

// Select turns a list of names ("" or "all" = every backend) into backends,
// in the order given, without duplicates.
func Select(names []string) ([]Backend, error) {
	if len(names) == 0 || (len(names) == 1 && (names[0] == "" || names[0] == "all")) {
		return Backends, nil
	}
	var out []Backend
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		b, err := Lookup(n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Layout is where the environments live: <Root>/.venvs/<backend>.
type Layout struct {
	Root string // the repository root (or the working directory outside one)
}

// VenvsDir is <root>/.venvs (git-ignored).
func (l Layout) VenvsDir() string { return filepath.Join(l.Root, ".venvs") }

// VenvDir is one backend's environment directory.
func (l Layout) VenvDir(b Backend) string { return filepath.Join(l.VenvsDir(), b.Name) }

// VenvPython is the interpreter setup creates for b.
func (l Layout) VenvPython(b Backend) string { return filepath.Join(l.VenvDir(b), "bin", "python") }

// SetupCommand is what a user runs to create b's environment.
func SetupCommand(b Backend) string { return "bench envs setup " + b.Name }

// sortedKeys returns a map's keys in order (for stable output).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
