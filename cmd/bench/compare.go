package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/results"
)

func init() { addCommand(newCompareCmd) }

// Exit codes of bench compare.
const (
	exitRegression = 1 // some metric broke a --fail-on rule
	exitUnusable   = 2 // an input could not be read, the runs share nothing, or a rule could not be evaluated
)

type compareOptions struct {
	baseline, current string
	failOn            string
	json              bool
	output            string
}

func newCompareCmd() *cobra.Command {
	var o compareOptions
	cmd := &cobra.Command{
		Use:   "compare --baseline DIR|FILE --current DIR|FILE [--fail-on RULES]",
		Short: "Compare a run against a baseline and fail on regressions (nightly CI gate)",
		Long: `Compare two runs per backend x scale x metric and print the relative changes as
Markdown (or JSON with --json). Each side is a run directory (online_results.json
and/or offline_results.json inside) or one results file; baselines live under
results/baselines/.

--fail-on is a comma list of METRIC>+N% (regression when the value grew by more
than N%) or METRIC<-N% (shrank by more than N%). Without --fail-on the default
rules apply:
  ` + report.DefaultFailOn + `
(latency p90/p99 may grow 10%, output throughput may drop 5%); --fail-on none
only reports. Online metrics:
ttft_ms|tpot_ms|itl_ms|e2e_ms|icl_ms|send_lag_ms|ttft_from_scheduled_ms
.{mean,p50,p90,p99,max}, tok_per_s (alias output_tok_s), req_per_s (req_s),
success_rate, goodput_req_per_s. Offline: output_throughput_tps (output_tok_s),
request_throughput_rps (req_s), total_throughput_tps (total_tok_s), total_s.
When both runs have --repeat rounds, a change beyond a rule counts only when the
95% confidence intervals of the two runs do not overlap. A backend or scale that
disappeared from the current run (or whose metric is null there while the
baseline has it) breaks every rule. A rule that cannot be evaluated - the
metric null or zero in the baseline, null on both sides, or a --fail-on rule
matching no metric of the runs - is named under "Rules not evaluated".

Exit status: 0 no regression, 1 regression, 2 unusable input or a rule that
could not be evaluated (1 wins when there is also a regression).`,
		Example: `  bench compare --baseline results/baselines/h100-gpt2 --current R --fail-on "ttft_ms.p99>+10%,output_tok_s<-5%"
  bench compare --baseline old/online_results.json --current new/online_results.json --json > delta.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCompare(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.baseline, "baseline", "", "baseline run directory or results file (required)")
	f.StringVar(&o.current, "current", "", "current run directory or results file (required)")
	f.StringVar(&o.failOn, "fail-on", "", `regression rules, e.g. "ttft_ms.p99>+10%,output_tok_s<-5%" (default: the rules above; "none": report only)`)
	f.BoolVar(&o.json, "json", false, "print JSON instead of Markdown")
	f.StringVar(&o.output, "output", "", "also write the report to this file")
	cmd.MarkFlagRequired("baseline")
	cmd.MarkFlagRequired("current")
	return cmd
}

func unusable(err error) error { return &exitError{code: exitUnusable, msg: "compare: " + err.Error()} }

func runCompare(out io.Writer, o compareOptions) error {
	var rules []report.CompareRule
	switch o.failOn {
	case "":
		rules = report.DefaultRules()
	case "none":
	default:
		var err error
		if rules, err = report.ParseFailOn(o.failOn); err != nil {
			return unusable(err)
		}
	}
	c, err := report.CompareRuns(o.baseline, o.current, rules)
	if err != nil { // unreadable input, or ErrNothingToCompare: the runs share no backend and scale
		return unusable(err)
	}
	write := c.WriteMarkdown
	if o.json {
		write = c.WriteJSON
	}
	if err := write(out); err != nil {
		return err
	}
	if o.output != "" {
		if err := results.WriteAtomic(o.output, write); err != nil {
			return unusable(err)
		}
	}
	if c.Regressions > 0 {
		return &exitError{code: exitRegression, msg: fmt.Sprintf("compare: %d regression(s) against %s", c.Regressions, o.baseline)}
	}
	if len(c.Unevaluated) > 0 {
		return &exitError{code: exitUnusable, msg: fmt.Sprintf("compare: %d rule check(s) could not be evaluated:\n  %s",
			len(c.Unevaluated), strings.Join(c.Unevaluated, "\n  "))}
	}
	return nil
}
