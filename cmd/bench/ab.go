package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/ab"
	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/results"
)

func init() { addCommand(newABCmd) }

type abFlags struct {
	scales, failOn, from, output string
	aArgs, bArgs, serverArgs     string
	timeoutReadyS, requestS      float64
	json                         bool
}

func newABCmd() *cobra.Command {
	o := ab.DefaultOptions()
	var f abFlags
	cmd := &cobra.Command{
		Use:   "ab --a X --b Y [flags]",
		Short: "Same-machine A/B: two servers, interleaved rounds, B/A ratios with bootstrap intervals",
		Long: `Run the same workload against two servers on this machine, in interleaved
rounds, and judge B against A: each figure's B/A ratio over all rounds with a
95% bootstrap interval, and a verdict per --fail-on rule. Use it instead of a
baseline measured on another machine (or on this one, another day): the two
sides share the machine and the hour, so what moved between them is the code.

--a and --b each name a roseinfer executable, a git commit (built with
go build from "git archive" of the commit in --repo, default the module's
repository, into a temporary directory), or the base URL of a running server.
--a-args/--b-args add serve flags to one side only (after --server-args, so
they win): the same binary twice with different flags is an A/B of a flag.

Rounds: both servers are launched and warmed up, then stay up; every scale
runs --rounds rounds per side in the order ABBA ABBA ... (pair i: A then B
when i is even, B then A when odd). A linear drift of the machine then
cancels within each ABBA block, and each side goes first as often as second;
ABAB would put B after A every time and carry one round of drift into the
ratio. Use a multiple of 4; many short rounds judge better than few long ones.

Intervals: a paired two-level bootstrap. Each resample draws ABBA blocks
with replacement and, inside each block drawn, requests (the same trace rows
on both sides) with replacement; the percentile, mean or rate is computed on
each side and their ratio kept. The interval is Hesterberg's expanded
percentile interval, which widens the plain 2.5%-97.5% one for few blocks;
fewer than 6 blocks (12 rounds) are warned about. Percentiles and rates over
all rounds are exactly those of the pooled summary in online_results.json.

Verdicts: --fail-on takes bench compare's rules (default:
  ` + report.DefaultFailOn + `)
on the metrics ttft_ms, tpot_ms, itl_ms, e2e_ms .{p50,p90,p99,mean},
tok_per_s (output_tok_s), req_per_s. A rule is broken when the ratio's
change crosses it; that is a regression when the interval excludes 1.0 on
that side, else within_noise. B's success rate below --min-success-rate is a
regression; A's makes the comparison unusable.

Writes <output-dir>/ab_<YYYYmmdd_HHMMSS>/: online_results.json (sides A and
B, every request, per-round and pooled summaries: bench report and bench plot
read it), ab.json, ab.md, A.server.log, B.server.log. Prints ab.md (or ab.json
with --json). --from DIR judges a finished run again (other rules, other
resamples) without running it.

Exit status: 0 no regression, 1 regression, 2 a side could not be built,
launched or kept running, or a rule could not be evaluated (1 wins when there
is also a regression), 130 interrupted.`,
		Example: `  bench ab --a HEAD~1 --b HEAD --device sim --server-args "--sim-step-us 1000"
  bench ab --a bin/roseinfer --b bin/roseinfer --device sim --a-args "--sim-step-us 1000" --b-args "--sim-step-us 1200"
  bench ab --a ./old/roseinfer --b ./new/roseinfer --device cuda --model ./gpt2 --server-args "--gpu-memory-utilization 0.4" --n 150
  bench ab --a http://10.0.0.5:8000 --b http://10.0.0.6:8000 --model gpt2
  bench ab --from results/runs/ab_20260101_021700 --fail-on "tpot_ms.p90>+5%"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAB(cmd, &o, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.A.Spec, "a", "", "side A (the baseline): a roseinfer executable, a git commit, or a base URL")
	fl.StringVar(&o.B.Spec, "b", "", "side B (judged against A): a roseinfer executable, a git commit, or a base URL")
	fl.StringVar(&f.aArgs, "a-args", "", `extra "roseinfer serve" flags for side A only`)
	fl.StringVar(&f.bArgs, "b-args", "", `extra "roseinfer serve" flags for side B only`)
	fl.StringVar(&o.Repo, "repo", "", "git repository that commits are read from (default: the roseinfer module's)")
	fl.StringVar(&f.from, "from", "", "judge a finished bench ab run directory again instead of running one")
	fl.StringVar(&f.failOn, "fail-on", "", `regression rules, e.g. "tpot_ms.p90>+10%,output_tok_s<-5%" (default: the rules above; "none": report only)`)
	fl.IntVar(&o.Stats.Iterations, "bootstrap-iterations", o.Stats.Iterations, "bootstrap resamples")
	fl.Uint64Var(&o.Stats.Seed, "bootstrap-seed", o.Stats.Seed, "seed of the resamples: the intervals depend only on the records and it")
	fl.Float64Var(&o.Stats.MinSuccessRate, "min-success-rate", o.Stats.MinSuccessRate, "B below this share of successful requests is a regression; A below it, unusable")
	fl.BoolVar(&f.json, "json", false, "print ab.json instead of ab.md")
	fl.StringVar(&f.output, "output", "", "also write the printed report to this file")

	fl.StringVar(&o.Servers.Device, "device", o.Servers.Device, "roseinfer --device for launched sides: cpu, sim, cuda or auto")
	fl.StringVar(&o.Servers.Model, "model", "", `launched sides: HF checkpoint directory ("" = built-in tiny model); URL sides: model id to request`)
	fl.StringVar(&f.serverArgs, "server-args", "", `extra "roseinfer serve" flags for both sides, e.g. "--sim-step-us 1000"`)
	fl.StringVar(&f.scales, "scales", "0.4", "comma list of trace time multipliers; every scale gets all its rounds")
	fl.IntVar(&o.Load.Pairs, "rounds", o.Load.Pairs, "rounds per side and scale (round pairs); a multiple of 4, so ABBA blocks are whole")
	fl.IntVar(&o.Workload.N, "n", o.Workload.N, "trace rows replayed (the first N of the file)")
	fl.StringVar(&o.Workload.TracePath, "trace", "", "trace file (default: bundled Azure 2023 conversation)")
	fl.StringVar(&o.Workload.TraceFormat, "trace-format", "", "trace format: azure, mooncake, qwen or burstgpt (default: detected)")
	fl.StringVar(&o.Workload.PrefixMode, "prefix-mode", o.Workload.PrefixMode, "prompt sharing: base or trace (as bench online)")
	fl.Float64Var(&o.Load.StartOffsetS, "start-offset-s", o.Load.StartOffsetS, "seconds added to every scheduled time")
	fl.IntVar(&o.Workload.MaxInputLen, "max-input-len", 0, "clamp on input tokens (0 = none)")
	fl.IntVar(&o.Workload.MaxOutputLen, "max-output-len", o.Workload.MaxOutputLen, "clamp on output tokens")
	fl.IntVar(&o.Workload.ModelMaxLen, "model-max-len", 0, "the model's context length (0 = --model DIR's config.json, else 1024)")
	registerSamplingFlags(fl, &o.Workload)
	fl.BoolVar(&o.Workload.IgnoreEOS, "ignore-eos", false, "send ignore_eos: every request generates its full output length (steadier ratios)")
	fl.StringVar(&o.Workload.Endpoint, "endpoint", "completions", "completions or chat")
	fl.IntVar(&o.Workload.WarmupRequests, "warmup-requests", o.Workload.WarmupRequests, "sequential warmup requests per side before the first round")
	registerWarmupShapeFlags(fl, &o.Workload)
	fl.Float64Var(&o.Load.SendLagThresholdMs, "send-lag-threshold-ms", o.Load.SendLagThresholdMs, "a round whose send-lag p99 exceeds this is named in the warnings")
	fl.Float64Var(&f.timeoutReadyS, "timeout-ready-s", o.Servers.TimeoutReady.Seconds(), "max seconds to wait for a server to become ready")
	fl.Float64Var(&f.requestS, "request-timeout-s", o.Load.RequestTimeout.Seconds(), "per-request timeout in seconds (0 = none)")
	fl.StringVar(&o.Servers.Host, "host", o.Servers.Host, "bind host of launched servers")
	fl.IntVar(&o.Servers.PortBase, "port-base", o.Servers.PortBase, "first port tried for the launched servers")
	fl.StringVar(&o.Servers.ServerCPUs, "server-cpus", "", `pin both launched servers to these CPUs ("none": no pinning); default as bench online`)
	fl.StringVar(&o.Servers.ClientCPUs, "client-cpus", "", `pin the harness to these CPUs ("none": no pinning)`)
	fl.StringVar(&o.Servers.GPU, "gpu", "", "CUDA_VISIBLE_DEVICES for launched servers (default: inherited)")
	fl.StringVar(&o.Output.OutputDir, "output-dir", o.Output.OutputDir, "parent of the run directory ab_<YYYYmmdd_HHMMSS>")
	registerAPIKey(cmd, &o.Servers.APIKey)
	return cmd
}

func abUnusable(err error) error { return &exitError{code: exitUnusable, msg: "ab: " + err.Error()} }

func runAB(cmd *cobra.Command, o *ab.Options, f *abFlags) error {
	var err error
	switch f.failOn {
	case "":
	case "none":
		o.Stats.Rules = nil
	default:
		if o.Stats.Rules, err = report.ParseFailOn(f.failOn); err != nil {
			return abUnusable(err)
		}
	}
	if f.from != "" {
		for _, name := range []string{"a", "b", "a-args", "b-args", "repo"} {
			if cmd.Flags().Changed(name) {
				return abUnusable(fmt.Errorf("--from judges a finished run: --%s does not apply", name))
			}
		}
		on, err := results.LoadOnline(resultsPath(f.from))
		if err != nil {
			return abUnusable(err)
		}
		res, err := ab.Analyze(on, o.Stats)
		if err != nil {
			return abUnusable(fmt.Errorf("%s: %w", f.from, err))
		}
		return printAB(cmd.OutOrStdout(), res, f)
	}
	if o.A.Spec == "" || o.B.Spec == "" {
		return abUnusable(fmt.Errorf("--a and --b are both required (or --from DIR)"))
	}
	if o.Load.Scales, err = parseFloats(f.scales); err != nil {
		return abUnusable(fmt.Errorf("--scales: %w", err))
	}
	for _, a := range []struct {
		flag, value string
		dst         *[]string
	}{{"--a-args", f.aArgs, &o.A.Args}, {"--b-args", f.bArgs, &o.B.Args}, {"--server-args", f.serverArgs, &o.Servers.ServerArgs}} {
		if *a.dst, err = backend.SplitArgs(a.value); err != nil {
			return abUnusable(fmt.Errorf("%s: %w", a.flag, err))
		}
	}
	o.Servers.TimeoutReady = seconds(f.timeoutReadyS)
	o.Load.RequestTimeout = seconds(f.requestS)
	o.Servers.APIKey = apiKey(cmd, o.Servers.APIKey)
	o.Output.Log = os.Stderr
	stop := sig.stop
	if stop == nil { // not started through runMain (tests)
		stop = context.Background()
	}
	rep, err := ab.Run(stop, sig.abort, *o)
	if err != nil {
		return abUnusable(err)
	}
	fmt.Fprintln(os.Stderr, "run directory:", rep.RunDir)
	if len(rep.Failures) > 0 {
		return abUnusable(fmt.Errorf("no comparison:\n  %s", strings.Join(rep.Failures, "\n  ")))
	}
	err = printAB(cmd.OutOrStdout(), rep.Result, f)
	if rep.Interrupted { // as bench online: 130 whatever the verdict on what finished
		return &exitError{code: exitInterrupted, msg: "interrupted; the rounds that finished were judged, in " + rep.RunDir}
	}
	return err
}

// resultsPath accepts a run directory or its online_results.json.
func resultsPath(p string) string {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return filepath.Join(p, results.OnlineResultsFile)
	}
	return p
}

// printAB prints the report, writes --output, and turns the verdict into
// the exit status (bench compare's).
func printAB(out io.Writer, res *ab.Result, f *abFlags) error {
	write := res.WriteMarkdown
	if f.json {
		write = res.WriteJSON
	}
	if err := write(out); err != nil {
		return err
	}
	if f.output != "" {
		if err := results.WriteAtomic(f.output, write); err != nil {
			return abUnusable(err)
		}
	}
	if res.Regressions > 0 {
		return &exitError{code: exitRegression, msg: fmt.Sprintf("ab: %d regression(s) of B against A", res.Regressions)}
	}
	if len(res.Unevaluated) > 0 {
		return &exitError{code: exitUnusable, msg: fmt.Sprintf("ab: %d check(s) could not be evaluated:\n  %s",
			len(res.Unevaluated), strings.Join(res.Unevaluated, "\n  "))}
	}
	return nil
}
