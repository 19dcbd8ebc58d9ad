package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cpu"
	"github.com/roseinfer/roseinfer/engine/device/cuda"
	"github.com/roseinfer/roseinfer/engine/device/sim"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/profile"
	"github.com/roseinfer/roseinfer/engine/profile/phase"
	"github.com/roseinfer/roseinfer/engine/tokenizer"
)

// engineOptions are the flags serve and generate share: which model, which
// device, and the scheduler and KV cache limits.
type engineOptions struct {
	modelDir  string // "" = the built-in tiny preset, no disk
	modelSeed uint64 // weights seed of the built-in preset
	device    string // auto, cpu, sim, cuda

	simStepMicros            int
	simPrefillMicrosPerToken int
	cpuThreads               int

	maxNumSeqs          int
	maxNumBatchedTokens int
	prefillChunkSize    int
	chunkedPrefill      bool
	prefixCache         bool
	blockSizeTokens     int
	kvCacheTokens       int // 0 = sized per device
	maxPending          int

	cudaGraph            bool
	overlapSchedule      bool // accepted for the harness's ablations; the engine has no overlap yet
	gpuMemoryUtilization float64

	// recorder, when set (serve), records the engine's phases for
	// /start_profile's trace.json.
	recorder *profile.Recorder
}

// builtinPreset is the model served without --model.
const builtinPreset = "tiny"

// cpuKVBudgetBytes caps the default CPU KV cache: the gpt2 preset needs
// 72 KiB per token, so 256 full contexts would take 18 GiB.
const cpuKVBudgetBytes = 2 << 30

func defaultEngineOptions() engineOptions {
	return engineOptions{
		device:               "auto",
		simStepMicros:        1000,
		maxNumSeqs:           engine.DefaultMaxNumSeqs,
		maxNumBatchedTokens:  engine.DefaultMaxNumBatchedTokens,
		prefillChunkSize:     engine.DefaultPrefillChunkSize,
		chunkedPrefill:       true,
		prefixCache:          true,
		blockSizeTokens:      engine.DefaultBlockSizeTokens,
		cudaGraph:            true,
		overlapSchedule:      true,
		gpuMemoryUtilization: cuda.DefaultOptions.GPUMemoryUtilization,
	}
}

func (o *engineOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.modelDir, "model", o.modelDir, "HF GPT-2 checkpoint directory (config.json, model.safetensors, tokenizer files); empty = the built-in tiny model, no disk")
	fs.Uint64Var(&o.modelSeed, "model-seed", o.modelSeed, "weights seed of the built-in tiny model (the weights init-model --preset tiny --seed N writes)")
	fs.StringVar(&o.device, "device", o.device, "auto, cpu, sim or cuda (auto: cuda when usable, else cpu)")
	fs.IntVar(&o.simStepMicros, "sim-step-us", o.simStepMicros, "sim device: duration of every step in µs")
	fs.IntVar(&o.simPrefillMicrosPerToken, "sim-prefill-us-per-token", o.simPrefillMicrosPerToken, "sim device: extra µs per prefill token in a step")
	fs.IntVar(&o.cpuThreads, "cpu-threads", o.cpuThreads, "cpu device: goroutines for the parallel ops (0 = GOMAXPROCS)")
	fs.IntVar(&o.maxNumSeqs, "max-num-seqs", o.maxNumSeqs, "sequences per engine step")
	fs.IntVar(&o.maxNumSeqs, "max-batch-size", o.maxNumSeqs, "alias of --max-num-seqs (the original's name)")
	fs.IntVar(&o.maxNumBatchedTokens, "max-num-batched-tokens", o.maxNumBatchedTokens, "token budget of one step (decode tokens + prefill chunks)")
	fs.IntVar(&o.prefillChunkSize, "prefill-chunk-size", o.prefillChunkSize, "most prompt tokens of one sequence per step")
	boolPair(fs, &o.chunkedPrefill, "chunked-prefill", "split long prompts over steps (--no-chunked-prefill: whole prompts)")
	boolPair(fs, &o.prefixCache, "prefix-cache", "reuse KV blocks of identical prompt prefixes")
	fs.IntVar(&o.blockSizeTokens, "block-size", o.blockSizeTokens, "tokens per KV cache block")
	fs.IntVar(&o.kvCacheTokens, "kv-cache-tokens", o.kvCacheTokens, "KV cache capacity in tokens (0 = max-num-seqs full contexts; cpu: at most 2 GiB; cuda: from --gpu-memory-utilization)")
	fs.IntVar(&o.maxPending, "max-pending", o.maxPending, "waiting requests beyond this get HTTP 429 (0 = unlimited)")
	fs.IntVar(&o.maxPending, "max-inflight-requests", o.maxPending, "alias of --max-pending (see docs/roseinfer-flags.md for the difference)")
	boolPair(fs, &o.cudaGraph, "cuda-graph", "cuda device: replay decode steps as CUDA graphs (ignored by cpu and sim)")
	boolPair(fs, &o.overlapSchedule, "overlap-schedule", "accepted for the harness's ablations; no effect yet")
	fs.Float64Var(&o.gpuMemoryUtilization, "gpu-memory-utilization", o.gpuMemoryUtilization, "cuda device: fraction of GPU memory for weights, activations and KV cache when --kv-cache-tokens is 0")
}

// boolPair registers --name and --no-name on one variable, as the original's
// argparse BooleanOptionalAction flags did.
func boolPair(fs *pflag.FlagSet, p *bool, name, usage string) {
	fs.BoolVar(p, name, *p, usage)
	f := fs.VarPF(negatedBool{p}, "no-"+name, "", "turn --"+name+" off")
	f.NoOptDefVal = "true"
}

type negatedBool struct{ p *bool }

func (n negatedBool) String() string   { return "false" }
func (n negatedBool) Type() string     { return "bool" }
func (n negatedBool) IsBoolFlag() bool { return true }
func (n negatedBool) Set(s string) error {
	switch s {
	case "true", "1":
		*n.p = false
	case "false", "0":
		*n.p = true
	default:
		return fmt.Errorf("invalid boolean %q", s)
	}
	return nil
}

// validate checks the numbers before anything is loaded.
func (o *engineOptions) validate() error {
	switch {
	case o.maxNumSeqs < 1:
		return fmt.Errorf("--max-num-seqs must be at least 1, got %d", o.maxNumSeqs)
	case o.maxNumBatchedTokens < 1:
		return fmt.Errorf("--max-num-batched-tokens must be at least 1, got %d", o.maxNumBatchedTokens)
	case o.prefillChunkSize < 1:
		return fmt.Errorf("--prefill-chunk-size must be at least 1, got %d", o.prefillChunkSize)
	case o.blockSizeTokens < 1:
		return fmt.Errorf("--block-size must be at least 1, got %d", o.blockSizeTokens)
	case o.kvCacheTokens < 0 || o.maxPending < 0 || o.cpuThreads < 0:
		return errors.New("--kv-cache-tokens, --max-pending and --cpu-threads must not be negative")
	case o.simStepMicros < 0 || o.simPrefillMicrosPerToken < 0:
		return errors.New("--sim-step-us and --sim-prefill-us-per-token must not be negative")
	case o.gpuMemoryUtilization <= 0 || o.gpuMemoryUtilization > 1:
		return fmt.Errorf("--gpu-memory-utilization must be in (0, 1], got %g", o.gpuMemoryUtilization)
	}
	switch o.device {
	case "auto", "cpu", "sim", "cuda":
		return nil
	}
	return fmt.Errorf("--device must be auto, cpu, sim or cuda, got %q", o.device)
}

// modelInfo is what is known before the weights load: enough to answer
// requests' validation and to open the server.
type modelInfo struct {
	name   string // for logs: the directory or "built-in tiny"
	device string // resolved: cpu, sim or cuda
	cfg    model.Config
	tok    *tokenizer.Tokenizer
}

// resolveModel reads the model's config and tokenizer and picks the device.
func (o *engineOptions) resolveModel(log *slog.Logger) (*modelInfo, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	info := &modelInfo{device: o.device}
	switch o.device {
	case "auto":
		info.device = "cpu"
		if cuda.Available() == nil {
			info.device = "cuda"
		}
	case "cuda":
		if err := cuda.Available(); err != nil {
			return nil, fmt.Errorf("--device cuda is not available on this machine: %w", err)
		}
	}
	var err error
	if o.modelDir == "" {
		info.name = "built-in " + builtinPreset
		if info.cfg, err = model.Preset(builtinPreset); err != nil {
			return nil, err
		}
		info.tok, err = tokenizer.Default()
		return info, err
	}
	info.name = o.modelDir
	if info.cfg, err = model.ReadConfig(filepath.Join(o.modelDir, model.ConfigFile)); err != nil {
		return nil, err
	}
	if info.tok, err = loadTokenizer(o.modelDir, info.cfg, log); err != nil {
		return nil, err
	}
	return info, nil
}

// loadTokenizer reads the directory's tokenizer; a directory with no
// tokenizer files at all gets GPT-2's if the vocabulary size matches.
func loadTokenizer(dir string, cfg model.Config, log *slog.Logger) (*tokenizer.Tokenizer, error) {
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
	if cfg.VocabSize != model.GPT2VocabSize {
		return nil, fmt.Errorf("%s has no tokenizer files and its vocabulary (%d) is not GPT-2's", dir, cfg.VocabSize)
	}
	log.Warn("no tokenizer files in the model directory; using GPT-2's", "dir", dir)
	return tokenizer.Default()
}

// numKVBlocks sizes the KV pool; 0 lets the cuda device size it from memory.
func (o *engineOptions) numKVBlocks(info *modelInfo) int {
	bs := o.blockSizeTokens
	if o.kvCacheTokens > 0 {
		return (o.kvCacheTokens + bs - 1) / bs
	}
	fullContexts := o.maxNumSeqs * ((info.cfg.MaxSeqLen + bs - 1) / bs)
	switch info.device {
	case "cuda":
		return 0
	case "cpu":
		bytesPerBlock := 2 * info.cfg.NumLayers * bs * info.cfg.Channels * 4 // K and V, fp32
		return max(min(fullContexts, cpuKVBudgetBytes/bytesPerBlock), (info.cfg.MaxSeqLen+bs-1)/bs)
	}
	return fullContexts
}

// startEngine loads the weights, builds the device and starts the engine.
func (o *engineOptions) startEngine(info *modelInfo, log *slog.Logger) (*engine.Engine, error) {
	kv := device.KVConfig{NumBlocks: o.numKVBlocks(info), BlockSizeTokens: o.blockSizeTokens}
	start := time.Now()
	dev, err := o.openDevice(info, &kv)
	if err != nil {
		return nil, err
	}
	var observer phase.Observer
	if o.recorder != nil {
		o.recorder.ObserveDevice(dev) // GPU times, if the device reports them
		observer = o.recorder
	}
	eng, err := engine.New(engine.Config{
		MaxNumSeqs:          o.maxNumSeqs,
		MaxNumBatchedTokens: o.maxNumBatchedTokens,
		PrefillChunkSize:    o.prefillChunkSize,
		ChunkedPrefill:      o.chunkedPrefill,
		BlockSizeTokens:     o.blockSizeTokens,
		NumBlocks:           kv.NumBlocks,
		PrefixCache:         o.prefixCache,
		MaxPending:          o.maxPending,
		MaxModelLen:         info.cfg.MaxSeqLen,
		EOSToken:            info.cfg.EOSTokenID,
		OverlapSchedule:     o.overlapSchedule,
		Observer:            observer,
	}, dev)
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	log.Info("engine ready", "model", info.name, "device", info.device, "kv_blocks", kv.NumBlocks,
		"block_size", kv.BlockSizeTokens, "max_num_seqs", o.maxNumSeqs, "load_s", time.Since(start).Seconds())
	return eng, nil
}

// openDevice builds the device; for cuda it reads back the KV pool size the
// device chose from free memory.
func (o *engineOptions) openDevice(info *modelInfo, kv *device.KVConfig) (device.Device, error) {
	if info.device == "sim" {
		return sim.New(sim.Options{
			StepDuration:    time.Duration(o.simStepMicros) * time.Microsecond,
			PrefillPerToken: time.Duration(o.simPrefillMicrosPerToken) * time.Microsecond,
			VocabSize:       info.cfg.VocabSize,
			EOS:             info.cfg.EOSTokenID,
		})
	}
	w, err := o.loadWeights(info)
	if err != nil {
		return nil, err
	}
	if info.device == "cuda" {
		dev, err := cuda.New(w, *kv, cuda.Options{NoCUDAGraph: !o.cudaGraph, MaxSeqs: o.maxNumSeqs,
			MaxStepTokens: max(o.maxNumBatchedTokens, o.maxNumSeqs), GPUMemoryUtilization: o.gpuMemoryUtilization})
		if err != nil {
			return nil, err
		}
		*kv = dev.KVConfig()
		return dev, nil
	}
	return cpu.New(w, *kv, cpu.Options{NumThreads: o.cpuThreads})
}

func (o *engineOptions) loadWeights(info *modelInfo) (*model.Weights, error) {
	if o.modelDir == "" {
		return model.InitRandom(info.cfg, o.modelSeed)
	}
	return model.LoadCheckpoint(o.modelDir)
}
