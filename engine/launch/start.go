package launch

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cpu"
	"github.com/roseinfer/roseinfer/engine/device/cuda"
	"github.com/roseinfer/roseinfer/engine/device/sim"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// Running is a started engine and what was resolved to build it.
type Running struct {
	*Resolved
	Engine *engine.Engine
	// KV is the KV pool the device holds: on cuda, sized from free memory
	// when Options.KVCacheTokens is 0, so only known after Start.
	KV       device.KVConfig
	LoadTime time.Duration // weights, device and engine construction
}

// Start resolves o and starts its engine: Resolve then Resolved.Start.
func Start(o Options, log *slog.Logger) (*Running, error) {
	r, err := Resolve(o, log)
	if err != nil {
		return nil, err
	}
	return r.Start(log)
}

// Start loads the weights, builds the device and starts the engine. The
// caller closes Running.Engine, which closes the device.
func (r *Resolved) Start(log *slog.Logger) (*Running, error) {
	log = orDiscard(log)
	o := &r.Options
	kv := device.KVConfig{NumBlocks: NumKVBlocks(o, r.Device, r.Model), BlockSizeTokens: o.BlockSizeTokens}
	start := time.Now()
	dev, err := r.openDevice(&kv)
	if err != nil {
		return nil, err // the devices' errors name them (cpu:, sim:, cuda:)
	}
	if o.OnDevice != nil {
		o.OnDevice(dev)
	}
	observer := o.Observer
	if r.Device == "cuda" {
		// ROSEINFER_NVTX=1 brackets every engine phase with an NVTX range
		// for nsys timelines; nil (no cost) otherwise.
		observer = phase.Multi(observer, cuda.NVTXObserver())
	}
	eng, err := engine.New(engine.Config{
		MaxNumSeqs:          o.MaxNumSeqs,
		MaxNumBatchedTokens: o.MaxNumBatchedTokens,
		PrefillChunkSize:    o.PrefillChunkSize,
		ChunkedPrefill:      o.ChunkedPrefill,
		BlockSizeTokens:     o.BlockSizeTokens,
		NumBlocks:           kv.NumBlocks,
		PrefixCache:         o.PrefixCache,
		MaxPending:          o.MaxPending,
		MaxModelLen:         r.Model.MaxSeqLen,
		EOSToken:            r.Model.EOSTokenID,
		StopTokens:          r.StopTokens,
		OverlapSchedule:     o.OverlapSchedule,
		Observer:            observer,
	}, dev)
	if err != nil {
		_ = dev.Close()
		return nil, fmt.Errorf("start engine: %w", err)
	}
	run := &Running{Resolved: r, Engine: eng, KV: kv, LoadTime: time.Since(start)}
	log.Info("engine ready", "model", r.Name, "device", r.Device, "eos", r.Model.EOSTokenID, "stop_tokens", r.StopTokens,
		"kv_blocks", kv.NumBlocks,
		"block_size", kv.BlockSizeTokens, "max_num_seqs", o.MaxNumSeqs, "load_s", run.LoadTime.Seconds())
	return run, nil
}

// NumKVBlocks sizes the KV pool of devName (cpu, sim or cuda) for cfg:
// KVCacheTokens when set; else MaxNumSeqs full contexts, which on cpu are
// capped at 2 GiB (but hold one full context at least); 0 on cuda, which
// then sizes the pool from GPUMemoryUtilization.
func NumKVBlocks(o *Options, devName string, cfg model.Config) int {
	bs := o.BlockSizeTokens
	if o.KVCacheTokens > 0 {
		return (o.KVCacheTokens + bs - 1) / bs
	}
	perContext := (cfg.MaxSeqLen + bs - 1) / bs
	switch devName {
	case "cuda":
		return 0
	case "cpu":
		return max(min(o.MaxNumSeqs*perContext, cpuKVBudgetBytes/cpu.KVBytesPerBlock(cfg, bs)), perContext)
	}
	return o.MaxNumSeqs * perContext
}

// openDevice builds the device; cuda reports back the KV pool it allocated.
func (r *Resolved) openDevice(kv *device.KVConfig) (device.Device, error) {
	o := &r.Options
	if r.Device == "sim" {
		return sim.New(sim.Options{
			StepDuration:    o.SimStep,
			PrefillPerToken: o.SimPrefillPerToken,
			VocabSize:       r.Model.VocabSize,
			EOS:             r.Model.EOSTokenID,
		})
	}
	w, err := r.loadWeights()
	if err != nil {
		return nil, err
	}
	if r.Device == "cuda" {
		dev, err := cuda.New(w, *kv, cuda.Options{NoCUDAGraph: !o.CUDAGraph, ChunkRows: o.CUDAChunkRows, MaxSeqs: o.MaxNumSeqs,
			Float32:       canonicalDType(o.DType) == DTypeFloat32,
			MaxStepTokens: max(o.MaxNumBatchedTokens, o.MaxNumSeqs), GPUMemoryUtilization: o.GPUMemoryUtilization})
		if err != nil {
			return nil, err
		}
		*kv = dev.KVConfig()
		return dev, nil
	}
	return cpu.New(w, *kv, cpu.Options{NumThreads: o.CPUThreads})
}

func (r *Resolved) loadWeights() (*model.Weights, error) {
	if r.Options.ModelDir == "" {
		w, err := model.InitRandom(r.Model, r.Options.ModelSeed)
		if err != nil {
			return nil, fmt.Errorf("init %s weights: %w", BuiltinPreset, err)
		}
		return w, nil
	}
	w, err := model.LoadCheckpoint(r.Options.ModelDir)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	return w, nil
}
