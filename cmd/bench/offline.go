package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/offline"
	"github.com/roseinfer/roseinfer/harness/profile"
)

func init() { addCommand(newOfflineCmd) }

// CPU-sized offline defaults (flags not given, device cpu): the original's
// 256 prompts × 128 output tokens, twice (in-process and server), is minutes
// of work for the tiny model on 2 cores.
const (
	cpuDefaultNumPrompts = 64
	cpuDefaultOutputLen  = 64
)

func newOfflineCmd() *cobra.Command {
	o := offline.Default()
	prof := profile.DefaultOptions()
	backends := strings.Join(o.Backends, ",")
	serverArgs := ""
	var simStepUS int
	var timeoutReadyS float64
	var inputLenRange, outputLenRange string
	cmd := &cobra.Command{
		Use:   "offline",
		Short: "Fixed-length generation throughput: req/s, output tok/s, total tok/s",
		Long: `Measure throughput on fixed-length work: --num-prompts prompts of exactly
--input-len random token ids (the same ids for every backend, seed --seed), each
generating exactly --output-len tokens (ignore_eos), all submitted at once. The
timed region runs from the first prompt submitted to the last token of the last
prompt; model loading and warmup (--warmup-prompts prompts, up to 16 tokens) are
excluded. Reports req/s, output tok/s, total tok/s, total latency, and the
prefill/decode split (until the last prompt's first token / the rest).

Lengths may vary instead, each prompt's drawn uniformly (seed --seed, the same
lengths for every backend and every run with that seed):
--random-range-ratio R (0 <= R < 1) as vLLM's random dataset: input length in
[floor(input_len*(1-R)), ceil(input_len*(1+R))], output length likewise (at
least 1), both ends included; --input-len-range A,B and --output-len-range A,B
give the inclusive bounds directly and win over R. R = 0 is fixed lengths.
offline_results.json's meta records the ranges; a result's input_len and
output_len are then the mean lengths.

Prompt ids: with --model DIR of a family other than GPT-2 (Qwen3), uniform over
the tokenizer's regular tokens (never an added or special id), and the lengths
must fit the context of DIR's config.json; otherwise GPT-2's range as always.

Backends: "roseinfer" runs the engine in this process through its Go API;
"roseinfer+server" launches "roseinfer serve" and sends the prompts as streaming
token-id completions, so the difference between the two is the serving cost.

Defaults are the original's except: --device cpu, and for the CPU only
--num-prompts ` + strconv.Itoa(cpuDefaultNumPrompts) + ` (original 256) and --output-len ` + strconv.Itoa(cpuDefaultOutputLen) +
			` (original 128).

Writes <output-dir>/offline_<YYYYmmdd_HHMMSS>/offline_results.json and
offline_summary.md. Exit status: 0 ok, 1 a backend failed, 130 interrupted.` + profileHelp,
		Example: `  bench offline --input-len 256 --output-len 64 --num-prompts 128
  bench offline --backends roseinfer --device sim --sim-step-us 1000
  bench offline --model ./gpt2-random --input-len 512 --output-len 128
  bench offline --model ./qwen3-0.6b-random --device cuda --backends roseinfer --num-prompts 256 \
      --input-len-range 100,1024 --output-len-range 100,1024 --ignore-eos --temperature 0.6 --top-p 1 --top-k 0   # nano-vllm's protocol`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Backends = splitList(backends)
			var err error
			if o.ServerArgs, err = backend.SplitArgs(serverArgs); err != nil {
				return fmt.Errorf("--server-args: %w", err)
			}
			if o.InputLenRange, err = offline.ParseLenRange(inputLenRange); err != nil {
				return fmt.Errorf("--input-len-range: %w", err)
			}
			if o.OutputLenRange, err = offline.ParseLenRange(outputLenRange); err != nil {
				return fmt.Errorf("--output-len-range: %w", err)
			}
			o.SimStep = time.Duration(simStepUS) * time.Microsecond
			o.TimeoutReady = seconds(timeoutReadyS)
			o.APIKey = apiKey(cmd, o.APIKey)
			if o.Device == "cpu" && !cmd.Flags().Changed("num-prompts") {
				o.NumPrompts = cpuDefaultNumPrompts
			}
			if o.Device == "cpu" && !cmd.Flags().Changed("output-len") {
				o.OutputLen = cpuDefaultOutputLen
			}
			o.Log = os.Stderr
			if err := prof.Validate(); err != nil {
				return err
			}
			if prof.Only {
				return profileOffline(prof, o, nil, nil)
			}
			rep, err := offline.Run(sig.stop, o)
			if err != nil {
				return err
			}
			fmt.Println(rep.ResultsPath)
			fmt.Println(rep.SummaryPath)
			if rep.Interrupted {
				return &exitError{code: exitInterrupted, msg: "interrupted; partial results written to " + rep.RunDir}
			}
			var benchErr error
			if len(rep.Failures) > 0 {
				benchErr = &exitError{code: exitFailed, msg: "failed:\n  " + strings.Join(rep.Failures, "\n  ")}
			}
			if prof.Enabled() {
				return profileOffline(prof, o, rep, benchErr)
			}
			return benchErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&backends, "backends", backends, "comma list: roseinfer (in-process engine), roseinfer+server (HTTP)")
	f.StringVar(&o.Device, "device", o.Device, "cpu, sim, cuda or auto (cuda when usable, else cpu): the in-process engine's device and roseinfer serve's --device")
	f.StringVar(&o.Model, "model", "", `HF checkpoint directory, GPT-2 or Qwen3 ("" = built-in tiny model)`)
	f.IntVar(&simStepUS, "sim-step-us", 1000, "step time of the sim device in µs")
	f.IntVar(&o.NumPrompts, "num-prompts", o.NumPrompts, fmt.Sprintf("number of prompts; CPU: %d", cpuDefaultNumPrompts))
	f.IntVar(&o.InputLen, "input-len", o.InputLen, "prompt length in tokens")
	f.IntVar(&o.OutputLen, "output-len", o.OutputLen, fmt.Sprintf("generated tokens per prompt; CPU: %d", cpuDefaultOutputLen))
	f.Float64Var(&o.RandomRangeRatio, "random-range-ratio", 0, "0 <= R < 1: lengths uniform in [floor(len*(1-R)), ceil(len*(1+R))], as vLLM (0 = fixed)")
	f.StringVar(&inputLenRange, "input-len-range", "", "A,B: input lengths uniform in [A, B], both included (wins over --random-range-ratio)")
	f.StringVar(&outputLenRange, "output-len-range", "", "A,B: output lengths uniform in [A, B], both included (wins over --random-range-ratio)")
	f.Float64Var(&o.Temperature, "temperature", o.Temperature, "sampling temperature")
	f.Float64Var(&o.TopP, "top-p", o.TopP, "nucleus sampling top_p")
	f.IntVar(&o.TopK, "top-k", o.TopK, "top_k")
	f.BoolVar(&o.IgnoreEOS, "ignore-eos", o.IgnoreEOS, "generate exactly --output-len tokens (--ignore-eos=false stops at EOS)")
	f.Int64Var(&o.Seed, "seed", o.Seed, "seed of the prompt token ids")
	f.IntVar(&o.MaxBatchSize, "max-batch-size", o.MaxBatchSize, "sequences per engine step (roseinfer --max-num-seqs)")
	f.IntVar(&o.WarmupPrompts, "warmup-prompts", o.WarmupPrompts, "warmup prompts before the timed batch (0 = none)")
	f.BoolVar(&o.PrefixCache, "prefix-cache", o.PrefixCache, "roseinfer prefix cache")
	f.StringVar(&serverArgs, "server-args", "", `extra "roseinfer serve" flags for roseinfer+server`)
	f.StringVar(&o.RoseinferBin, "roseinfer-bin", "", "roseinfer executable (default: next to bench, then $PATH, then go build)")
	f.StringVar(&o.Host, "host", o.Host, "bind host of the launched server")
	registerAPIKey(cmd, &o.APIKey)
	f.IntVar(&o.PortBase, "port-base", o.PortBase, "first port tried for the server")
	f.Float64Var(&timeoutReadyS, "timeout-ready-s", o.TimeoutReady.Seconds(), "max seconds to wait for the server")
	f.StringVar(&o.OutputDir, "output-dir", o.OutputDir, "parent of the run directory offline_<YYYYmmdd_HHMMSS>")
	backend.RegisterThirdPartyFlags(f, &o.ThirdParty)
	profile.RegisterOfflineFlags(f, &prof)
	return cmd
}
