package online

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/rundir"
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
	r, err := Open(ctx, o)
	if err != nil {
		return nil, err
	}
	for i := range r.specs {
		if ctx.Err() != nil {
			break
		}
		b, err := r.Start(ctx, i)
		if err != nil {
			continue // recorded in the results and the report
		}
		for _, scale := range o.Load.Scales {
			if ctx.Err() != nil || !b.br.runScale(ctx, abort, scale) {
				break
			}
		}
		b.Stop()
	}
	return r.Close(ctx)
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

	// Set by start for the replays; stop releases them.
	rec    *results.Backend
	srv    *backend.Server
	c      *client.Client
	bodies [][]byte
	began  time.Time
	tl     *timeline.Server // nil without --timeline
	// lat is the warmup's latency, which sizes the pool (nil: unmeasured).
	lat *replay.Latency
	// model and quirks are what a session's later turns are built with.
	model  string
	quirks client.Quirks
}

func (br *backendRun) fail(rec *results.Backend, msg string) {
	rec.Error = msg
	br.rep.Failures = append(br.rep.Failures, br.spec.Label+": "+msg)
	fmt.Fprintf(br.o.Output.Log, "[%s] FAILED: %s\n", br.spec.Label, msg)
}

// start launches the backend and warms it up; false when it failed (the
// failure is recorded) or the run was interrupted. stop must follow either
// way: it records the backend's timing and stops what start began.
func (br *backendRun) start(ctx context.Context, versions map[string]any) bool {
	o, label := br.o, br.spec.Label
	br.began = time.Now()
	rec := &results.Backend{Backend: label, Env: br.spec.Env,
		Timing: results.BackendTiming{BackendStartTime: br.began.Format(rundir.TimeFormat), ScaleWallS: map[string]float64{}}}
	br.rec = rec
	br.out.ByBackend[label] = rec

	fmt.Fprintf(o.Output.Log, "[%s] starting\n", label)
	spec := br.spec
	if o.Output.Timeline {
		spec, br.tl = timeline.ForBackend(spec, br.launch.RunDir)
	}
	srv, err := backend.Launch(ctx, spec, br.launch)
	if err != nil {
		br.fail(rec, err.Error())
		return false
	}
	br.srv = srv
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
	br.endpoint, br.model, br.quirks = q.Endpoint, model, q
	if br.bodies, err = br.w.Bodies(&o.Workload, model, q); err != nil {
		br.fail(rec, err.Error())
		return false
	}
	br.c = client.New(client.Options{BaseURL: srv.BaseURL, MaxConcurrency: len(br.bodies), Timeout: o.Load.RequestTimeout,
		APIKey: br.spec.APIKey, CountTokens: workload.CountTokens, KeepTokenIDs: br.w.HasSessions()})

	warm, err := br.w.WarmupBodies(&o.Workload, model, q)
	if err != nil {
		br.fail(rec, err.Error())
		return false
	}
	warmupTime, lat, err := replay.WarmupLatency(ctx, br.c, q.Endpoint, warm)
	br.lat = lat
	rec.Timing.WarmupS = warmupTime.Seconds()
	if err != nil {
		if ctx.Err() == nil {
			br.fail(rec, err.Error())
		}
		return false
	}
	return ctx.Err() == nil
}

// stop closes the client, stops the server and writes the backend's timing.
func (br *backendRun) stop() {
	if br.c != nil {
		br.c.Close()
	}
	if br.srv != nil {
		br.srv.Stop()
	}
	br.tl.Close()
	br.rec.Timing.BackendEndTime = time.Now().Format(rundir.TimeFormat)
	br.rec.Timing.BackendWallS = time.Since(br.began).Seconds()
	br.write()
}

// runScale replays every round of one scale; false stops the backend.
func (br *backendRun) runScale(ctx, abort context.Context, scale float64) bool {
	o, label, c, srv, rec := br.o, br.spec.Label, br.c, br.srv, br.rec
	items, err := br.w.Items(br.bodies, scale, o.Load.StartOffsetS)
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
		br.prewarm(ctx, items)
		dialled := c.NumDialled()
		capture := br.tl.Begin(ctx, fmt.Sprintf("scale_%s_round_%d", scaleKey(scale), round))
		ropts := replay.Options{Client: c, Endpoint: br.endpoint, RequestContext: abort,
			OnDone: func(*results.Request) {
				if bar != nil {
					bar.Add(1)
				}
			}}
		var r *replay.Round
		if br.w.HasSessions() {
			conv := br.w.Conversations(&o.Workload, br.model, br.quirks)
			r = replay.RunSessions(ctx, items, conv.Follow, ropts)
		} else {
			r = replay.Run(ctx, items, ropts)
		}
		if len(r.Requests) == 0 {
			capture.End(ctx, r.Start, nil, results.Stats{}) // stop the server's capture
			if bar != nil {
				bar.Finish("interrupted before the first request")
			}
			break
		}
		dialled = c.NumDialled() - dialled
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
		line := ScaleLine(label, scale, round, o.Load.Repeat, s)
		if bar != nil {
			bar.Finish(line)
		} else {
			fmt.Fprintln(o.Output.Log, line)
		}
		if dialled > 0 {
			fmt.Fprintf(o.Output.Log, "[%s] %d connections dialled during the round: their sends waited for the dial (--prewarm-conns %d)\n",
				label, dialled, o.Load.PrewarmConns)
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

// prewarm opens the connections the round's schedule keeps in flight
// (capped by --prewarm-conns) before its first send, so no send waits for
// a dial. A failure is reported and the round runs with what is open.
func (br *backendRun) prewarm(ctx context.Context, items []replay.Item) {
	n := min(replay.PoolSize(items, br.lat), br.o.Load.PrewarmConns)
	if n <= 0 {
		return
	}
	start := time.Now()
	dialled, err := br.c.Prewarm(ctx, n)
	if err != nil {
		fmt.Fprintf(br.o.Output.Log, "[%s] %v (%d dialled)\n", br.spec.Label, err, dialled)
	} else if dialled > 0 {
		fmt.Fprintf(br.o.Output.Log, "[%s] prewarmed %d connections (%d new) in %.0f ms\n", br.spec.Label, n, dialled,
			time.Since(start).Seconds()*1e3)
	}
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

// ScaleLine is the original's console line per scale (and round, when
// there are several), plus send lag; bench ab prints its rounds with it.
func ScaleLine(label string, scale float64, round, rounds int, s results.Summary) string {
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
	if pc := s.PrefixCache; pc != nil && pc.ImpliedHitsFound != nil {
		line += fmt.Sprintf(", prefix hits %.1f%% of implied", *pc.ImpliedHitsFound*100)
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
