package online

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/rundir"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/harness/timeline"
	"github.com/roseinfer/roseinfer/harness/workload"
	"github.com/roseinfer/roseinfer/results"
)

// Runner is the online runner driven one replay at a time, for a caller
// that chooses each load from the outcome of the last (harness/capacity).
// Online is a Runner driven through the fixed list of --scales. Either way
// every replay lands in the same online_results.json and summary, written
// after each scale, and a Runner is used from one goroutine.
type Runner struct {
	o         OnlineOptions
	w         *workload.Workload
	slo       sloConfig
	specs     []backend.Spec
	prefix    []string // CPU pinning of launched servers
	runDir    string
	usedPorts map[int]bool
	versions  map[string]any
	out       *results.Online
	rep       *Report
	write     func() error
}

// Open prepares a run: it loads the workload, makes the run directory,
// resolves the backends (a skipped one is recorded at once) and writes the
// first results file. o.Load.Scales may be empty: the caller names each
// scale to Replay.
func Open(ctx context.Context, o OnlineOptions) (*Runner, error) {
	if err := o.validateRun(); err != nil {
		return nil, err
	}
	if o.Output.Log == nil {
		o.Output.Log = io.Discard
	}
	if o.Workload.ModelDir == "" && workload.IsModelDir(o.Servers.Model) {
		o.Workload.ModelDir = o.Servers.Model
	}
	w, err := workload.Load(&o.Workload)
	if err != nil {
		return nil, err
	}
	if n := w.NumDroppedTurns(); n > 0 {
		fmt.Fprintf(o.Output.Log, "sessions: %d later turns left out: their history outgrows the %d-token context\n",
			n, w.Context().Effective())
	}
	slo, err := parseSLO(o.Load.SLO)
	if err != nil {
		return nil, err
	}
	runDir, err := rundir.Make(o.Output.RunDir, o.Output.OutputDir, cmp.Or(o.Output.Kind, "online"))
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
		return nil, err
	}
	return &Runner{o: o, w: w, slo: slo, specs: specs, prefix: prefix, runDir: runDir, usedPorts: map[int]bool{},
		versions: versions, out: out, rep: rep, write: write}, nil
}

// Workload is the loaded trace, the same for every backend.
func (r *Runner) Workload() *workload.Workload { return r.w }

// RunDir is the run directory.
func (r *Runner) RunDir() string { return r.runDir }

// Labels are the backends Start can run, in order (not the skipped ones).
func (r *Runner) Labels() []string {
	labels := make([]string, len(r.specs))
	for i, s := range r.specs {
		labels[i] = s.Label
	}
	return labels
}

// Start launches backend i (of Labels) and warms it up. When that failed
// it returns the backend's error (also in the report and the results);
// when the run was interrupted, ctx's error.
func (r *Runner) Start(ctx context.Context, i int) (*Backend, error) {
	o := &r.o
	br := &backendRun{o: o, w: r.w, slo: r.slo, spec: r.specs[i], out: r.out, rep: r.rep, write: r.write,
		launch: backend.LaunchOptions{Host: o.Servers.Host, PortBase: o.Servers.PortBase, UsedPorts: r.usedPorts, RunDir: r.runDir,
			ReadyTimeout: o.Servers.TimeoutReady, Prefix: r.prefix}}
	if !br.start(ctx, r.versions) {
		br.stop()
		return nil, br.err(ctx)
	}
	return &Backend{br: br}, nil
}

// Failures are the failures recorded so far: after Open, the skipped
// backends.
func (r *Runner) Failures() []string { return append([]string(nil), r.rep.Failures...) }

// Close writes the final results and, with --timeline, timeline.json, and
// returns the report.
func (r *Runner) Close(ctx context.Context) (*Report, error) {
	if ctx.Err() != nil {
		r.rep.Interrupted = true
	}
	if err := r.write(); err != nil {
		return r.rep, err
	}
	if r.o.Output.Timeline {
		var err error
		if r.rep.TimelinePath, err = timeline.Write(r.runDir, r.out); err != nil {
			return r.rep, fmt.Errorf("timeline: %w", err)
		}
	}
	return r.rep, nil
}

// Backend is one launched, warmed-up backend of a Runner.
type Backend struct {
	br *backendRun
}

// Label is the backend's label in the results.
func (b *Backend) Label() string { return b.br.spec.Label }

// Replay runs every round (--repeat) of one scale, records them and writes
// the results, and returns the scale's summary over its rounds. The error
// is the backend's when it failed (its server died; also in the results)
// or ctx's when the run was interrupted; the summary is then whatever
// finished. A scale given twice adds rounds to the raw records, and its
// summary is that of the later replay.
func (b *Backend) Replay(ctx, abort context.Context, scale float64) (results.Summary, error) {
	br := b.br
	if !containsScale(br.out.Meta["scales"], scale) {
		br.out.Meta["scales"] = append(toScales(br.out.Meta["scales"]), scale)
	}
	ok := br.runScale(ctx, abort, scale)
	var err error
	if !ok || br.rec.Error != "" {
		err = br.err(ctx)
	}
	for _, s := range br.out.Summaries {
		if s.Backend == br.spec.Label && s.Scale == scale {
			return s, err
		}
	}
	return results.Summary{Backend: br.spec.Label, Scale: scale}, cmp.Or(err, errors.New("no request of the scale was sent"))
}

// Stop stops the backend's server and records its timing.
func (b *Backend) Stop() { b.br.stop() }

// err is why the backend stopped: its recorded error, else ctx's.
func (br *backendRun) err(ctx context.Context) error {
	if br.rec.Error != "" {
		return errors.New(br.rec.Error)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("stopped")
}

func toScales(v any) []float64 {
	s, _ := v.([]float64)
	return append([]float64(nil), s...)
}

func containsScale(v any, scale float64) bool {
	for _, s := range toScales(v) {
		if s == scale {
			return true
		}
	}
	return false
}
