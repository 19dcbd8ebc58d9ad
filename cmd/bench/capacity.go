package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/capacity"
	"github.com/roseinfer/roseinfer/harness/report"
)

func init() { addCommand(newCapacityCmd) }

const capacityExamples = `  bench capacity --slo ttft=200ms,tpot=50ms
  bench capacity --device sim --server-args "--sim-step-us 2000 --max-num-seqs 4" --slo ttft=40ms --ignore-eos
  bench capacity --rate-mode --start-rate 50 --slo ttft=100ms,tpot=20ms,e2e=2s --goodput 0.99 --tolerance 0.02
  bench capacity --base-url http://10.0.0.5:8000 --model gpt2 --slo ttft=300ms`

func newCapacityCmd() *cobra.Command {
	co := capacity.DefaultOptions()
	of := newOnlineFlags(co.Online)
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Find the highest load at which a server keeps requests within an SLO",
		Long: `Find each backend's capacity: the highest offered load (req/s) at which at
least --goodput of the requests meet every objective of --slo. Each probe is one
open-loop replay of the trace (the same replay as bench online) at one load; its
SLO attainment is the share of requests sent that succeeded and met every
objective. A probe passes when its attainment reaches --goodput and its replay
was valid: a probe whose client fell behind its schedule (send-lag p99 over
--send-lag-threshold-ms) did not offer the load it names, so it fails, never
passes.

The search: from --start-rate (default: the trace's own mean rate, scale 1) it
doubles the load while probes pass and halves it while they fail, until one
passes and one fails; then it bisects that bracket at its geometric middle until
(hi − lo)/lo is within --tolerance, and probes the answer --confirm more times
(a lucky pass that fails on a repeat becomes the upper bound and the search goes
on below it). The answer is the highest load that passed.

Load is the trace's time scale (rate r replays at scale base_rate/r, the trace's
arrival pattern kept), or with --rate-mode Poisson arrivals (exponential gaps,
seeded by --seed) at the rate. Each backend is launched and warmed up once, then
probed; --base-url probes a server someone else runs.

Writes <output-dir>/capacity_<YYYYmmdd_HHMMSS>/: capacity.json (every probe, the
bracket, the answer; rewritten after each probe), online_results.json (every
probe's raw requests, one scale per probe), capacity_summary.md,
figures/capacity_goodput.{png,svg} (attainment against load, the answer
marked) and report.html. Exit status: 0 every search converged (or passed up to
--max-rate), 1 a backend failed, found no load within the SLO or did not
converge, 130 interrupted.`,
		Example: capacityExamples,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := of.apply(cmd); err != nil {
				return err
			}
			co.Online = of.o
			rep, err := capacity.Run(sig.stop, sig.abort, co)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if err := report.WriteCapacitySummary(out, rep.Capacity); err != nil {
				return err
			}
			fmt.Fprintln(out)
			fmt.Fprintln(out, rep.CapacityPath)
			for _, p := range rep.Written {
				if base := filepath.Base(p); base == report.CapacitySummaryFile || base == report.ReportFile || strings.HasPrefix(base, "capacity_goodput") {
					fmt.Fprintln(out, p)
				}
			}
			switch {
			case rep.Interrupted:
				return &exitError{code: exitInterrupted, msg: "interrupted; partial results written to " + rep.RunDir}
			case len(rep.Failures) > 0:
				return &exitError{code: exitFailed, msg: "failed:\n  " + strings.Join(rep.Failures, "\n  ")}
			}
			return nil
		},
	}
	of.register(cmd)
	f := cmd.Flags()
	f.Float64Var(&co.Search.Target, "goodput", co.Search.Target, "least share of requests that must meet every SLO objective (a fraction in (0, 1])")
	f.Float64Var(&co.Search.Tolerance, "tolerance", co.Search.Tolerance, "stop when the bracket's width (hi − lo)/lo is within this fraction")
	f.BoolVar(&co.RateMode, "rate-mode", false, "search a Poisson arrival rate instead of the trace's time scale")
	f.Float64Var(&co.Search.Start, "start-rate", 0, "first offered load in req/s (0 = the trace's own mean rate, scale 1)")
	f.Float64Var(&co.Search.MaxLoad, "max-rate", 0, "never offer more than this many req/s (0 = no limit)")
	f.IntVar(&co.Search.MaxProbes, "max-probes", co.Search.MaxProbes, "most probes per backend")
	f.IntVar(&co.Search.Confirm, "confirm", co.Search.Confirm, "repeats of the answer's probe that must pass too")
	f.Lookup("slo").Usage = "required: the objectives each request must meet, e.g. ttft=200ms,tpot=50ms (also e2e)"
	return cmd
}
