// Package offline measures fixed-length generation throughput: num_prompts
// prompts of exactly input_len random token ids (the same ids for every
// backend), each generating exactly output_len tokens (ignore_eos), all
// submitted at once. roseinfer runs in this process through the engine API
// (label "roseinfer") and through its HTTP server (label
// "roseinfer+server"), so the difference is the serving overhead.
package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/engine/sample"
	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/rundir"
	"github.com/roseinfer/roseinfer/results"
)

// Labels of the offline backends.
const (
	LabelInProcess = "roseinfer"
	LabelServer    = "roseinfer+server"
)

// Options are `bench offline`'s settings.
type Options struct {
	Backends   []string // roseinfer (in-process), roseinfer+server
	Device     string   // auto, cpu, sim or cuda: roseinfer --device, in-process and for the server
	Model      string   // HF checkpoint dir; "" = built-in tiny model
	SimStep    time.Duration
	NumPrompts int
	InputLen   int
	OutputLen  int
	// Length ranges (LengthRanges): --random-range-ratio spreads InputLen
	// and OutputLen as vLLM does; an explicit range (zero = unset) wins.
	RandomRangeRatio float64
	InputLenRange    LenRange
	OutputLenRange   LenRange
	Temperature      float64
	TopP             float64
	TopK             int
	IgnoreEOS        bool
	Seed             int64
	MaxBatchSize     int
	WarmupPrompts    int
	PrefixCache      bool

	ServerArgs   []string
	RoseinferBin string
	Host         string
	PortBase     int
	TimeoutReady time.Duration
	// APIKey (--api-key, else $OPENAI_API_KEY): the roseinfer server is
	// launched with it and every request sends it; never recorded.
	APIKey string

	// ThirdParty holds the vLLM, SGLang and TensorRT-LLM flags
	// (backend.RegisterThirdPartyFlags); EnvsRoot is where .venvs/ is ("" =
	// the module root).
	ThirdParty backend.ThirdPartyOptions
	EnvsRoot   string

	OutputDir string
	RunDir    string
	Log       io.Writer
}

// Default returns the original's defaults with both roseinfer labels
// and the CPU device.
func Default() Options {
	return Options{
		Backends:      []string{LabelInProcess, LabelServer},
		Device:        "cpu",
		NumPrompts:    256,
		InputLen:      512,
		OutputLen:     128,
		Temperature:   0.7,
		TopP:          0.9,
		TopK:          50,
		IgnoreEOS:     true,
		Seed:          42,
		MaxBatchSize:  256,
		WarmupPrompts: 8,
		PrefixCache:   true,
		Host:          "127.0.0.1",
		PortBase:      18000,
		TimeoutReady:  120 * time.Second,
		OutputDir:     "results/runs",
		ThirdParty:    backend.DefaultThirdParty(),
	}
}

// Report is what the command prints and exits on.
type Report struct {
	RunDir, ResultsPath, SummaryPath string
	Failures                         []string
	Interrupted                      bool
}

// Run runs every offline backend in turn and writes offline_results.json
// and offline_summary.md (rewritten after each backend). Cancelling ctx
// stops the run after aborting the batch in flight.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	runDir := o.RunDir
	if runDir == "" {
		runDir = filepath.Join(o.OutputDir, "offline_"+time.Now().Format("20060102_150405"))
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	batch, err := o.NewBatch()
	if err != nil {
		return nil, err
	}
	rep := &Report{RunDir: runDir, ResultsPath: filepath.Join(runDir, results.OfflineResultsFile),
		SummaryPath: filepath.Join(runDir, report.OfflineSummaryFile)}
	start := time.Now()
	out := &results.Offline{Meta: o.meta(batch)}
	versions := rundir.Versions(ctx)
	out.Meta[results.MetaVersions] = versions
	backendWall := map[string]float64{}
	out.Meta["backend_wall_s"] = backendWall
	out.Meta["run_start_time"] = start.Format(rundir.TimeFormat)
	write := func() error {
		out.Meta["run_end_time"] = time.Now().Format(rundir.TimeFormat)
		out.Meta["wall_s"] = time.Since(start).Seconds()
		out.Meta["interrupted"] = rep.Interrupted
		if err := results.WriteJSON(rep.ResultsPath, out); err != nil {
			return err
		}
		return results.WriteAtomic(rep.SummaryPath, func(w io.Writer) error { return report.WriteOfflineSummary(w, out) })
	}

	for _, label := range o.Backends {
		if ctx.Err() != nil {
			rep.Interrupted = true
			break
		}
		if batch.In.fixed() && batch.Out.fixed() {
			fmt.Fprintf(o.Log, "[%s] offline: %d prompts x %d tokens -> %d tokens\n", label, o.NumPrompts, o.InputLen, o.OutputLen)
		} else {
			fmt.Fprintf(o.Log, "[%s] offline: %d prompts x [%d, %d] tokens -> [%d, %d] tokens\n", label, o.NumPrompts,
				batch.In.Lo, batch.In.Hi, batch.Out.Lo, batch.Out.Hi)
		}
		t0 := time.Now()
		var res results.OfflineResult
		var err error
		switch label {
		case LabelInProcess:
			res, err = o.runInProcess(ctx, batch)
		case LabelServer:
			res, err = o.runServer(ctx, runDir, batch)
		case backend.NameVLLM, backend.NameSGLang, backend.NameTRTLLM:
			res, err = o.runThirdParty(ctx, runDir, label, batch)
		default:
			err = fmt.Errorf("offline backend %q is not supported by this build (roseinfer, roseinfer+server, vllm, sglang, trtllm)", label)
		}
		res.Backend = label
		if res.Device == "" {
			res.Device = o.Device
		}
		if res.Model == "" {
			res.Model = o.modelName()
		}
		// With length ranges these are the mean lengths (as the Python
		// drivers report input_len); fixed lengths are the flags exactly.
		res.NumPrompts, res.InputLen, res.OutputLen = o.NumPrompts, batch.meanInputLen(), batch.meanOutputLen()
		if res.Extra == nil {
			res.Extra = map[string]any{}
		}
		backendWall[label] = time.Since(t0).Seconds()
		if err != nil {
			if ctx.Err() != nil {
				rep.Interrupted = true
			}
			// A failed backend keeps zero rates and its wall time, as the original.
			res.RequestThroughputRPS, res.OutputThroughputTPS, res.TotalThroughputTPS = 0, 0, 0
			if res.TotalS == 0 {
				res.TotalS = time.Since(t0).Seconds()
			}
			res.Extra["error"] = err.Error()
			rep.Failures = append(rep.Failures, label+": "+err.Error())
			fmt.Fprintf(o.Log, "[%s] FAILED: %v\n", label, err)
		} else {
			fmt.Fprintf(o.Log, "[%s] %.2f req/s, %.2f output tok/s, %.2f total tok/s, %.3f s\n", label,
				res.RequestThroughputRPS, res.OutputThroughputTPS, res.TotalThroughputTPS, res.TotalS)
		}
		if v, ok := res.Extra["version"].(string); ok && v != "" {
			versions[label] = v
		}
		out.Results = append(out.Results, res)
		if err := write(); err != nil {
			return rep, err
		}
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
	}
	return rep, write()
}

// VocabSize is GPT-2's, the range of the prompt token ids without a
// checkpoint directory of another family: every built-in model keeps the
// real vocabulary.
const VocabSize = 50257

func (o *Options) validate() error {
	switch {
	case len(o.Backends) == 0:
		return errors.New("no backends to run")
	case o.NumPrompts < 1 || o.InputLen < 1 || o.OutputLen < 1:
		return fmt.Errorf("need --num-prompts, --input-len and --output-len >= 1 (got %d, %d, %d)", o.NumPrompts, o.InputLen, o.OutputLen)
	case o.MaxBatchSize < 1:
		return errors.New("--max-batch-size must be at least 1")
	case o.WarmupPrompts < 0:
		return errors.New("--warmup-prompts must not be negative")
	}
	in, out, err := o.LengthRanges()
	if err != nil {
		return err
	}
	if o.Model == "" && in.Hi+out.Hi > builtinContext {
		return fmt.Errorf("input length up to %d + output length up to %d exceed the built-in model's %d-token context", in.Hi, out.Hi, builtinContext)
	}
	switch o.Device {
	case "auto", "cpu", "sim", "cuda":
	default:
		return fmt.Errorf("--device must be auto, cpu, sim or cuda, got %q", o.Device)
	}
	return nil
}

func (o *Options) modelName() string {
	if o.Model == "" {
		return "roseinfer built-in tiny (GPT-2 vocabulary, random weights)"
	}
	return o.Model
}

func (o *Options) sampleParams() sample.Params {
	return sample.Params{Temperature: float32(o.Temperature), TopK: o.TopK, TopP: float32(o.TopP)}
}

// meta is offline_results.json's meta: the original's keys where they apply,
// then additions.
func (o *Options) meta(b *Batch) map[string]any {
	return map[string]any{
		"model":          o.modelName(),
		"device":         o.Device,
		"seed":           o.Seed,
		"num_prompts":    o.NumPrompts,
		"input_len":      o.InputLen,
		"output_len":     o.OutputLen,
		"temperature":    o.Temperature,
		"top_p":          o.TopP,
		"top_k":          o.TopK,
		"ignore_eos":     o.IgnoreEOS,
		"max_batch_size": o.MaxBatchSize,
		"warmup_prompts": o.WarmupPrompts,
		"backends":       o.Backends,
		// Additions.
		"prefix_cache": o.PrefixCache,
		"server_args":  strings.Join(o.ServerArgs, " "),
		"sim_step_us":  strconv.FormatInt(o.SimStep.Microseconds(), 10),
		// Length ranges: the inclusive [lo, hi] every prompt's input and
		// output length were drawn from (seed "seed"); lo == hi is fixed.
		"random_range_ratio": o.RandomRangeRatio,
		"input_len_range":    b.In.meta(),
		"output_len_range":   b.Out.meta(),
		"model_context":      b.ModelContext,
	}
}
