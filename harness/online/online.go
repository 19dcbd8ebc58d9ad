package online

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/rundir"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/harness/timeline"
	"github.com/roseinfer/roseinfer/harness/workload"
	"github.com/roseinfer/roseinfer/results"
)

// Report is what a run leaves for the command to print and exit on.
type Report struct {
	RunDir      string
	ResultsPath string
	SummaryPath string
	// TimelinePath is timeline.json with --timeline ("" without).
	TimelinePath string
	// Failures name each backend (or scale) that failed; non-empty means
	// the command must exit non-zero.
	Failures    []string
	Interrupted bool
}

// Online runs `bench online`. Cancelling ctx stops dispatching new requests
// (the first Ctrl-C): requests in flight finish, the servers are stopped and
// the partial results are written. Cancelling abort ends requests in flight
// as well (the second Ctrl-C). The error is for problems before any
// backend ran (bad flags, unreadable trace); backend failures are in the
// report and the results.
func Online(ctx, abort context.Context, o OnlineOptions) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Output.Log == nil {
		o.Output.Log = io.Discard
	}
	if abort == nil {
		abort = context.Background()
	}
	if o.Workload.ModelDir == "" && workload.IsModelDir(o.Servers.Model) {
		o.Workload.ModelDir = o.Servers.Model
	}
	w, err := workload.Load(&o.Workload)
	if err != nil {
		return nil, err
	}
	slo, err := parseSLO(o.Load.SLO)
	if err != nil {
		return nil, err
	}
	runDir, err := rundir.Make(o.Output.RunDir, o.Output.OutputDir, "online")
	if err != nil {
		return nil, err
	}
	prefix, note, err := servers.ApplyCPUSplit(&o.Servers)
	if note != "" {
		fmt.Fprintln(o.Output.Log, note)
	}
	if err != nil {
		return nil, err
	}
	specs, skipped, err := servers.Specs(ctx, &o.Servers, w.Context())
	if err != nil {
		return nil, err
	}

	rep := &Report{RunDir: runDir, ResultsPath: filepath.Join(runDir, results.OnlineResultsFile),
		SummaryPath: filepath.Join(runDir, report.OnlineSummaryFile)}
	labels := make([]string, 0, len(specs)+len(skipped))
	for _, s := range specs {
		labels = append(labels, s.Label)
	}
	for _, b := range skipped {
		labels = append(labels, b.Backend)
	}
	out := &results.Online{Meta: onlineMeta(&o, w, labels), ByBackend: map[string]*results.Backend{}}
	versions := rundir.Versions(ctx)
	out.Meta[results.MetaVersions] = versions
	runStart := time.Now()
	out.Meta["run_start_time"] = runStart.Format(rundir.TimeFormat)
	for _, b := range skipped {
		out.ByBackend[b.Backend] = b
		rep.Failures = append(rep.Failures, b.Backend+": "+b.Error)
		fmt.Fprintf(o.Output.Log, "[%s] skipped: %s\n", b.Backend, b.Error)
		if b.FixHint != "" {
			fmt.Fprintf(o.Output.Log, "[%s] fix: %s\n", b.Backend, b.FixHint)
		}
	}
	write := func() error {
		out.Meta["run_end_time"] = time.Now().Format(rundir.TimeFormat)
		out.Meta["wall_s"] = time.Since(runStart).Seconds()
		out.Meta["interrupted"] = rep.Interrupted
		if err := results.WriteJSON(rep.ResultsPath, out); err != nil {
			return err
		}
		return results.WriteAtomic(rep.SummaryPath, func(wr io.Writer) error { return report.WriteOnlineSummary(wr, out) })
	}
	if err := write(); err != nil {
		return rep, err
	}

	usedPorts := map[int]bool{}
	for _, spec := range specs {
		if ctx.Err() != nil {
			rep.Interrupted = true
			break
		}
		br := &backendRun{o: &o, w: w, slo: slo, spec: spec, out: out, rep: rep, write: write,
			launch: backend.LaunchOptions{Host: o.Servers.Host, PortBase: o.Servers.PortBase, UsedPorts: usedPorts, RunDir: runDir,
				ReadyTimeout: o.Servers.TimeoutReady, Prefix: prefix}}
		br.run(ctx, abort, versions)
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
	}
	if err := write(); err != nil {
		return rep, err
	}
	if o.Output.Timeline {
		if rep.TimelinePath, err = timeline.Write(runDir, out); err != nil {
			return rep, fmt.Errorf("timeline: %w", err)
		}
	}
	return rep, nil
}

// backendRun is one backend's part of an online run.
type backendRun struct {
	o    *OnlineOptions
	w    *workload.Workload
	slo  sloConfig
	spec backend.Spec
	// endpoint is the route requests go to (--endpoint applied).
	endpoint client.Endpoint
	launch   backend.LaunchOptions
	out      *results.Online
	rep      *Report
	write    func() error
	tl       *timeline.Server // nil without --timeline
}

func (br *backendRun) fail(rec *results.Backend, msg string) {
	rec.Error = msg
	br.rep.Failures = append(br.rep.Failures, br.spec.Label+": "+msg)
	fmt.Fprintf(br.o.Output.Log, "[%s] FAILED: %s\n", br.spec.Label, msg)
}

func (br *backendRun) run(ctx, abort context.Context, versions map[string]any) {
	o, label := br.o, br.spec.Label
	start := time.Now()
	rec := &results.Backend{Backend: label, Env: br.spec.Env,
		Timing: results.BackendTiming{BackendStartTime: start.Format(rundir.TimeFormat), ScaleWallS: map[string]float64{}}}
	br.out.ByBackend[label] = rec
	defer func() {
		rec.Timing.BackendEndTime = time.Now().Format(rundir.TimeFormat)
		rec.Timing.BackendWallS = time.Since(start).Seconds()
		br.write()
	}()

	fmt.Fprintf(o.Output.Log, "[%s] starting\n", label)
	spec := br.spec
	if o.Output.Timeline {
		spec, br.tl = timeline.ForBackend(spec, br.launch.RunDir)
		defer br.tl.Close()
	}
	srv, err := backend.Launch(ctx, spec, br.launch)
	if err != nil {
		br.fail(rec, err.Error())
		return
	}
	defer srv.Stop()
	br.tl.Attach(srv.BaseURL)
	rec.BaseURL, rec.Cmd, rec.LogPath = srv.BaseURL, srv.Argv, srv.LogPath
	rec.Python = br.spec.Python
	for k, v := range br.spec.Versions {
		versions[k] = v
	}
	rec.Timing.ServerReadyS = srv.ReadyAt.Seconds()
	if br.spec.Version != nil {
		if v := br.spec.Version(ctx); v != "" {
			versions[label] = v
		}
	}
	fmt.Fprintf(o.Output.Log, "[%s] ready at %s after %.1f s\n", label, srv.BaseURL, srv.ReadyAt.Seconds())

	model := srv.RequestModel(o.Servers.Model)
	q := o.Workload.Quirks(br.spec.Quirks)
	br.endpoint = q.Endpoint
	bodies, err := br.w.Bodies(&o.Workload, model, q)
	if err != nil {
		br.fail(rec, err.Error())
		return
	}
	c := client.New(client.Options{BaseURL: srv.BaseURL, MaxConcurrency: len(bodies), Timeout: o.Load.RequestTimeout,
		APIKey: br.spec.APIKey, CountTokens: workload.CountTokens})
	defer c.Close()

	warm, err := br.w.WarmupBodies(&o.Workload, model, q)
	if err != nil {
		br.fail(rec, err.Error())
		return
	}
	warmupTime, err := replay.Warmup(ctx, c, q.Endpoint, warm)
	rec.Timing.WarmupS = warmupTime.Seconds()
	if err != nil {
		if ctx.Err() == nil {
			br.fail(rec, err.Error())
		}
		return
	}

	for _, scale := range o.Load.Scales {
		if ctx.Err() != nil {
			return
		}
		if !br.runScale(ctx, abort, c, srv, rec, bodies, scale) {
			return
		}
	}
}

// runScale replays every round of one scale; false stops the backend.
func (br *backendRun) runScale(ctx, abort context.Context, c *client.Client, srv *backend.Server,
	rec *results.Backend, bodies [][]byte, scale float64) bool {
	o, label := br.o, br.spec.Label
	items, err := br.w.Items(bodies, scale, o.Load.StartOffsetS)
	if err != nil {
		br.fail(rec, err.Error())
		return false
	}
	scaleStart := time.Now()
	var roundReqs [][]results.Request
	var outliers []*results.ITLOutliers // per round, with --timeline
	interrupted := ""
	var last, agg results.Summary
	for round := 1; round <= o.Load.Repeat; round++ {
		if ctx.Err() != nil && round > 1 {
			break
		}
		var bar Bar
		if o.Output.Progress != nil {
			bar = o.Output.Progress.Start(label, scale, round, o.Load.Repeat, len(items))
		}
		capture := br.tl.Begin(ctx, fmt.Sprintf("scale_%s_round_%d", scaleKey(scale), round))
		r := replay.Run(ctx, items, replay.Options{Client: c, Endpoint: br.endpoint, RequestContext: abort,
			OnDone: func(*results.Request) {
				if bar != nil {
					bar.Add(1)
				}
			}})
		if len(r.Requests) == 0 {
			capture.End(ctx, r.Start, nil, results.Stats{}) // stop the server's capture
			if bar != nil {
				bar.Finish("interrupted before the first request")
			}
			break
		}
		fillRequests(r.Requests)
		roundNo := round
		if o.Load.Repeat == 1 {
			roundNo = 0 // a single run is its own aggregate
		}
		s := summarize(label, scale, roundNo, r.Requests, br.slo, o.Load.SendLagThresholdMs)
		roundTimeline, roundOutliers := capture.End(ctx, r.Start, r.Requests, s.ITLMs)
		s.ITLOutliers = roundOutliers
		if r.Interrupted {
			interrupted = fmt.Sprintf("interrupted: %d of %d requests not sent", r.NotSent, len(items))
			s.Valid, s.InvalidReason = false, joinReason(s.InvalidReason, interrupted)
		}
		last = s
		line := scaleLine(label, scale, round, o.Load.Repeat, s)
		if bar != nil {
			bar.Finish(line)
		} else {
			fmt.Fprintln(o.Output.Log, line)
		}
		roundReqs = append(roundReqs, r.Requests)
		rec.Runs = append(rec.Runs, results.Run{Scale: scale, Round: roundNo, Summary: s, RequestMetrics: r.Requests,
			Timeline: roundTimeline})
		agg = aggregate(label, scale, roundReqs, br.slo, o.Load.SendLagThresholdMs)
		if o.Output.Timeline {
			outliers = append(outliers, roundOutliers)
			agg.ITLOutliers = timeline.Sum(outliers)
			for i := range agg.Rounds { // with --repeat: the per-round summaries, in order
				agg.Rounds[i].ITLOutliers = outliers[i]
			}
			fmt.Fprintln(o.Output.Log, timeline.Line(label, scaleKey(scale), round, roundOutliers, roundTimeline))
		}
		if interrupted != "" {
			agg.Valid, agg.InvalidReason = false, joinReason(agg.InvalidReason, interrupted)
		}
		br.updateSummary(agg)
		rec.Timing.ScaleWallS[scaleKey(scale)] = time.Since(scaleStart).Seconds()
		if err := br.write(); err != nil {
			fmt.Fprintf(o.Output.Log, "[%s] writing results: %v\n", label, err)
		}
		// After a Ctrl-C the servers may have been killed on purpose.
		if died, why := srv.Died(); died && ctx.Err() == nil {
			br.fail(rec, fmt.Sprintf("%s (scale %s, round %d)", why, scaleKey(scale), round))
			return false
		}
	}
	if len(roundReqs) > 0 && ctx.Err() == nil {
		if why := report.LowSuccess(agg, o.Load.MinSuccessRate); why != "" {
			br.rep.Failures = append(br.rep.Failures, fmt.Sprintf("%s: scale %s: %s", label, scaleKey(scale), why))
		} else if last.NumSuccess == 0 {
			br.rep.Failures = append(br.rep.Failures, fmt.Sprintf("%s: scale %s: no request succeeded", label, scaleKey(scale)))
		}
	}
	return ctx.Err() == nil
}

// updateSummary replaces (or adds) the backend's summary for its scale.
func (br *backendRun) updateSummary(s results.Summary) {
	for i := range br.out.Summaries {
		if br.out.Summaries[i].Backend == s.Backend && br.out.Summaries[i].Scale == s.Scale {
			br.out.Summaries[i] = s
			return
		}
	}
	br.out.Summaries = append(br.out.Summaries, s)
}

// scaleKey formats a scale as the original's scale_wall_s keys (Python str).
func scaleKey(scale float64) string {
	s := strconv.FormatFloat(scale, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// scaleLine is the original's console line per scale, plus send lag.
func scaleLine(label string, scale float64, round, rounds int, s results.Summary) string {
	r := ""
	if rounds > 1 {
		r = fmt.Sprintf(" round=%d/%d", round, rounds)
	}
	line := fmt.Sprintf("[%s scale=%s%s] ok=%d/%d, TTFT p90=%sms, E2E p90=%sms, TPOT p90=%sms, ITL p90=%sms, send lag p99=%sms",
		label, scaleKey(scale), r, s.NumSuccess, s.NumRequests, ms(s.TTFTMs.P90), ms(s.E2EMs.P90), ms(s.TPOTMs.P90),
		ms(s.ITLMs.P90), ms(s.SendLagMs.P99))
	if s.NumRetries > 0 {
		line += fmt.Sprintf(", retried=%d", s.NumRetries)
	}
	if !s.Valid {
		line += " INVALID: " + s.InvalidReason
	}
	return line
}

func ms(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}
