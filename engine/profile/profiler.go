// Package profile is roseinfer's own profiler, driven over HTTP by the
// harness's profile stage: POST /start_profile begins a capture, POST
// /stop_profile ends it and writes the files into the requested directory,
// which must lie inside the profile directory fixed at start (Options.Dir,
// roseinfer serve --profile-dir).
//
// Two tools:
//   - "torch" (the original's name, kept so its harness works unchanged):
//     trace.json, a Chrome trace of the engine's phases (schedule, forward
//     split into prefill/decode/mixed, emit) with wall times, plus the GPU
//     times a device reports through phase.SpanReporter. It opens in
//     Perfetto.
//   - "pprof": Go CPU, goroutine, block and mutex profiles of the whole
//     server (cpu.pprof, goroutine.pprof, block.pprof, mutex.pprof) and the
//     same trace.json. Read them with `go tool pprof`.
//
// The engine reports phases through a Recorder, which is a phase.Observer.
// The package must not import the engine or the server.
package profile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	gprofile "github.com/google/pprof/profile"
)

// Tools.
const (
	ToolTorch = "torch" // phase trace only
	ToolPprof = "pprof" // Go profiles + phase trace
)

// File kinds, as the harness's manifest records them.
const (
	KindChromeTrace    = "chrome_trace"
	KindPprofCPU       = "pprof_cpu"
	KindPprofGoroutine = "pprof_goroutine"
	KindPprofBlock     = "pprof_block"
	KindPprofMutex     = "pprof_mutex"
)

// File names inside the output directory.
const (
	TraceFile     = "trace.json"
	CPUFile       = "cpu.pprof"
	GoroutineFile = "goroutine.pprof"
	BlockFile     = "block.pprof"
	MutexFile     = "mutex.pprof"
)

// Sampling settings of the pprof tool. The block rate samples about one
// blocking event per 10 µs spent blocked, cheap enough for a serving run;
// the mutex fraction reports one contention event in 5.
const (
	DefaultBlockProfileRateNs   = 10_000
	DefaultMutexProfileFraction = 5
	DefaultGoroutineInterval    = 500 * time.Millisecond
)

// Environment variables the original harness sets for a torch capture; they
// give the step window when the request does not.
const (
	EnvDelaySteps = "ROSEINFER_TORCH_PROFILE_DELAY_STEPS"
	EnvNumSteps   = "ROSEINFER_TORCH_PROFILE_NUM_STEPS"
)

// StartRequest is the body of POST /start_profile. Tool defaults to torch.
// DelaySteps/NumSteps, when nil, come from the environment variables above
// (unset: record every step).
type StartRequest struct {
	Tool       string `json:"tool"`
	OutputDir  string `json:"output_dir"`
	DelaySteps *int   `json:"delay_steps,omitempty"`
	NumSteps   *int   `json:"num_steps,omitempty"`
}

// OutputFile is one file a capture wrote.
type OutputFile struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
}

// Result is what Stop reports.
type Result struct {
	Tool      string       `json:"tool"`
	OutputDir string       `json:"output_dir"`
	Files     []OutputFile `json:"files"`
	NumSteps  int64        `json:"num_steps"`
	NumSpans  int          `json:"num_spans"`
	Truncated bool         `json:"truncated"`
	DurationS float64      `json:"duration_s"`
}

// Options configure a Profiler; zero values get the defaults above.
type Options struct {
	BlockProfileRateNs   int
	MutexProfileFraction int
	GoroutineInterval    time.Duration
	Getenv               func(string) string // default os.Getenv
	Info                 map[string]string   // written into trace.json's otherData (device, model)
	// Dir, when set, is the only directory captures write under: a start
	// request's output_dir must resolve inside it (a relative one is taken
	// relative to it, an empty one is Dir itself), or Start fails naming
	// Dir (dir.go). Empty: output_dir is required and used as given, which
	// only tests and library callers should rely on; roseinfer serve
	// always sets it (--profile-dir).
	Dir string
}

// Profiler runs one capture at a time. Safe for concurrent use.
type Profiler struct {
	rec  *Recorder
	opts Options

	mu  sync.Mutex
	cur *session
}

// session is one capture in progress.
type session struct {
	tool, dir  string
	cpuFile    *os.File
	blockBase  *gprofile.Profile // block/mutex counts at start, subtracted at stop
	mutexBase  *gprofile.Profile
	prevMutex  int
	goroutines *goroutineSampler
	isPprof    bool
}

// New returns a Profiler recording engine phases through rec.
func New(rec *Recorder, opts Options) *Profiler {
	if opts.BlockProfileRateNs <= 0 {
		opts.BlockProfileRateNs = DefaultBlockProfileRateNs
	}
	if opts.MutexProfileFraction <= 0 {
		opts.MutexProfileFraction = DefaultMutexProfileFraction
	}
	if opts.GoroutineInterval <= 0 {
		opts.GoroutineInterval = DefaultGoroutineInterval
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Dir != "" {
		if abs, err := filepath.Abs(opts.Dir); err == nil {
			opts.Dir = abs // relative output_dirs join it; answers name it
		}
	}
	return &Profiler{rec: rec, opts: opts}
}

// Recorder is the phase observer to give the engine.
func (p *Profiler) Recorder() *Recorder { return p.rec }

// Start begins a capture. It fails if one is running, the tool is unknown,
// output_dir is outside Options.Dir or cannot be made, or the Go CPU
// profiler is busy (for example with /debug/pprof/profile).
func (p *Profiler) Start(req StartRequest) error {
	if req.Tool == "" {
		req.Tool = ToolTorch
	}
	switch req.Tool {
	case ToolTorch, ToolPprof:
	case "cuda", "nsys":
		return fmt.Errorf("tool %q: run the server under nsys instead (it captures the whole process)", req.Tool)
	default:
		return fmt.Errorf("unknown tool %q (want %s or %s)", req.Tool, ToolTorch, ToolPprof)
	}
	dir, err := p.outputDir(req.OutputDir)
	if err != nil {
		return err
	}
	win, err := p.window(req)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		return fmt.Errorf("a %s capture is already running (stop it first)", p.cur.tool)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output_dir: %w", err)
	}
	s := &session{tool: req.Tool, dir: dir, isPprof: req.Tool == ToolPprof}
	if s.isPprof {
		if err := p.startPprof(s); err != nil {
			return err
		}
	}
	p.rec.Start(win)
	p.cur = s
	return nil
}

// window reads the step window from the request or the environment.
func (p *Profiler) window(req StartRequest) (Window, error) {
	var w Window
	var err error
	if w.DelaySteps, err = p.intSetting(req.DelaySteps, EnvDelaySteps); err != nil {
		return w, err
	}
	if w.NumSteps, err = p.intSetting(req.NumSteps, EnvNumSteps); err != nil {
		return w, err
	}
	if w.DelaySteps < 0 || w.NumSteps < 0 {
		return w, errors.New("delay_steps and num_steps must not be negative")
	}
	return w, nil
}

func (p *Profiler) intSetting(v *int, env string) (int, error) {
	if v != nil {
		return *v, nil
	}
	s := p.opts.Getenv(env)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not an integer", env, s)
	}
	return n, nil
}

// startPprof turns on the CPU profiler, block and mutex sampling, and the
// goroutine sampler.
func (p *Profiler) startPprof(s *session) error {
	f, err := os.Create(filepath.Join(s.dir, CPUFile))
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("cpu profile: %w", err)
	}
	s.cpuFile = f
	// Block and mutex profiles count from program start; the counts at
	// start are subtracted at stop so that only the capture remains.
	runtime.SetBlockProfileRate(p.opts.BlockProfileRateNs)
	s.prevMutex = runtime.SetMutexProfileFraction(p.opts.MutexProfileFraction)
	s.blockBase, _ = snapshot("block")
	s.mutexBase, _ = snapshot("mutex")
	s.goroutines = startGoroutineSampler(p.opts.GoroutineInterval)
	return nil
}

// Stop ends the capture and writes its files.
func (p *Profiler) Stop() (*Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.cur
	if s == nil {
		return nil, errors.New("no capture is running")
	}
	p.cur = nil
	c := p.rec.Stop()
	res := &Result{Tool: s.tool, OutputDir: s.dir, NumSteps: c.NumSteps, NumSpans: len(c.Spans),
		Truncated: c.Truncated, DurationS: c.Duration.Seconds()}
	var errs []error
	if s.isPprof {
		files, err := p.stopPprof(s)
		res.Files = append(res.Files, files...)
		errs = append(errs, err)
	}
	tracePath := filepath.Join(s.dir, TraceFile)
	info := map[string]string{"tool": s.tool}
	for k, v := range p.opts.Info {
		info[k] = v
	}
	if err := writeFile(tracePath, func(f *os.File) error { return WriteChromeTrace(f, c, info) }); err != nil {
		errs = append(errs, fmt.Errorf("trace: %w", err))
	} else {
		res.Files = append(res.Files, OutputFile{Kind: KindChromeTrace, Path: tracePath})
	}
	return res, errors.Join(errs...)
}

// Close stops a capture still running (the server is shutting down), so its
// files are written anyway.
func (p *Profiler) Close() error {
	p.mu.Lock()
	running := p.cur != nil
	p.mu.Unlock()
	if !running {
		return nil
	}
	_, err := p.Stop()
	return err
}

// stopPprof stops the samplers and writes the four profiles.
func (p *Profiler) stopPprof(s *session) ([]OutputFile, error) {
	var files []OutputFile
	var errs []error
	pprof.StopCPUProfile()
	if err := s.cpuFile.Close(); err != nil {
		errs = append(errs, fmt.Errorf("cpu profile: %w", err))
	} else {
		files = append(files, OutputFile{Kind: KindPprofCPU, Path: s.cpuFile.Name()})
	}
	gor, err := s.goroutines.stop()
	if err == nil {
		err = writeProfile(filepath.Join(s.dir, GoroutineFile), gor)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("goroutine profile: %w", err))
	} else {
		files = append(files, OutputFile{Kind: KindPprofGoroutine, Path: filepath.Join(s.dir, GoroutineFile)})
	}
	for _, d := range []struct {
		name, file, kind string
		base             *gprofile.Profile
	}{{"block", BlockFile, KindPprofBlock, s.blockBase}, {"mutex", MutexFile, KindPprofMutex, s.mutexBase}} {
		path := filepath.Join(s.dir, d.file)
		prof, err := snapshot(d.name)
		if err == nil {
			prof, err = subtract(prof, d.base)
		}
		if err == nil {
			// The goroutine sampler's own waits are the profiler's, not
			// the server's.
			prof.FilterSamplesByName(nil, samplerFrames, nil, nil)
		}
		if err == nil {
			err = writeProfile(path, prof)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s profile: %w", d.name, err))
			continue
		}
		files = append(files, OutputFile{Kind: d.kind, Path: path})
	}
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(s.prevMutex)
	return files, errors.Join(errs...)
}

// samplerFrames matches the goroutine sampler's stack frames.
var samplerFrames = regexp.MustCompile(`engine/profile\.\(\*goroutineSampler\)`)

// snapshot reads one of the runtime's named profiles.
func snapshot(name string) (*gprofile.Profile, error) {
	var buf bytes.Buffer
	if err := pprof.Lookup(name).WriteTo(&buf, 0); err != nil {
		return nil, err
	}
	return gprofile.Parse(&buf)
}

// subtract returns end minus base: the samples accumulated in between.
// Samples that cancel out are dropped.
func subtract(end, base *gprofile.Profile) (*gprofile.Profile, error) {
	if base == nil || len(base.Sample) == 0 {
		return end, nil
	}
	neg := base.Copy()
	neg.Scale(-1)
	diff, err := gprofile.Merge([]*gprofile.Profile{end, neg})
	if err != nil {
		return nil, err
	}
	kept := diff.Sample[:0]
	for _, s := range diff.Sample {
		for _, v := range s.Value {
			if v != 0 {
				kept = append(kept, s)
				break
			}
		}
	}
	diff.Sample = kept
	diff.TimeNanos, diff.DurationNanos = end.TimeNanos, end.TimeNanos-base.TimeNanos
	return diff.Compact(), nil
}

func writeProfile(path string, p *gprofile.Profile) error {
	return writeFile(path, func(f *os.File) error { return p.Write(f) })
}

func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
