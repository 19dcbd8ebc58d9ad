package profile

import (
	"context"
	"fmt"
	"io"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/offline"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/harness/rundir"
)

// OfflineInput is what bench offline's profile stage needs besides its flags.
type OfflineInput struct {
	Bench offline.Options // the throughput run's settings (backends, device, engine flags, sampling)
	// RunDir is the throughput run's directory; "" makes a new
	// offline_<YYYYmmdd_HHMMSS> under Bench.OutputDir (--profile-only).
	RunDir string
	Log    io.Writer
}

// Offline runs bench offline's profile stage: per (tool, backend) a
// fresh `roseinfer serve` with the throughput run's engine settings gets
// --profile-num-prompts prompts of --profile-input-len tokens at once, each
// generating --profile-output-len tokens. The in-process label (roseinfer)
// is profiled through a server too: the engine is the same, and the
// profiler's endpoints are the server's. Under nsys the pinning prefix, if
// any, wraps nsys, as the original's offline stage.
func Offline(ctx context.Context, p Options, in OfflineInput) (*Report, error) {
	tools, err := p.validTools()
	if err != nil || len(tools) == 0 {
		return nil, err
	}
	o := &in.Bench
	specs, skipped, err := offlineSpecs(ctx, o)
	if err != nil {
		return nil, err
	}
	exact := o.RunDir
	if in.RunDir != "" {
		exact = in.RunDir
	}
	runDir, err := rundir.Make(exact, o.OutputDir, "offline")
	if err != nil {
		return nil, err
	}
	meta := map[string]any{
		"profile":                  p.Profile,
		"profile_only":             p.Only,
		"profile_num_prompts":      p.NumPrompts,
		"profile_input_len":        p.InputLen,
		"profile_output_len":       p.OfflineOutLen,
		"server_cpus":              nil,
		"tools":                    tools,
		"backends":                 labelsOf(specs),
		"trtllm_profile_record_gc": p.TRTLLMProfileRecordGC,
		"versions":                 rundir.Versions(ctx),
		// Ours.
		"device":           o.Device,
		"profile_nsys_bin": p.NsysBin,
	}
	if len(skipped) > 0 {
		meta["skipped"] = skipped
	}
	st := newStage(&p, runDir, in.Log, meta)
	st.nsysWrap, st.tasksetOutside = nsysOfflineArgv, true
	table, _, err := o.PromptTokenIDs()
	if err != nil {
		return nil, err
	}
	st.work = &offlineWorkload{o: o, p: &p, tokenIDs: table}
	st.model = o.Model
	st.launch = backend.LaunchOptions{Host: o.Host, PortBase: o.PortBase, UsedPorts: map[int]bool{}, RunDir: runDir,
		ReadyTimeout: o.TimeoutReady}
	return st.rep, st.run(ctx, tools, specs)
}

// offlineSpecs are the roseinfer servers for the offline labels, as the
// throughput run launches its server (offline.Options.ServerSpec).
func offlineSpecs(ctx context.Context, o *offline.Options) ([]backend.Spec, []string, error) {
	var specs []backend.Spec
	var skipped []string
	for _, label := range o.Backends {
		if BaseBackend(label) != baseRoseinfer {
			skipped = append(skipped, label+": offline profiling covers roseinfer only in this build")
			continue
		}
		spec, err := o.ServerSpec(ctx, label)
		if err != nil {
			return nil, nil, err
		}
		specs = append(specs, spec)
	}
	return specs, skipped, nil
}

// offlineWorkload is the fixed-length batch: all prompts at time 0.
type offlineWorkload struct {
	o        *offline.Options
	p        *Options
	tokenIDs []int32 // the model's prompt ids (offline.Options.PromptTokenIDs); nil: GPT-2's range
}

// prompts are n prompts of length ids, drawn as the throughput run draws.
func (w *offlineWorkload) prompts(n, length int, seed int64) [][]int32 {
	lengths := make([]int, n)
	for i := range lengths {
		lengths[i] = length
	}
	return offline.Prompts(lengths, offline.VocabSize, w.tokenIDs, seed)
}

// quirks leaves the request shape as it is: the offline stage profiles
// roseinfer's completions only.
func (w *offlineWorkload) quirks(q client.Quirks) client.Quirks { return q }

// warmupBodies are the throughput run's warmup prompts (up to 16 tokens
// each), sent one after another.
func (w *offlineWorkload) warmupBodies(model string, q client.Quirks) ([][]byte, error) {
	prompts := w.prompts(w.o.WarmupPrompts, w.p.InputLen, w.o.Seed+1)
	out := make([][]byte, len(prompts))
	for i, pr := range prompts {
		b, err := w.o.RequestBody(model, pr, min(16, w.p.OfflineOutLen), q)
		if err != nil {
			return nil, fmt.Errorf("warmup prompt %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

func (w *offlineWorkload) items(model string, q client.Quirks) ([]replay.Item, error) {
	prompts := w.prompts(w.p.NumPrompts, w.p.InputLen, w.o.Seed)
	items := make([]replay.Item, len(prompts))
	for i, pr := range prompts {
		b, err := w.o.RequestBody(model, pr, w.p.OfflineOutLen, q)
		if err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
		items[i] = replay.Item{Index: i, InputLen: len(pr), OutputLen: w.p.OfflineOutLen, Body: b}
	}
	return items, nil
}
