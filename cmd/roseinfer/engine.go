package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/roseinfer/roseinfer/engine/launch"
)

// engineOptions are the flags serve and generate share: which model, which
// device, and the scheduler and KV cache limits. engine/launch builds the
// engine from them; the sim durations are whole µs on the command line.
type engineOptions struct {
	launch.Options
	simStepMicros            int
	simPrefillMicrosPerToken int
}

func defaultEngineOptions() engineOptions {
	d := launch.Defaults()
	return engineOptions{Options: d, simStepMicros: int(d.SimStep / time.Microsecond),
		simPrefillMicrosPerToken: int(d.SimPrefillPerToken / time.Microsecond)}
}

func (o *engineOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ModelDir, "model", o.ModelDir, "HF checkpoint directory, GPT-2 or Qwen3 (config.json, model.safetensors, tokenizer files, generation_config.json's stop ids); empty = the built-in tiny model, no disk")
	fs.Uint64Var(&o.ModelSeed, "model-seed", o.ModelSeed, "weights seed of the built-in tiny model (the weights init-model --preset tiny --seed N writes)")
	fs.StringVar(&o.Device, "device", o.Device, "auto, cpu, sim or cuda (auto: cuda when usable, else cpu)")
	fs.IntVar(&o.simStepMicros, "sim-step-us", o.simStepMicros, "sim device: duration of every step in µs")
	fs.IntVar(&o.simPrefillMicrosPerToken, "sim-prefill-us-per-token", o.simPrefillMicrosPerToken, "sim device: extra µs per prefill token in a step")
	fs.IntVar(&o.CPUThreads, "cpu-threads", o.CPUThreads, "cpu device: goroutines for the parallel ops (0 = GOMAXPROCS)")
	fs.IntVar(&o.MaxNumSeqs, "max-num-seqs", o.MaxNumSeqs, "sequences per engine step")
	fs.IntVar(&o.MaxNumSeqs, "max-batch-size", o.MaxNumSeqs, "alias of --max-num-seqs (the original's name)")
	fs.IntVar(&o.MaxNumBatchedTokens, "max-num-batched-tokens", o.MaxNumBatchedTokens, "token budget of one step (decode tokens + prefill chunks)")
	fs.IntVar(&o.PrefillChunkSize, "prefill-chunk-size", o.PrefillChunkSize, "most prompt tokens of one sequence per step")
	boolPair(fs, &o.ChunkedPrefill, "chunked-prefill", "split long prompts over steps (--no-chunked-prefill: whole prompts)")
	boolPair(fs, &o.PrefixCache, "prefix-cache", "reuse KV blocks of identical prompt prefixes")
	fs.IntVar(&o.BlockSizeTokens, "block-size", o.BlockSizeTokens, "tokens per KV cache block")
	fs.IntVar(&o.KVCacheTokens, "kv-cache-tokens", o.KVCacheTokens, "KV cache capacity in tokens (0 = max-num-seqs full contexts; cpu: at most 2 GiB; cuda: from --gpu-memory-utilization)")
	fs.IntVar(&o.MaxPending, "max-pending", o.MaxPending, "waiting requests beyond this get HTTP 429 (0 = unlimited)")
	fs.IntVar(&o.MaxPending, "max-inflight-requests", o.MaxPending, "alias of --max-pending (see docs/roseinfer-flags.md for the difference)")
	boolPair(fs, &o.CUDAGraph, "cuda-graph", "cuda device: replay decode steps as CUDA graphs (ignored by cpu and sim)")
	boolPair(fs, &o.OverlapSchedule, "overlap-schedule", "sim and cuda: plan step N+1 while step N runs (cpu runs synchronously)")
	fs.IntVar(&o.CUDAChunkRows, "cuda-chunk-rows", o.CUDAChunkRows, "cuda device: steps whose prompt chunks have at most this many tokens run through the decode kernels and graphs (0 = default 16, negative = decode tokens only)")
	fs.StringVar(&o.DType, "dtype", o.DType, "precision: auto (cpu float32; cuda float16 for GPT-2, bfloat16 for Qwen3), or float32 to run Qwen3 on cuda in fp32 (slower; for checking numerics)")
	fs.Float64Var(&o.GPUMemoryUtilization, "gpu-memory-utilization", o.GPUMemoryUtilization, "cuda device: fraction of the GPU's memory this server may take for weights, activations and KV cache when --kv-cache-tokens is 0 (per server: two at 0.4 share a GPU)")
}

// launchOptions are the options with the µs flags turned into durations.
func (o *engineOptions) launchOptions() launch.Options {
	lo := o.Options
	lo.SimStep = time.Duration(o.simStepMicros) * time.Microsecond
	lo.SimPrefillPerToken = time.Duration(o.simPrefillMicrosPerToken) * time.Microsecond
	return lo
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
