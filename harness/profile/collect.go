package profile

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	engineprofile "github.com/roseinfer/roseinfer/engine/profile"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/results"
)

// File kinds in the manifest besides roseinfer's own (engine/profile).
const (
	kindNsysReport = "nsys_rep"
	kindTorchTrace = "torch_trace"
	kindPprofOther = "pprof"
	kindOther      = "other"
)

// classify names what a file in a capture's directory is.
func classify(base, name string) string {
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, nsysReportSuffix):
		return kindNsysReport
	case base == baseRoseinfer && name == engineprofile.TraceFile:
		return engineprofile.KindChromeTrace
	case name == engineprofile.CPUFile:
		return engineprofile.KindPprofCPU
	case name == engineprofile.GoroutineFile:
		return engineprofile.KindPprofGoroutine
	case name == engineprofile.BlockFile:
		return engineprofile.KindPprofBlock
	case name == engineprofile.MutexFile:
		return engineprofile.KindPprofMutex
	case strings.HasSuffix(lower, ".pprof") || strings.HasSuffix(lower, ".pb.gz"):
		return kindPprofOther
	case strings.Contains(lower, "trace") && (strings.HasSuffix(lower, ".json") || strings.HasSuffix(lower, ".json.gz")):
		return kindTorchTrace
	}
	return kindOther
}

// expected are the files a roseinfer capture must leave.
var expected = map[string][]string{
	ToolTorch: {engineprofile.TraceFile},
	ToolPprof: {engineprofile.TraceFile, engineprofile.CPUFile, engineprofile.GoroutineFile, engineprofile.BlockFile,
		engineprofile.MutexFile},
}

// collect lists the capture's files, summarises roseinfer's trace and every
// pprof profile, and fails the run when roseinfer left out a file or wrote
// one that does not parse.
func (st *stage) collect(c *capture, run *results.ProfileRun, fail func(string)) {
	found := map[string]bool{}
	filepath.WalkDir(run.OutputDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(run.OutputDir, path)
		found[rel] = true
		run.Files = append(run.Files, results.ProfileFile{Kind: classify(c.base, d.Name()), Path: path, Bytes: info.Size()})
		return nil
	})
	sort.Slice(run.Files, func(a, b int) bool { return run.Files[a].Path < run.Files[b].Path })
	for _, f := range run.Files {
		switch f.Kind {
		case engineprofile.KindChromeTrace:
			s, err := report.SummarizeChromeTrace(f.Path)
			if err != nil {
				fail(err.Error())
				continue
			}
			run.Trace = s
		case engineprofile.KindPprofCPU, engineprofile.KindPprofGoroutine, engineprofile.KindPprofBlock,
			engineprofile.KindPprofMutex, kindPprofOther:
			s := report.SummarizePprof(f.Kind, f.Path, report.DefaultPprofTop)
			if s.Error != "" {
				fail(s.Error)
			}
			run.Pprof = append(run.Pprof, s)
		}
	}
	if c.base != baseRoseinfer {
		return
	}
	var missing []string
	for _, name := range expected[c.tool] {
		if !found[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		fail("roseinfer did not write " + strings.Join(missing, ", ") + " in " + run.OutputDir)
	}
}
