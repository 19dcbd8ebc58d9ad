package profile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/rundir"
	"github.com/roseinfer/roseinfer/results"
)

// Report is what the stage leaves for the command.
type Report struct {
	RunDir       string
	ManifestPath string
	SummaryPath  string
	// Failures name each (tool, backend) whose capture failed, with its
	// profile_error. The stage went on after each.
	Failures    []string
	Interrupted bool
}

// stage runs the captures of one command, one fresh server each.
type stage struct {
	opts           *Options
	runDir         string
	launch         backend.LaunchOptions // RunDir is runDir
	work           work
	model          string // --model, the id sent unless the server names its own
	requestTimeout time.Duration
	log            io.Writer
	// nsysWrap builds the nsys argv; tasksetOutside puts the CPU pinning
	// prefix before nsys (offline) instead of after it (online).
	nsysWrap       func(o *Options, prefix string) []string
	tasksetOutside bool

	manifest *results.ProfileManifest
	rep      *Report
	start    time.Time
}

func newStage(o *Options, runDir string, log io.Writer, meta map[string]any) *stage {
	if log == nil {
		log = io.Discard
	}
	st := &stage{opts: o, runDir: runDir, log: log, nsysWrap: nsysArgv, start: time.Now(),
		manifest: &results.ProfileManifest{Meta: meta, Runs: []results.ProfileRun{}},
		rep: &Report{RunDir: runDir, ManifestPath: filepath.Join(runDir, results.ProfileManifestFile),
			SummaryPath: filepath.Join(runDir, report.ProfileSummaryFile)}}
	meta["profile_start_time"] = st.start.Format(rundir.TimeFormat)
	return st
}

// labelsOf lists the specs' labels, in run order.
func labelsOf(specs []backend.Spec) []string {
	labels := make([]string, len(specs))
	for i, s := range specs {
		labels[i] = s.Label
	}
	return labels
}

// BaseBackend is the backend a run label belongs to: "roseinfer+nocache"
// is roseinfer.
func BaseBackend(label string) string {
	base, _, _ := strings.Cut(label, "+")
	return base
}

// run profiles every spec with every tool, tool by tool (the original's
// order: all backends with torch, then all with nsys). Pairs a backend does
// not support are skipped with a note in meta.skipped.
func (st *stage) run(ctx context.Context, tools []string, specs []backend.Spec) error {
	var skipped []string
	if prev, ok := st.manifest.Meta["skipped"].([]string); ok {
		skipped = prev
	}
	if err := st.write(); err != nil {
		return err
	}
	for _, tool := range tools {
		for _, spec := range specs {
			if ctx.Err() != nil {
				st.rep.Interrupted = true
				return st.write()
			}
			base := BaseBackend(spec.Label)
			h := hookFor(base)
			why := ""
			switch {
			case !spec.Launched():
				why = "not launched by the harness (a server given by URL cannot be restarted fresh)"
			case !h.supports(tool):
				why = fmt.Sprintf("%s supports %s only", base, strings.Join(h.tools, ", "))
			}
			if why != "" {
				skipped = append(skipped, tool+"/"+spec.Label+": "+why)
				st.manifest.Meta["skipped"] = skipped
				fmt.Fprintf(st.log, "[%s profile %s] skipped: %s\n", spec.Label, tool, why)
				continue
			}
			fmt.Fprintf(st.log, "[%s profile %s] starting\n", spec.Label, tool)
			r := st.capture(ctx, tool, spec, base, h)
			st.manifest.Runs = append(st.manifest.Runs, r)
			if r.ProfileError != nil {
				st.rep.Failures = append(st.rep.Failures, tool+"/"+spec.Label+": "+*r.ProfileError)
				fmt.Fprintf(st.log, "[%s profile %s] FAILED after %.1f s: %s\n", spec.Label, tool, r.WallS, *r.ProfileError)
			} else {
				fmt.Fprintf(st.log, "[%s profile %s] done in %.1f s: %d files in %s\n", spec.Label, tool, r.WallS,
					len(r.Files), r.OutputDir)
			}
			if err := st.write(); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		st.rep.Interrupted = true
	}
	return st.write()
}

// write rewrites the manifest and its Markdown summary (atomically), so an
// interrupted stage leaves a valid record of the captures that finished.
func (st *stage) write() error {
	st.manifest.Meta["profile_end_time"] = time.Now().Format(rundir.TimeFormat)
	st.manifest.Meta["profile_wall_s"] = time.Since(st.start).Seconds()
	st.manifest.Meta["interrupted"] = st.rep.Interrupted
	if err := results.WriteJSON(st.rep.ManifestPath, st.manifest); err != nil {
		return err
	}
	return results.WriteAtomic(st.rep.SummaryPath, func(w io.Writer) error {
		return report.WriteProfileSummary(w, st.manifest, st.runDir)
	})
}

// fileName makes a label safe as a path element.
func fileName(label string) string {
	return strings.NewReplacer("/", "_", string(os.PathSeparator), "_").Replace(label)
}

// capture is one (tool, backend) run: launch, warm up, profile the replay,
// stop, collect. Every failure lands in profile_error; later steps that
// still make sense (stopping the server, listing files) run anyway.
func (st *stage) capture(ctx context.Context, tool string, spec backend.Spec, base string, h *hook) (run results.ProfileRun) {
	label := spec.Label
	outDir := filepath.Join(st.runDir, "profiles", tool, fileName(label))
	run = results.ProfileRun{Tool: tool, Backend: label, BaseBackend: base, OutputDir: outDir, Cmd: []string{},
		Files: []results.ProfileFile{}}
	start := time.Now()
	defer func() { run.WallS = time.Since(start).Seconds() }()
	fail := func(msg string) {
		if run.ProfileError == nil {
			run.Error(msg)
		} else {
			*run.ProfileError += "; " + msg
		}
	}
	absDir, err := filepath.Abs(outDir)
	if err == nil {
		err = os.MkdirAll(outDir, 0o755)
	}
	if err != nil {
		fail("output dir: " + err.Error())
		return run
	}
	c := &capture{tool: tool, label: label, base: base, outDir: absDir, opts: st.opts}
	ps, launch, err := st.profiledSpec(spec, c, h, &run)
	if err != nil {
		fail(err.Error())
		return run
	}
	srv, err := backend.Launch(ctx, ps, launch)
	if err != nil {
		fail("server not ready: " + err.Error())
		return run
	}
	run.Cmd, run.LogPath, run.Port = srv.Argv, srv.LogPath, portOf(srv.BaseURL)
	w := st.opts.waits
	isStopped := false
	stop := func() {
		if isStopped {
			return
		}
		isStopped = true
		if tool != ToolNsys {
			srv.Stop()
			return
		}
		exit := w.NsysExit
		if h.nsysExit != nil {
			exit = h.nsysExit(w)
		}
		stopUnderNsys(srv, h.stopMarker, w, exit)
	}
	defer stop()

	st.drive(ctx, c, h, srv, spec, &run, fail)
	stop()
	if tool == ToolNsys && run.NsysOutputPrefix != nil {
		if path, ok := waitForReport(ctx, *run.NsysOutputPrefix, w.ReportWait); !ok {
			fail("nsys report not produced: " + path)
		}
	}
	st.collect(c, &run, fail)
	return run
}

// profiledSpec is spec changed for one capture: the log name
// <label>.profile_<tool>.server.log, the stage's environment and server
// flags, and for nsys the wrapper command.
func (st *stage) profiledSpec(spec backend.Spec, c *capture, h *hook, run *results.ProfileRun) (backend.Spec, backend.LaunchOptions, error) {
	ps, launch := spec, st.launch
	ps.Label = spec.Label + ".profile_" + c.tool
	added := commonEnv()
	if h.env != nil {
		maps.Copy(added, h.env(c))
	}
	run.Env = added
	ps.Env = maps.Clone(spec.Env)
	if ps.Env == nil {
		ps.Env = map[string]string{}
	}
	maps.Copy(ps.Env, added)
	var extra []string
	if h.serverArgs != nil {
		extra = h.serverArgs(c)
	}
	command := spec.Command
	ps.Command = func(host string, port int) []string {
		return append(command(host, port), extra...)
	}
	if c.tool != ToolNsys {
		return ps, launch, nil
	}
	if err := checkNsys(st.opts.NsysBin); err != nil {
		return ps, launch, err
	}
	prefix := filepath.Join(run.OutputDir, fileName(c.label))
	run.NsysOutputPrefix = &prefix
	wrap := st.nsysWrap(st.opts, prefix)
	inner := ps.Command
	if st.tasksetOutside {
		ps.Command = func(host string, port int) []string { return append(append([]string{}, wrap...), inner(host, port)...) }
		return ps, launch, nil
	}
	pin := launch.Prefix
	launch.Prefix = nil
	ps.Command = func(host string, port int) []string {
		return append(append(append([]string{}, wrap...), pin...), inner(host, port)...)
	}
	return ps, launch, nil
}

func portOf(baseURL string) int {
	u, err := url.Parse(baseURL)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

// drive warms the server up, then brackets the replay with the backend's
// profiler calls.
func (st *stage) drive(ctx context.Context, c *capture, h *hook, srv *backend.Server, spec backend.Spec,
	run *results.ProfileRun, fail func(string)) {
	model := srv.RequestModel(st.model)
	q := st.work.quirks(spec.Quirks)
	warm, err := st.work.warmupBodies(model, q)
	if err != nil {
		fail(err.Error())
		return
	}
	items, err := st.work.items(model, q)
	if err != nil {
		fail(err.Error())
		return
	}
	cl := client.New(client.Options{BaseURL: srv.BaseURL, MaxConcurrency: max(1, len(items)), Timeout: st.requestTimeout,
		APIKey: srv.Spec.APIKey})
	defer cl.Close()
	if _, err := replay.Warmup(ctx, cl, q.Endpoint, warm); err != nil {
		fail("warmup failed: " + err.Error())
		return
	}
	ctl := newController(srv.BaseURL, srv.Spec.APIKey, st.opts.waits.HTTPTimeout)
	defer ctl.close()
	if h.begin != nil {
		if err := h.begin(ctx, c, ctl); err != nil {
			fail(err.Error())
			return
		}
	}
	round := replay.Run(ctx, items, replay.Options{Client: cl, Endpoint: q.Endpoint})
	run.NumRequests = len(round.Requests)
	var firstErr string
	for _, r := range round.Requests {
		if r.Error == nil {
			run.NumSuccess++
		} else if firstErr == "" {
			firstErr = *r.Error
		}
	}
	if h.end != nil {
		ans, err := h.end(ctx, c, ctl)
		if len(ans) > 0 && json.Valid(ans) {
			run.StopProfile = ans
		}
		if err != nil {
			fail(err.Error())
		}
	}
	if died, why := srv.Died(); died {
		fail(why)
	}
	switch {
	case run.NumRequests > 0 && run.NumSuccess == 0:
		fail(fmt.Sprintf("no request succeeded while profiling (%d failed; first: %s)", run.NumRequests, firstErr))
	case run.NumSuccess < run.NumRequests:
		run.Notes = append(run.Notes, fmt.Sprintf("%d of %d requests failed while profiling; first: %s",
			run.NumRequests-run.NumSuccess, run.NumRequests, firstErr))
	}
	if round.Interrupted {
		run.Notes = append(run.Notes, fmt.Sprintf("interrupted: %d requests not sent", round.NotSent))
	}
}
