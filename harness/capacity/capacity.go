package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/harness/online"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/rundir"
	"github.com/roseinfer/roseinfer/results"
	"github.com/roseinfer/roseinfer/traces"
)

// Options are bench capacity's settings.
type Options struct {
	// Online holds the servers, the workload, the rounds per probe
	// (Load.Repeat), the SLO (Load.SLO, required) and the send-lag rule
	// that makes a probe invalid. Load.Scales is unused: the search
	// chooses each scale.
	Online online.OnlineOptions
	// Search: loads are offered rates in req/s; Start 0 is the trace's own
	// mean rate (scale 1).
	Search SearchOptions
	// RateMode offers Poisson arrivals at each probed rate instead of the
	// trace's own arrivals time-scaled (--rate-mode).
	RateMode bool
}

// DefaultOptions are bench capacity's defaults: bench online's, with no
// success-rate rule (a probe that fails is an outcome, not a failed run).
func DefaultOptions() Options {
	o := online.DefaultOnline()
	o.Load.Scales = nil
	o.Load.MinSuccessRate = 0
	return Options{Online: o, Search: DefaultSearch()}
}

// Report is what a run leaves for the command to print and exit on.
type Report struct {
	RunDir       string
	CapacityPath string
	Written      []string // capacity_summary.md, figures, report.html, ...
	Capacity     *results.Capacity
	// Failures name each backend that failed, found no rate within the
	// SLO or did not converge; non-empty means the command exits non-zero.
	Failures    []string
	Interrupted bool
}

// Run finds each backend's capacity: it opens the online runner once,
// then per backend launches and warms the server, runs the search with one
// replay per probe (every probe's requests land in online_results.json)
// and records each probe in capacity.json as it finishes. At the end it
// writes capacity_summary.md, the figure and report.html beside them.
// Cancelling ctx stops after the probe in flight (its partial replay does
// not count); abort also ends the requests in flight.
func Run(ctx, abort context.Context, o Options) (*Report, error) {
	slo, err := metrics.ParseSLO(o.Online.Load.SLO)
	if err != nil {
		return nil, fmt.Errorf("--slo: %w", err)
	}
	if slo == nil {
		return nil, errors.New("--slo is required: the objectives every request must meet, e.g. --slo ttft=200ms,tpot=50ms")
	}
	check := o.Search
	if check.Start == 0 {
		check.Start = 1 // the trace's rate, known once it is loaded
	}
	if err := check.Validate(); err != nil {
		return nil, err
	}
	mode := "scale"
	if o.RateMode {
		mode, o.Online.Workload.Arrivals = "rate", "poisson"
	}
	log := o.Online.Output.Log
	if log == nil {
		log = io.Discard
	}
	o.Online.Output.Kind = "capacity"
	runner, err := online.Open(ctx, o.Online)
	if err != nil {
		return nil, err
	}
	runDir := runner.RunDir()
	w := runner.Workload()
	baseRate := w.MeanRate()
	if baseRate == 0 {
		runner.Close(ctx)
		return nil, fmt.Errorf("trace %s: its %d rows span no time, so no scale gives a rate; use --rate-mode", w.Trace().Name, w.NumRows())
	}
	so := o.Search
	if so.Start == 0 {
		so.Start = traces.MeanRate(w.Trace().Rows) // the trace's own rate, also in rate mode
		if so.Start == 0 {
			so.Start = 1
		}
	}

	runStart := time.Now()
	c := &results.Capacity{SLO: slo, GoodputTarget: so.Target, Tolerance: so.Tolerance, Meta: capacityMeta(&o, &so, mode, baseRate)}
	c.Meta["run_start_time"] = runStart.Format(rundir.TimeFormat)
	rep := &Report{RunDir: runDir, CapacityPath: filepath.Join(runDir, results.CapacityFile), Capacity: c,
		Failures: runner.Failures()}
	write := func() error {
		c.Meta["run_end_time"] = time.Now().Format(rundir.TimeFormat)
		c.Meta["wall_s"] = time.Since(runStart).Seconds()
		c.Meta["interrupted"] = ctx.Err() != nil
		return results.WriteJSON(rep.CapacityPath, c)
	}
	if err := write(); err != nil {
		runner.Close(ctx)
		return nil, err
	}
	fmt.Fprintf(log, "capacity: SLO %s, at least %s of requests; %s mode, the trace's %d requests at %.4g req/s (scale 1); first probe %.4g req/s\n",
		slo, fmtPercent(so.Target), mode, w.NumRows(), baseRate, so.Start)

	for i, label := range runner.Labels() {
		if ctx.Err() != nil {
			break
		}
		c.Backends = append(c.Backends, results.CapacityBackend{Backend: label, Mode: mode, BaseRateReqS: baseRate, Probes: []results.CapacityProbe{}})
		bk := &c.Backends[len(c.Backends)-1]
		searchBackend(ctx, abort, runner, i, bk, so, log, write)
		if why := failure(bk, ctx); why != "" {
			rep.Failures = append(rep.Failures, label+": "+why)
		}
		if err := write(); err != nil {
			fmt.Fprintf(log, "[%s] writing %s: %v\n", label, results.CapacityFile, err)
		}
	}
	onRep, err := runner.Close(ctx)
	if err != nil {
		return rep, err
	}
	rep.Interrupted = onRep.Interrupted
	if on, err := results.LoadOnline(onRep.ResultsPath); err == nil {
		for _, k := range []string{results.MetaVersions, "model", "trace_path", "effective_context"} {
			c.Meta[k] = on.Meta[k]
		}
	}
	if err := write(); err != nil {
		return rep, err
	}
	rep.Written, err = report.Write(runDir, "")
	return rep, err
}

// searchBackend launches one backend, searches its capacity and records
// the outcome in bk; write saves capacity.json after every probe.
func searchBackend(ctx, abort context.Context, runner *online.Runner, i int, bk *results.CapacityBackend,
	so SearchOptions, log io.Writer, write func() error) {
	b, err := runner.Start(ctx, i)
	if err != nil {
		bk.Stop, bk.Error = string(StopError), err.Error()
		if ctx.Err() != nil {
			bk.Stop, bk.Error = "interrupted", ""
		}
		return
	}
	defer b.Stop()
	res, err := Search(ctx, so, func(ctx context.Context, rate float64, phase Phase) (Outcome, error) {
		scale := bk.BaseRateReqS / rate
		began := time.Now()
		s, err := b.Replay(ctx, abort, scale)
		if err != nil {
			return Outcome{}, err
		}
		p := probeRecord(s, rate, phase, so.Target)
		p.WallS = time.Since(began).Seconds()
		bk.Probes = append(bk.Probes, p)
		verdict := "pass"
		if !p.Pass {
			verdict = "fail"
		}
		if !p.Valid {
			verdict = "FAIL (invalid: " + p.InvalidReason + ")"
		}
		fmt.Fprintf(log, "[%s] probe %d (%s) at %.4g req/s (scale %.4g): %s of requests met the SLO: %s\n",
			bk.Backend, len(bk.Probes), phase, rate, scale, fmtPercent(p.SLOAttainment), verdict)
		if err := write(); err != nil {
			fmt.Fprintf(log, "[%s] writing %s: %v\n", bk.Backend, results.CapacityFile, err)
		}
		return Outcome{Attainment: p.SLOAttainment, Valid: p.Valid}, nil
	})
	if res == nil { // bad options: Run validated them, so this is a bug
		bk.Stop, bk.Error = string(StopError), err.Error()
		return
	}
	bk.Stop, bk.Converged = string(res.Stop), res.Converged()
	if err != nil {
		bk.Error = err.Error()
		if ctx.Err() != nil {
			bk.Stop, bk.Error = "interrupted", ""
		}
	}
	if res.Lo > 0 {
		bk.Bracket.LoReqS, bk.CapacityReqS = ptr(res.Lo), ptr(res.Lo)
		bk.CapacityScale = ptr(bk.BaseRateReqS / res.Lo)
	}
	if res.Hi > 0 {
		bk.Bracket.HiReqS = ptr(res.Hi)
		for _, st := range res.Steps {
			bk.LimitedByClient = bk.LimitedByClient || (st.Load == res.Hi && !st.Outcome.Valid)
		}
	}
	fmt.Fprintf(log, "[%s] %s\n", bk.Backend, resultLine(bk))
}

// probeRecord is one probe as capacity.json keeps it, from the scale's
// summary (computed by harness/metrics).
func probeRecord(s results.Summary, rate float64, phase Phase, target float64) results.CapacityProbe {
	p := results.CapacityProbe{RateReqS: rate, Scale: s.Scale, Phase: string(phase), Valid: s.Valid,
		InvalidReason: s.InvalidReason, NumRequests: s.NumRequests, NumSuccess: s.NumSuccess, ReqPerS: s.ReqPerS,
		TTFTP90Ms: s.TTFTMs.P90, TPOTP90Ms: s.TPOTMs.P90, SendLagP99Ms: s.SendLagMs.P99}
	if s.SLOAttainment != nil {
		p.SLOAttainment = *s.SLOAttainment
	}
	so := SearchOptions{Target: target}
	p.Pass = so.Passes(Outcome{Attainment: p.SLOAttainment, Valid: p.Valid})
	return p
}

// failure is why a backend's search makes the run fail, or "".
func failure(bk *results.CapacityBackend, ctx context.Context) string {
	switch {
	case ctx.Err() != nil || bk.Converged || bk.Stop == string(StopMaxLoad):
		return ""
	case bk.Error != "":
		return bk.Error
	case bk.Stop == string(StopMinLoad):
		return "no offered rate met the SLO, down to the lowest probed (see " + results.CapacityFile + ")"
	case bk.Stop == string(StopMaxProbes):
		return "not converged within --max-probes; the answer is only bracketed"
	}
	return "search ended: " + bk.Stop
}

// resultLine is the console's last word on one backend.
func resultLine(bk *results.CapacityBackend) string {
	if bk.CapacityReqS == nil {
		return fmt.Sprintf("no capacity found after %d probes: %s", len(bk.Probes), report.CapacityVerdict(bk))
	}
	hi := "no load failed"
	if bk.Bracket.HiReqS != nil {
		hi = fmt.Sprintf("%.4g req/s failed", *bk.Bracket.HiReqS)
	}
	return fmt.Sprintf("capacity %.4g req/s (scale %.4g; %s), %d probes: %s",
		*bk.CapacityReqS, *bk.CapacityScale, hi, len(bk.Probes), report.CapacityVerdict(bk))
}

func capacityMeta(o *Options, so *SearchOptions, mode string, baseRate float64) map[string]any {
	var maxRate any
	if so.MaxLoad > 0 {
		maxRate = so.MaxLoad
	}
	return map[string]any{
		"mode":                  mode,
		"base_rate_req_s":       baseRate,
		"start_rate_req_s":      so.Start,
		"max_rate_req_s":        maxRate,
		"max_probes":            so.MaxProbes,
		"confirm":               so.Confirm,
		"slo":                   o.Online.Load.SLO,
		"device":                o.Online.Servers.Device,
		"n":                     o.Online.Workload.N,
		"repeat":                o.Online.Load.Repeat,
		"seed":                  o.Online.Workload.Seed,
		"send_lag_threshold_ms": o.Online.Load.SendLagThresholdMs,
		"base_url":              o.Online.Servers.BaseURL,
		"server_args":           strings.Join(o.Online.Servers.ServerArgs, " "),
		"online_results":        results.OnlineResultsFile,
	}
}

func fmtPercent(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func ptr(v float64) *float64 { return &v }
