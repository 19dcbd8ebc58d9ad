package envs

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Status of one environment in `bench envs check`.
const (
	StatusOK           = "ok"
	StatusNotSetUp     = "not set up"    // no interpreter anywhere
	StatusBadPath      = "bad path"      // a named interpreter is not an executable
	StatusBroken       = "broken"        // the interpreter does not run the probe
	StatusNotInstalled = "not installed" // the package is missing from the env
	StatusImportFails  = "import fails"
	StatusNoGPU        = "no GPU" // imports, but torch sees no CUDA device
)

// CheckRow is one backend's line of `bench envs check`.
type CheckRow struct {
	Backend     Backend
	Interpreter Interpreter
	Probe       *Probe // nil when there was nothing to probe or it failed
	Status      string
	Problem     string // what is wrong, "" when ok
	Fix         string // what to run about it
}

// Ready reports whether real runs of this backend can start here.
func (r CheckRow) Ready() bool { return r.Status == StatusOK }

// CheckOptions configure Check.
type CheckOptions struct {
	Flags   map[string]string // backend name -> --<name>-python value
	Layout  Layout
	Getenv  func(string) string // default os.Getenv
	Timeout time.Duration       // per environment, import included; default 180 s
}

// Check resolves and probes every backend (import and CUDA included), in
// parallel; rows come back in the order given.
func Check(ctx context.Context, backends []Backend, o CheckOptions) []CheckRow {
	if o.Timeout <= 0 {
		o.Timeout = 180 * time.Second
	}
	rows := make([]CheckRow, len(backends))
	var wg sync.WaitGroup
	for i, b := range backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i] = checkOne(ctx, b, o)
		}()
	}
	wg.Wait()
	return rows
}

func checkOne(ctx context.Context, b Backend, o CheckOptions) CheckRow {
	in := Resolve(b, o.Flags[b.Name], o.Layout, o.Getenv)
	row := CheckRow{Backend: b, Interpreter: in}
	setup := SetupCommand(b)
	if !in.Found() {
		row.Problem = in.Problem
		if in.Path == "" {
			row.Status, row.Fix = StatusNotSetUp, setup
		} else {
			row.Status = StatusBadPath
			row.Fix = fmt.Sprintf("point %s at a Python interpreter, or unset it and run: %s", in.Source, setup)
		}
		return row
	}
	p, err := RunProbe(ctx, b, in.Path, ProbeOptions{Import: true, CUDA: true, Timeout: o.Timeout,
		Env: ProcessEnv(b, in.Path, os.Getenv("LD_LIBRARY_PATH"))})
	if err != nil {
		row.Status, row.Problem = StatusBroken, err.Error()
		row.Fix = fmt.Sprintf("recreate it: rm -rf %s && %s", VenvRoot(in.Path), setup)
		return row
	}
	row.Probe = p
	switch {
	case !p.Found:
		row.Status = StatusNotInstalled
		row.Problem = fmt.Sprintf("module %s is not installed in %s", b.Module, in.Path)
		row.Fix = setup
	case p.ImportOK != nil && !*p.ImportOK:
		row.Status, row.Problem = StatusImportFails, "import "+b.Module+": "+deref(p.ImportError)
		row.Fix = "reinstall the pins: " + setup
		if len(b.SystemPackages) > 0 {
			row.Fix += fmt.Sprintf(" (and the OS package(s) %s)", strings.Join(b.SystemPackages, ", "))
		}
	case p.CUDA == nil || !p.CUDA.Available:
		row.Status = StatusNoGPU
		row.Problem = "torch sees no CUDA device"
		if p.CUDA != nil && p.CUDA.Error != nil {
			row.Problem += ": " + *p.CUDA.Error
		}
		row.Fix = "real runs need a machine with an NVIDIA GPU and driver (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
	default:
		row.Status = StatusOK
	}
	return row
}

// WriteCheckTable prints the rows as an aligned table, then one problem and
// fix per backend that is not ready.
func WriteCheckTable(w io.Writer, rows []CheckRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tSTATUS\tPYTHON\tFROM\tIMPORT\tVERSION\tTORCH\tCUDA")
	for _, r := range rows {
		python, from, imp, version, torch, cuda := "-", "-", "-", "-", "-", "-"
		if r.Interpreter.Path != "" {
			python, from = r.Interpreter.Path, r.Interpreter.Source
		}
		if p := r.Probe; p != nil {
			python += " (" + p.PythonVersion + ")"
			imp = importCell(p)
			version, torch = derefOr(p.Version, "-"), derefOr(p.Torch, "-")
			cuda = cudaCell(p.CUDA)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Backend.Name, r.Status, python, from, imp, version, torch, cuda)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Ready() {
			continue
		}
		fmt.Fprintf(w, "\n%s: %s\n  fix: %s\n", r.Backend.Name, r.Problem, r.Fix)
		if p := r.Probe; p != nil && !strings.HasPrefix(p.PythonVersion, r.Backend.Python+".") {
			fmt.Fprintf(w, "  note: the pins were made for Python %s; this interpreter is %s\n", r.Backend.Python, p.PythonVersion)
		}
	}
}

func importCell(p *Probe) string {
	switch {
	case p.ImportOK == nil && p.Found:
		return "found"
	case p.ImportOK == nil:
		return "missing"
	case *p.ImportOK && p.ImportS != nil:
		return fmt.Sprintf("ok (%.1fs)", *p.ImportS)
	case *p.ImportOK:
		return "ok"
	}
	return "FAIL"
}

func cudaCell(c *CUDAProbe) string {
	switch {
	case c == nil:
		return "-"
	case !c.Available:
		return "none"
	case len(c.Devices) > 0:
		return fmt.Sprintf("%d x %s", c.DeviceCount, c.Devices[0])
	}
	return fmt.Sprintf("%d device(s)", c.DeviceCount)
}

func deref(s *string) string { return derefOr(s, "") }

func derefOr(s *string, def string) string {
	if s == nil || *s == "" {
		return def
	}
	return *s
}
