// Package launch builds a running engine from a handful of options: the one
// small engine API that `roseinfer serve`/`generate` and the harness's
// in-process offline runner share. It picks the model (a checkpoint
// directory or the built-in preset) and with it the model family, whose
// tokenizer kind and chat format it reports, the tokenizer and the device
// (cpu, sim or cuda), sizes the KV cache and starts engine.New over the
// device.
//
// It works in two steps because serve opens its port before the weights
// load: Resolve reads the model config and tokenizer and chooses the device
// (cheap); Resolved.Start loads the weights, builds the device and starts
// the engine (slow).
package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cuda"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/gpt2"
	"github.com/roseinfer/roseinfer/engine/model/qwen3"
	"github.com/roseinfer/roseinfer/engine/profile/phase"
	"github.com/roseinfer/roseinfer/engine/tokenizer"
)

// Options say which engine to build. Each field is a `roseinfer serve` flag
// (named in the comment), and validation errors name those flags.
type Options struct {
	ModelDir  string // --model: HF checkpoint directory; "" = the built-in preset, no disk
	ModelSeed uint64 // --model-seed: weights seed of the built-in preset
	Device    string // --device: auto, cpu, sim or cuda (auto: cuda when usable, else cpu)

	SimStep            time.Duration // --sim-step-us: sim device, duration of every step
	SimPrefillPerToken time.Duration // --sim-prefill-us-per-token: sim device, extra time per prefill token
	CPUThreads         int           // --cpu-threads: cpu device goroutines (0 = GOMAXPROCS)

	MaxNumSeqs          int  // --max-num-seqs
	MaxNumBatchedTokens int  // --max-num-batched-tokens
	PrefillChunkSize    int  // --prefill-chunk-size
	ChunkedPrefill      bool // --chunked-prefill
	PrefixCache         bool // --prefix-cache
	BlockSizeTokens     int  // --block-size
	KVCacheTokens       int  // --kv-cache-tokens: 0 = sized per device (see NumKVBlocks)
	MaxPending          int  // --max-pending: 0 = unlimited

	CUDAGraph bool // --cuda-graph: cuda replays decode steps as graphs
	// CUDAChunkRows (--cuda-chunk-rows): cuda.Options.ChunkRows, the
	// longest prompt chunk run as one-token rows (0 = default, < 0 = off).
	CUDAChunkRows int
	// OverlapSchedule (--overlap-schedule) plans step N+1 while step N runs
	// on devices that run asynchronously (sim and cuda); cpu runs
	// synchronously whatever it says.
	OverlapSchedule      bool
	GPUMemoryUtilization float64 // --gpu-memory-utilization: cuda, when KVCacheTokens is 0
	// DType (--dtype): auto (each device's precision for the model), or
	// one the device computes the model in (dtype.go): float32 runs Qwen3
	// on cuda in fp32 (cuda.Options.Float32).
	DType string

	// Observer, when set, is told the phases of every engine step
	// (engine.Config.Observer): serve's profiler recorder.
	Observer phase.Observer
	// OnDevice, when set, is given the device once it is built and before
	// the engine starts, so an observer can ask it for device-side spans
	// (engine/profile's Recorder.ObserveDevice).
	OnDevice func(dev device.Device)
}

// BuiltinPreset is the model built when Options.ModelDir is empty.
const BuiltinPreset = "tiny"

// cpuKVBudgetBytes caps the default CPU KV cache: the gpt2 preset needs
// 72 KiB per token, so 256 full contexts would take 18 GiB.
const cpuKVBudgetBytes = 2 << 30

// Defaults are `roseinfer serve`'s defaults: the built-in model on the best
// device, chunked prefill, prefix cache, CUDA graphs and overlap scheduling.
func Defaults() Options {
	return Options{
		Device:               "auto",
		SimStep:              time.Millisecond,
		MaxNumSeqs:           engine.DefaultMaxNumSeqs,
		MaxNumBatchedTokens:  engine.DefaultMaxNumBatchedTokens,
		PrefillChunkSize:     engine.DefaultPrefillChunkSize,
		ChunkedPrefill:       true,
		PrefixCache:          true,
		BlockSizeTokens:      engine.DefaultBlockSizeTokens,
		CUDAGraph:            true,
		OverlapSchedule:      true,
		GPUMemoryUtilization: cuda.DefaultOptions.GPUMemoryUtilization,
		DType:                DTypeAuto,
	}
}

// Validate checks the numbers and the device name before anything is loaded.
func (o *Options) Validate() error {
	switch {
	case o.MaxNumSeqs < 1:
		return fmt.Errorf("--max-num-seqs must be at least 1, got %d", o.MaxNumSeqs)
	case o.MaxNumBatchedTokens < 1:
		return fmt.Errorf("--max-num-batched-tokens must be at least 1, got %d", o.MaxNumBatchedTokens)
	case o.PrefillChunkSize < 1:
		return fmt.Errorf("--prefill-chunk-size must be at least 1, got %d", o.PrefillChunkSize)
	case o.BlockSizeTokens < 1:
		return fmt.Errorf("--block-size must be at least 1, got %d", o.BlockSizeTokens)
	case o.KVCacheTokens < 0 || o.MaxPending < 0 || o.CPUThreads < 0:
		return errors.New("--kv-cache-tokens, --max-pending and --cpu-threads must not be negative")
	case o.SimStep < 0 || o.SimPrefillPerToken < 0:
		return errors.New("--sim-step-us and --sim-prefill-us-per-token must not be negative")
	case o.GPUMemoryUtilization <= 0 || o.GPUMemoryUtilization > 1:
		return fmt.Errorf("--gpu-memory-utilization must be in (0, 1], got %g", o.GPUMemoryUtilization)
	case canonicalDType(o.DType) == "":
		return fmt.Errorf("--dtype must be auto, float32 (float), bfloat16 or float16 (half), got %q", o.DType)
	}
	switch o.Device {
	case "auto", "cpu", "sim", "cuda":
		return nil
	}
	return fmt.Errorf("--device must be auto, cpu, sim or cuda, got %q", o.Device)
}

// Resolved is what is known before the weights load: enough to validate
// requests and open a server.
type Resolved struct {
	Options   Options // as given; Device may still say "auto"
	Name      string  // for logs: the directory or "built-in tiny"
	Device    string  // chosen: cpu, sim or cuda
	Model     model.Config
	Family    *model.Family // Model's: tokenizer kind, chat format
	Tokenizer *tokenizer.Tokenizer
	// StopTokens end a generation beside Model.EOSTokenID (StopTokenIDs):
	// for a Qwen3 directory <|im_end|> and <|endoftext|>; nil for the
	// built-in preset.
	StopTokens []int32
}

// Resolve validates o, picks the device and reads the model's config,
// tokenizer and stop ids. log (nil = silent) gets a warning when a
// checkpoint has no tokenizer files and its family's built-in tokenizer is
// used.
func Resolve(o Options, log *slog.Logger) (*Resolved, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log = orDiscard(log)
	r := &Resolved{Options: o, Device: o.Device}
	switch o.Device {
	case "auto":
		r.Device = "cpu"
		if cuda.Available() == nil {
			r.Device = "cuda"
		}
	case "cuda":
		if err := cuda.Available(); err != nil {
			return nil, fmt.Errorf("--device cuda is not available on this machine: %w", err)
		}
	}
	var err error
	if o.ModelDir == "" {
		r.Name = "built-in " + BuiltinPreset
		if r.Model, err = model.Preset(BuiltinPreset); err != nil {
			return nil, err
		}
		if r.Family, err = model.Lookup(r.Model.Family); err != nil {
			return nil, err
		}
		if r.Tokenizer, err = BuiltinTokenizer(r.Family.TokenizerKind); err != nil {
			return nil, fmt.Errorf("%s tokenizer: %w", r.Family.Title, err)
		}
		if err := checkDType(canonicalDType(o.DType), r.Device, r.Family); err != nil {
			return nil, err
		}
		return r, nil
	}
	r.Name = o.ModelDir
	if r.Model, err = model.ReadConfig(filepath.Join(o.ModelDir, model.ConfigFile)); err != nil {
		return nil, err
	}
	if r.Family, err = model.Lookup(r.Model.Family); err != nil {
		return nil, err
	}
	if err := checkDType(canonicalDType(o.DType), r.Device, r.Family); err != nil {
		return nil, err
	}
	if r.Tokenizer, err = loadTokenizer(o.ModelDir, r.Model, r.Family, log); err != nil {
		return nil, err
	}
	if r.StopTokens, err = StopTokenIDs(o.ModelDir, r.Model.VocabSize); err != nil {
		return nil, err
	}
	return r, nil
}

// BuiltinTokenizer is the tokenizer engine/tokenizer carries for a
// family's tokenizer kind (arch.Family.TokenizerKind): what the built-in
// preset uses, what init-model writes, and the fallback for a checkpoint
// without tokenizer files.
func BuiltinTokenizer(kind string) (*tokenizer.Tokenizer, error) {
	switch kind {
	case gpt2.TokenizerKind:
		return tokenizer.Default()
	case qwen3.TokenizerKind:
		return tokenizer.Qwen3()
	}
	return nil, fmt.Errorf("no built-in tokenizer of kind %q", kind)
}

// loadTokenizer reads the directory's tokenizer; a directory with no
// tokenizer files at all gets the family's built-in one if the vocabulary
// size fits it (its tokens, padded by at most the next multiple of 1,024).
func loadTokenizer(dir string, cfg model.Config, fam *model.Family, log *slog.Logger) (*tokenizer.Tokenizer, error) {
	tok, err := tokenizer.Load(dir)
	if err == nil {
		if tok.VocabSize() > cfg.VocabSize {
			return nil, fmt.Errorf("%s: the tokenizer has %d tokens, the model %d", dir, tok.VocabSize(), cfg.VocabSize)
		}
		return tok, nil
	}
	for _, name := range []string{"tokenizer.json", "vocab.json", "merges.txt"} {
		if _, serr := os.Stat(filepath.Join(dir, name)); !errors.Is(serr, fs.ErrNotExist) {
			return nil, err
		}
	}
	builtin, berr := BuiltinTokenizer(fam.TokenizerKind)
	if berr != nil {
		return nil, fmt.Errorf("%s has no tokenizer files: %w", dir, berr)
	}
	// Checkpoints pad the embedding past the tokenizer (Qwen3: 151,669
	// tokens in 151,936 rows); anything else is another vocabulary.
	if n := builtin.VocabSize(); cfg.VocabSize < n || cfg.VocabSize > (n+1023)/1024*1024 {
		return nil, fmt.Errorf("%s has no tokenizer files and its vocabulary (%d) is not %s's (%d tokens)", dir, cfg.VocabSize,
			fam.Title, n)
	}
	log.Warn("no tokenizer files in the model directory; using "+fam.Title+"'s", "dir", dir)
	return builtin, nil
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
