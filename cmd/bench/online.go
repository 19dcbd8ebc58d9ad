package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/online"
	"github.com/roseinfer/roseinfer/harness/profile"
	"github.com/roseinfer/roseinfer/harness/workload"
)

func init() { addCommand(newOnlineCmd) }

// CPU-sized defaults: roseinfer on the CPU (the default without a GPU) runs
// a tiny model on a couple of cores, so the original's 1,000 requests of up
// to 128 tokens at 6 scales would take far too long. These apply only when
// the flag is not given and the backend is roseinfer on the CPU.
const (
	cpuDefaultN            = 100
	cpuDefaultMaxOutputLen = 64
)

const onlineExamples = `  bench online --scales 0.4,0.8,1.6
  bench online --backends roseinfer --trace traces/data/mooncake_conversation.jsonl --n 200 --repeat 3 --warmup-requests 5
  bench online --base-url http://10.0.0.5:8000 --model gpt2
  bench online --variant "nooverlap=--no-overlap-schedule" --variant "nocache=--no-prefix-cache"
  bench online --device sim --server-args "--sim-step-us 1000" --slo ttft=200ms,tpot=50ms
  bench online --sessions 20 --turns 3 --think-time-s 0.5 --variant "nocache=--no-prefix-cache"`

func newOnlineCmd() *cobra.Command {
	of := newOnlineFlags(online.DefaultOnline())
	o := &of.o
	prof := profile.DefaultOptions()
	var pic pictureOptions
	var scales string
	cmd := &cobra.Command{
		Use:   "online",
		Short: "Replay a request trace open-loop against each backend at several load scales",
		Long: `Replay a request trace open-loop: every request is sent at its scaled trace time
whether or not earlier ones finished, one full replay per scale (smaller scale =
more load). For each backend: launch, wait until ready, warm up, replay every
scale, stop. Per request: send lag, TTFT, TPOT, per-token ITL, inter-chunk
latency, E2E; per scale: mean/p50/p90/p99/max, req/s, output tok/s, goodput
(--slo), errors by kind. A scale whose send-lag p99 exceeds
--send-lag-threshold-ms is marked INVALID: the client, not the server, shaped
the load.

Prompts are exact token-id sequences, the same for every backend: by default
all prefixes of one random sequence (seed --seed), as the original harness; with
--prefix-mode trace, built from the trace's hash_ids. Trace lengths are clamped to
the model's context (--model-max-len minus --prompt-overhead-tokens) and to
--max-input-len/--max-output-len, as the original.

Defaults are the original harness's except: --backends roseinfer (vLLM, SGLang,
TensorRT-LLM come as separate descriptors), --device cpu, --output-dir
results/runs, --trace = the bundled Azure 2023 conversation trace, and, for
roseinfer on the CPU only, --n ` + strconv.Itoa(cpuDefaultN) + ` (original 1000) and
--max-output-len ` + strconv.Itoa(cpuDefaultMaxOutputLen) + ` (original 128), so that "bench online --scales
0.4,0.8,1.6" finishes in a few minutes on 2 cores.

CPU split (the original's): unless --server-cpus/--client-cpus are given,
launched servers get the first half of the CPUs this process may use and the
harness the rest (2 cores: one each), so the server's work (its compute, or
the sim device's bursts of stream chunks) never delays the client's sends and
timestamps; the profile stage's servers too, --profile-only included; "none"
turns pinning off.

Writes <output-dir>/online_<YYYYmmdd_HHMMSS>/: online_results.json (per-request
records included), online_summary.md and <label>.server.log per backend. The
results are rewritten after every scale, so an interrupted run leaves valid
partial results. A scale whose success rate is below --min-success-rate (0.99)
fails the run; the console and online_summary.md name it with its error kinds.
Exit status: 0 ok, 1 a backend or scale failed, 130 interrupted.` + pictureHelp + profileHelp,
		Example: onlineExamples,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Load.Scales, err = parseFloats(scales); err != nil {
				return fmt.Errorf("--scales: %w", err)
			}
			if err := of.apply(cmd); err != nil {
				return err
			}
			if err := prof.Validate(); err != nil {
				return err
			}
			if err := pic.prepare(o, prof.Only); err != nil {
				return err
			}
			if prof.Only {
				return profileOnline(prof, *o, nil)
			}
			rep, err := online.Online(sig.stop, sig.abort, *o)
			if err != nil {
				return err
			}
			pic.after(cmd, *o, rep)
			if prof.Enabled() {
				return profileOnline(prof, *o, rep)
			}
			return finish(rep)
		},
	}
	f := cmd.Flags()
	f.StringVar(&scales, "scales", "0.4,0.5,0.6,0.7,0.8,1.6", "comma list of trace time multipliers, one replay each (smaller = more load)")
	f.Float64Var(&o.Load.MinSuccessRate, "min-success-rate", o.Load.MinSuccessRate, "a scale whose share of successful requests is below this fails the run (exit 1, after writing results); 0 turns it off")
	f.BoolVar(&o.Output.Timeline, "timeline", false, "write timeline.json (Chrome trace, opens in ui.perfetto.dev): every request's chunks and, for roseinfer, its engine steps on the client's clock, ITL outliers above p99 attributed to the step they fell in (docs/TIMELINE.md)")
	of.register(cmd)
	profile.RegisterFlags(f, &prof)
	registerPictureFlags(f, &pic)
	return cmd
}

// onlineFlags are the flags bench online shares with bench capacity (the
// servers, the workload, the rounds, the SLO and the validity rule), bound
// to one OnlineOptions.
type onlineFlags struct {
	o                              online.OnlineOptions
	backends, serverArgs           string
	timeoutReadyS, requestTimeoutS float64
}

func newOnlineFlags(o online.OnlineOptions) *onlineFlags {
	return &onlineFlags{o: o, backends: strings.Join(o.Servers.Backends, ",")}
}

// apply turns the parsed flags into of.o: lists split, durations made, the
// CPU-sized defaults applied, output to the terminal.
func (of *onlineFlags) apply(cmd *cobra.Command) error {
	o := &of.o
	var err error
	o.Servers.Backends = splitList(of.backends)
	if o.Servers.ServerArgs, err = backend.SplitArgs(of.serverArgs); err != nil {
		return fmt.Errorf("--server-args: %w", err)
	}
	o.Servers.TimeoutReady = seconds(of.timeoutReadyS)
	o.Load.RequestTimeout = seconds(of.requestTimeoutS)
	o.Servers.APIKey = apiKey(cmd, o.Servers.APIKey)
	if err := checkSessionFlags(cmd, &o.Workload); err != nil {
		return err
	}
	onCPU := o.Servers.BaseURL == "" && o.Servers.Device == "cpu" && onlyRoseinfer(o.Servers.Backends)
	if onCPU && !cmd.Flags().Changed("n") {
		o.Workload.N = cpuDefaultN
	}
	if onCPU && !cmd.Flags().Changed("max-output-len") {
		o.Workload.MaxOutputLen = cpuDefaultMaxOutputLen
	}
	o.Output.Log = os.Stderr
	o.Output.Progress = newProgress(os.Stderr)
	return nil
}

// register adds the shared flags to cmd.
func (of *onlineFlags) register(cmd *cobra.Command) {
	o, backends, serverArgs := &of.o, &of.backends, &of.serverArgs
	f := cmd.Flags()
	f.StringVar(&o.Servers.Model, "model", o.Servers.Model, `roseinfer: HF checkpoint directory to serve ("" = built-in tiny model); --base-url: model id to request ("" = the server's first)`)
	f.StringVar(backends, "backends", *backends, "comma list of backends, run in order")
	f.StringVar(&o.Servers.BaseURL, "base-url", "", "benchmark a running OpenAI-compatible server at this root URL instead of launching one")
	f.StringVar(&o.Servers.Device, "device", o.Servers.Device, "roseinfer --device: cpu, sim, cuda or auto")
	f.StringVar(serverArgs, "server-args", "", `extra "roseinfer serve" flags for every roseinfer run, e.g. "--max-num-seqs 64"`)
	f.StringArrayVar(&o.Servers.Variants, "variant", nil, `LABEL=FLAGS: an extra roseinfer run labelled roseinfer+LABEL with these serve flags (repeatable)`)
	f.StringVar(&o.Servers.RoseinferBin, "roseinfer-bin", "", "roseinfer executable (default: next to bench, then $PATH, then go build)")
	f.IntVar(&o.Workload.N, "n", 1000, fmt.Sprintf("trace rows replayed (the first N of the file); roseinfer on the CPU: %d", cpuDefaultN))
	f.StringVar(&o.Workload.TracePath, "trace", "", "trace file: Azure CSV, Mooncake/Qwen JSONL or BurstGPT CSV (default: bundled Azure 2023 conversation)")
	f.StringVar(&o.Workload.TraceFormat, "trace-format", "", "trace format: azure, mooncake, qwen or burstgpt (default: detected)")
	f.StringVar(&o.Workload.PrefixMode, "prefix-mode", o.Workload.PrefixMode, "prompt sharing: base (prefixes of one random sequence, the original) or trace (from hash_ids)")
	f.Float64Var(&o.Load.StartOffsetS, "start-offset-s", o.Load.StartOffsetS, "seconds added to every scheduled time")
	f.IntVar(&o.Workload.MaxInputLen, "max-input-len", 0, "clamp on input tokens (0 = none)")
	f.IntVar(&o.Workload.MaxOutputLen, "max-output-len", 128, fmt.Sprintf("clamp on output tokens; roseinfer on the CPU: %d", cpuDefaultMaxOutputLen))
	f.IntVar(&o.Workload.PromptOverheadTokens, "prompt-overhead-tokens", o.Workload.PromptOverheadTokens, "safety margin subtracted from the context")
	f.IntVar(&o.Workload.ModelMaxLen, "model-max-len", o.Workload.ModelMaxLen, "the model's context length in tokens (0 = --model DIR's config.json: n_positions, max_position_embeddings; else 1024, GPT-2's and the tiny model's)")
	registerSamplingFlags(f, &o.Workload)
	f.BoolVar(&o.Workload.IgnoreEOS, "ignore-eos", false, "send ignore_eos so every request generates its full output length")
	f.StringVar(&o.Workload.Endpoint, "endpoint", "completions", "completions (token-id prompts) or chat (/v1/chat/completions; prompt text from --model DIR's tokenizer, else GPT-2's)")
	f.IntVar(&o.Workload.WarmupRequests, "warmup-requests", o.Workload.WarmupRequests, "sequential warmup requests per backend before the first scale (0 = none)")
	registerWarmupShapeFlags(f, &o.Workload)
	f.IntVar(&o.Load.Repeat, "repeat", o.Load.Repeat, "rounds per scale (bench capacity: per probe, pooled); with more than one, per-round summaries and mean ± 95% CI")
	f.StringVar(&o.Load.SLO, "slo", "", "service-level objectives for goodput, e.g. ttft=200ms,tpot=50ms (also e2e)")
	f.Float64Var(&o.Load.SendLagThresholdMs, "send-lag-threshold-ms", o.Load.SendLagThresholdMs, "a scale whose send-lag p99 exceeds this is marked invalid")
	f.IntVar(&o.Load.PrewarmConns, "prewarm-conns", o.Load.PrewarmConns, "most connections opened before each round, sized to the requests its schedule keeps in flight at the warmup's latency (x2); none is then dialled on the schedule (0 = open none)")
	f.Float64Var(&of.timeoutReadyS, "timeout-ready-s", o.Servers.TimeoutReady.Seconds(), "max seconds to wait for a server to become ready")
	f.Float64Var(&of.requestTimeoutS, "request-timeout-s", o.Load.RequestTimeout.Seconds(), "per-request timeout in seconds (0 = none)")
	f.StringVar(&o.Servers.Host, "host", o.Servers.Host, "bind host of launched servers and client target")
	f.IntVar(&o.Servers.PortBase, "port-base", o.Servers.PortBase, "backend i gets the first free port >= port-base + i")
	f.StringVar(&o.Servers.ServerCPUs, "server-cpus", "", `pin launched servers to these CPUs (taskset list, e.g. "0-3"; "none": no pinning); default: first half`)
	f.StringVar(&o.Servers.ClientCPUs, "client-cpus", "", `pin the harness to these CPUs ("none": no pinning); default: the other half`)
	f.StringVar(&o.Servers.GPU, "gpu", "", "CUDA_VISIBLE_DEVICES for launched servers (default: inherited)")
	f.StringVar(&o.Output.OutputDir, "output-dir", o.Output.OutputDir, "parent of the run directory <command>_<YYYYmmdd_HHMMSS>")
	registerAPIKey(cmd, &o.Servers.APIKey)
	registerSessionFlags(cmd, &o.Workload)
	backend.RegisterThirdPartyFlags(f, &o.Servers.ThirdParty)
}

// finish turns a run report into the exit status.
func finish(rep *online.Report) error {
	if rep.Interrupted {
		return &exitError{code: exitInterrupted, msg: "interrupted; partial results written to " + rep.RunDir}
	}
	if len(rep.Failures) > 0 {
		return &exitError{code: exitFailed, msg: "failed:\n  " + strings.Join(rep.Failures, "\n  ")}
	}
	return nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, part := range splitList(s) {
		v, err := strconv.ParseFloat(part, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", part)
		}
		out = append(out, v)
	}
	return out, nil
}

// splitList splits a comma-list flag (--backends, --format), trimming spaces
// and dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// onlyRoseinfer reports whether every backend is roseinfer: the CPU-sized
// defaults are for roseinfer on the CPU, not for vLLM and the others.
func onlyRoseinfer(backends []string) bool {
	for _, b := range backends {
		if b != "roseinfer" {
			return false
		}
	}
	return true
}

// registerSamplingFlags adds the prompt seed and the sampling parameters
// every replay sends, as bench online and bench ab spell them.
func registerSamplingFlags(f *pflag.FlagSet, w *workload.Options) {
	f.Int64Var(&w.Seed, "seed", w.Seed, "seed of the random prompt tokens")
	f.Float64Var(&w.Temperature, "temperature", w.Temperature, "sampling temperature")
	f.Float64Var(&w.TopP, "top-p", w.TopP, "nucleus sampling top_p")
	f.IntVar(&w.TopK, "top-k", w.TopK, "top_k (sent as an extra field)")
}

// registerWarmupShapeFlags adds the warmup requests' prompt and output
// lengths.
func registerWarmupShapeFlags(f *pflag.FlagSet, w *workload.Options) {
	f.IntVar(&w.WarmupInputLen, "warmup-input-len", w.WarmupInputLen, "warmup prompt tokens")
	f.IntVar(&w.WarmupOutputLen, "warmup-output-len", w.WarmupOutputLen, "warmup max_tokens")
}
