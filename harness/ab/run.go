package ab

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/harness/online"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/harness/rundir"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/harness/workload"
	"github.com/roseinfer/roseinfer/results"
)

// Report is what a run leaves for the command to print and exit on.
type Report struct {
	RunDir       string
	ResultsPath  string // online_results.json
	JSONPath     string // ab.json (written once both sides finished)
	MarkdownPath string // ab.md
	Result       *Result
	// Failures name what kept the comparison from being made: a side that
	// could not be built, launched or warmed up, or that died.
	Failures    []string
	Interrupted bool
}

// side is one side's part of a run.
type side struct {
	Side
	spec     backend.Spec
	srv      *backend.Server
	client   *client.Client
	endpoint client.Endpoint
	model    string        // the model id requests carry
	quirks   client.Quirks // the request shape (a session's later turns are built in it)
	bodies   [][]byte
	rec      *results.Backend
}

// Run measures A and B in interleaved rounds (Order) on every scale and
// judges B against A. Both servers stay up for the whole run, each idle
// while the other is measured, so neither pays a start per round; on one
// GPU each must therefore fit in half its memory. Cancelling ctx stops
// before the next round (what finished is written and judged); cancelling
// abort ends requests in flight. The error is for problems before any
// round ran (bad flags, a side that cannot be resolved, an unreadable
// trace); a side that fails later is in the report.
func Run(ctx, abort context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log := o.Output.Log
	if log == nil {
		log = io.Discard
	}
	if abort == nil {
		abort = context.Background()
	}
	sides, cleanup, err := prepareSides(ctx, &o, log)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	if o.Workload.ModelDir == "" && workload.IsModelDir(o.Servers.Model) {
		o.Workload.ModelDir = o.Servers.Model
	}
	w, err := workload.Load(&o.Workload)
	if err != nil {
		return nil, err
	}
	runDir, err := rundir.Make(o.Output.RunDir, o.Output.OutputDir, "ab")
	if err != nil {
		return nil, err
	}
	prefix, note, err := servers.ApplyCPUSplit(&o.Servers)
	if note != "" {
		fmt.Fprintln(log, note)
	}
	if err != nil {
		return nil, err
	}

	rep := &Report{RunDir: runDir, ResultsPath: filepath.Join(runDir, results.OnlineResultsFile)}
	order := Order(o.Load.Pairs)
	out := &results.Online{Meta: meta(&o, w, sides, order), ByBackend: map[string]*results.Backend{}}
	out.Meta[results.MetaVersions] = rundir.Versions(ctx)
	runStart := time.Now()
	out.Meta["run_start_time"] = runStart.Format(rundir.TimeFormat)
	write := func() error {
		out.Meta["run_end_time"] = time.Now().Format(rundir.TimeFormat)
		out.Meta["wall_s"] = time.Since(runStart).Seconds()
		out.Meta["interrupted"] = rep.Interrupted
		return results.WriteJSON(rep.ResultsPath, out)
	}

	launch := backend.LaunchOptions{Host: o.Servers.Host, PortBase: o.Servers.PortBase, UsedPorts: map[int]bool{},
		RunDir: runDir, ReadyTimeout: o.Servers.TimeoutReady, Prefix: prefix}
	for _, s := range sides {
		out.ByBackend[s.Label] = s.rec
		defer s.stop()
		if err := s.start(ctx, &o, w, launch, log); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			s.rec.Error = err.Error()
			return rep, write()
		}
	}
	if err := write(); err != nil {
		return rep, err
	}

	for _, scale := range o.Load.Scales {
		if !rep.runScale(ctx, abort, &o, w, sides, out, scale, order, log, write) {
			break
		}
	}
	rep.Interrupted = ctx.Err() != nil
	if err := write(); err != nil {
		return rep, err
	}
	if len(rep.Failures) > 0 {
		return rep, nil
	}
	return rep, rep.judge(out, o.Stats)
}

// judge analyses the records just written and writes ab.json and ab.md.
func (rep *Report) judge(out *results.Online, st Stats) error {
	res, err := Analyze(out, st)
	if err != nil {
		return err
	}
	rep.Result = res
	rep.JSONPath, rep.MarkdownPath = filepath.Join(rep.RunDir, JSONFile), filepath.Join(rep.RunDir, MarkdownFile)
	if err := results.WriteAtomic(rep.JSONPath, res.WriteJSON); err != nil {
		return err
	}
	return results.WriteAtomic(rep.MarkdownPath, res.WriteMarkdown)
}

// prepareSides resolves --a and --b, builds the commits among them into a
// temporary directory (cleanup removes it; call it even on error) and
// makes each side's run spec.
func prepareSides(ctx context.Context, o *Options, log io.Writer) ([2]*side, func(), error) {
	var sides [2]*side
	var buildDir string
	cleanup := func() {
		if buildDir != "" {
			os.RemoveAll(buildDir)
		}
	}
	repo := o.Repo
	built := map[string]string{} // commit → executable
	for i, spec := range []SideSpec{o.A, o.B} {
		flag, label := []string{"--a", "--b"}[i], []string{LabelA, LabelB}[i]
		if repo == "" && !looksLikeURLOrFile(spec.Spec) {
			root, err := backend.ModuleRoot()
			if err != nil {
				return sides, cleanup, fmt.Errorf("%s %q looks like a git commit, but no repository was given (--repo): %w", flag, spec.Spec, err)
			}
			repo = root
		}
		s, err := resolve(ctx, flag, label, spec, repo)
		if err != nil {
			return sides, cleanup, err
		}
		if s.Kind == KindCommit {
			if s.Binary = built[s.Commit]; s.Binary == "" {
				if buildDir == "" {
					if buildDir, err = os.MkdirTemp("", "bench-ab-"); err != nil {
						return sides, cleanup, err
					}
				}
				fmt.Fprintf(log, "[%s] building commit %s\n", label, shortHash(s.Commit))
				if s.Binary, err = buildCommit(ctx, repo, s.Commit, buildDir); err != nil {
					return sides, cleanup, fmt.Errorf("%s %s: %w", flag, spec.Spec, err)
				}
				built[s.Commit] = s.Binary
			}
		}
		sides[i] = &side{Side: s, spec: specOf(s, &o.Servers),
			rec: &results.Backend{Backend: label, Timing: results.BackendTiming{ScaleWallS: map[string]float64{}}}}
	}
	if (sides[0].Kind == KindURL) != (sides[1].Kind == KindURL) {
		fmt.Fprintln(log, "note: one side is a running server and the other is launched here: their request shapes and machines may differ")
	}
	if sides[0].Kind == KindURL || sides[1].Kind == KindURL {
		// A server someone else runs: no default CPU split (as bench
		// online --base-url).
		o.Servers.BaseURL = cmp.Or(sides[0].URL, sides[1].URL)
	}
	return sides, cleanup, nil
}

func looksLikeURLOrFile(v string) bool {
	if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
		return true
	}
	_, err := os.Stat(v)
	return err == nil
}

// specOf is a side's run spec: roseinfer with the common flags, then the
// side's own (so they win), or a server at a URL.
func specOf(s Side, o *servers.Options) backend.Spec {
	if s.Kind == KindURL {
		return backend.OpenAI(s.Label, s.URL, o.APIKey)
	}
	env := map[string]string{}
	if o.GPU != "" {
		env["CUDA_VISIBLE_DEVICES"] = o.GPU
	}
	return backend.Roseinfer(backend.RoseinferOptions{Binary: s.Binary, Label: s.Label, Device: o.Device, Model: o.Model,
		Flags: append(append([]string{}, o.ServerArgs...), s.Args...), Env: env, APIKey: o.APIKey})
}

// start launches (or reaches) the side's server, encodes its requests and
// warms it up.
func (s *side) start(ctx context.Context, o *Options, w *workload.Workload, launch backend.LaunchOptions, log io.Writer) error {
	start := time.Now()
	s.rec.Timing.BackendStartTime = start.Format(rundir.TimeFormat)
	fmt.Fprintf(log, "[%s] starting %s\n", s.Label, s.Side)
	srv, err := backend.Launch(ctx, s.spec, launch)
	if err != nil {
		return err
	}
	s.srv = srv
	s.rec.BaseURL, s.rec.Cmd, s.rec.LogPath = srv.BaseURL, srv.Argv, srv.LogPath
	s.rec.Timing.ServerReadyS = srv.ReadyAt.Seconds()
	fmt.Fprintf(log, "[%s] ready at %s after %.1f s\n", s.Label, srv.BaseURL, srv.ReadyAt.Seconds())
	model := srv.RequestModel(o.Servers.Model)
	q := o.Workload.Quirks(s.spec.Quirks)
	s.endpoint, s.model, s.quirks = q.Endpoint, model, q
	if s.bodies, err = w.Bodies(&o.Workload, model, q); err != nil {
		return fmt.Errorf("%s: %w", s.Label, err)
	}
	s.client = client.New(client.Options{BaseURL: srv.BaseURL, MaxConcurrency: len(s.bodies), Timeout: o.Load.RequestTimeout,
		APIKey: s.spec.APIKey, CountTokens: workload.CountTokens, KeepTokenIDs: w.HasSessions()})
	warm, err := w.WarmupBodies(&o.Workload, model, q)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Label, err)
	}
	warmupTime, err := replay.Warmup(ctx, s.client, s.endpoint, warm)
	s.rec.Timing.WarmupS = warmupTime.Seconds()
	if err != nil {
		return fmt.Errorf("%s: warmup: %w", s.Label, err)
	}
	return nil
}

// stop closes the client and stops the server (idempotent).
func (s *side) stop() {
	if s.client != nil {
		s.client.Close()
	}
	if s.srv != nil {
		s.srv.Stop()
	}
	if s.rec.Timing.BackendStartTime != "" {
		s.rec.Timing.BackendEndTime = time.Now().Format(rundir.TimeFormat)
	}
}

// runScale runs every round pair of one scale in order; false stops the
// run (interrupted, or a side failed).
func (rep *Report) runScale(ctx, abort context.Context, o *Options, w *workload.Workload, sides [2]*side,
	out *results.Online, scale float64, order []int, log io.Writer, write func() error) bool {
	var items [2][]replay.Item
	for i, s := range sides {
		var err error
		if items[i], err = w.Items(s.bodies, scale, o.Load.StartOffsetS); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			return false
		}
	}
	scaleStart := time.Now()
	var rounds [2][][]results.Request
	for k, which := range order {
		if ctx.Err() != nil {
			return false
		}
		s := sides[which]
		round := k/2 + 1
		ropts := replay.Options{Client: s.client, Endpoint: s.endpoint, RequestContext: abort}
		var r *replay.Round
		if w.HasSessions() { // a later turn goes out after the answer it continues, as in bench online
			r = replay.RunSessions(ctx, items[which], w.Conversations(&o.Workload, s.model, s.quirks).Follow, ropts)
		} else {
			r = replay.Run(ctx, items[which], ropts)
		}
		if r.Interrupted || len(r.Requests) < len(items[which]) {
			return false // a round cut short is not comparable: leave it out
		}
		for i := range r.Requests {
			metrics.FillRequest(&r.Requests[i])
		}
		opts := metrics.ScaleOptions{Backend: s.Label, Scale: scale, Round: round, MaxSendLagP99Ms: o.Load.SendLagThresholdMs}
		sum := metrics.SummarizeScale(r.Requests, opts)
		fmt.Fprintln(log, online.ScaleLine(s.Label, scale, round, len(order)/2, sum))
		rounds[which] = append(rounds[which], r.Requests)
		s.rec.Runs = append(s.rec.Runs, results.Run{Scale: scale, Round: round, Summary: sum, RequestMetrics: r.Requests})
		updateSummary(out, metrics.SummarizeRounds(rounds[which], opts))
		s.rec.Timing.ScaleWallS[formatScale(scale)] = time.Since(scaleStart).Seconds()
		if err := write(); err != nil {
			fmt.Fprintf(log, "[%s] writing results: %v\n", s.Label, err)
		}
		if died, why := s.srv.Died(); died && ctx.Err() == nil {
			msg := fmt.Sprintf("%s: %s (scale %s, round %d)", s.Label, why, formatScale(scale), round)
			s.rec.Error = msg
			rep.Failures = append(rep.Failures, msg)
			return false
		}
	}
	return true
}

// updateSummary replaces (or adds) a side's pooled summary for its scale.
func updateSummary(out *results.Online, s results.Summary) {
	for i := range out.Summaries {
		if out.Summaries[i].Backend == s.Backend && out.Summaries[i].Scale == s.Scale {
			out.Summaries[i] = s
			return
		}
	}
	out.Summaries = append(out.Summaries, s)
}

// meta is online_results.json's meta: bench online's keys where they
// apply, and MetaKey describing the sides and the order.
func meta(o *Options, w *workload.Workload, sides [2]*side, order []int) map[string]any {
	model := o.Servers.Model
	if model == "" {
		model = "roseinfer built-in tiny (GPT-2 vocabulary, random weights)"
	}
	return map[string]any{
		results.MetaModel:       model,
		results.MetaDevice:      o.Servers.Device,
		results.MetaScales:      o.Load.Scales,
		results.MetaBackends:    []string{LabelA, LabelB},
		"seed":                  o.Workload.Seed,
		"temperature":           o.Workload.Temperature,
		"top_p":                 o.Workload.TopP,
		"top_k":                 o.Workload.TopK,
		"ignore_eos":            o.Workload.IgnoreEOS,
		"n":                     o.Workload.N,
		"max_output_len":        o.Workload.MaxOutputLen,
		"start_offset_s":        o.Load.StartOffsetS,
		"warmup_requests":       o.Workload.WarmupRequests,
		"trace_path":            w.Trace().Name,
		"trace_format":          string(w.Trace().Format),
		"num_trace_rows":        w.NumRows(),
		"prefix_mode":           o.Workload.PrefixMode,
		"repeat":                o.Load.Pairs,
		"send_lag_threshold_ms": o.Load.SendLagThresholdMs,
		"server_args":           o.Servers.ServerArgs,
		"server_cpus":           servers.CPUListMeta(o.Servers.ServerCPUs),
		"client_cpus":           servers.CPUListMeta(o.Servers.ClientCPUs),
		MetaKey:                 Meta{A: sides[0].Side, B: sides[1].Side, Order: OrderString(order), Pairs: o.Load.Pairs},
	}
}
