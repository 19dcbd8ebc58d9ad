package report

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/google/pprof/profile"

	"github.com/roseinfer/roseinfer/results"
)

// DefaultPprofTop is how many functions a summary keeps.
const DefaultPprofTop = 15

// SummarizePprof reads a pprof file (gzipped or not) with the pprof
// profile package and returns its top n functions by flat value. A file
// that cannot be read gives a summary whose Error says why.
func SummarizePprof(kind, path string, n int) results.PprofSummary {
	s := results.PprofSummary{Kind: kind, Path: path, Top: []results.PprofFunc{}}
	f, err := os.Open(path)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err == nil {
		err = p.CheckValid()
	}
	if err != nil {
		s.Error = fmt.Sprintf("parse %s: %v", path, err)
		return s
	}
	summarizeProfile(&s, p, n)
	return s
}

func summarizeProfile(s *results.PprofSummary, p *profile.Profile, n int) {
	if len(p.SampleType) == 0 {
		return
	}
	idx := defaultSampleIndex(p)
	s.SampleType, s.Unit = p.SampleType[idx].Type, p.SampleType[idx].Unit
	s.NumSamples = len(p.Sample)
	s.DurationS = time.Duration(p.DurationNanos).Seconds()
	flat := map[string]int64{}
	cum := map[string]int64{}
	seen := map[string]bool{}
	for _, smp := range p.Sample {
		v := smp.Value[idx]
		s.Total += v
		clear(seen)
		for i, loc := range smp.Location {
			// Line[0] is the innermost of the functions inlined at this
			// location; the leaf of the sample is the first location's.
			for j, line := range loc.Line {
				name := functionName(line)
				if i == 0 && j == 0 {
					flat[name] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
			if len(loc.Line) == 0 {
				name := fmt.Sprintf("0x%x", loc.Address)
				if i == 0 {
					flat[name] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	names := make([]string, 0, len(cum))
	for name := range cum {
		names = append(names, name)
	}
	sort.Slice(names, func(a, b int) bool {
		na, nb := names[a], names[b]
		if flat[na] != flat[nb] {
			return flat[na] > flat[nb]
		}
		if cum[na] != cum[nb] {
			return cum[na] > cum[nb]
		}
		return na < nb
	})
	if n <= 0 {
		n = DefaultPprofTop
	}
	for _, name := range names[:min(n, len(names))] {
		s.Top = append(s.Top, results.PprofFunc{Function: name, Flat: flat[name], FlatPct: pct(flat[name], s.Total),
			Cum: cum[name], CumPct: pct(cum[name], s.Total)})
	}
}

// defaultSampleIndex is the sample type pprof shows by default: the one
// named by DefaultSampleType, else the last (cpu time, not sample count).
func defaultSampleIndex(p *profile.Profile) int {
	for i, st := range p.SampleType {
		if p.DefaultSampleType != "" && st.Type == p.DefaultSampleType {
			return i
		}
	}
	return len(p.SampleType) - 1
}

func functionName(l profile.Line) string {
	if l.Function == nil || l.Function.Name == "" {
		return "?"
	}
	return l.Function.Name
}

func pct(v, total int64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(v) / float64(total)
}

// formatPprofValue renders v in the summary's unit for tables: durations as ms
// or s, counts as integers.
func formatPprofValue(s *results.PprofSummary, v int64) string {
	switch s.Unit {
	case "nanoseconds":
		d := time.Duration(v)
		if d >= 10*time.Second {
			return fmt.Sprintf("%.1fs", d.Seconds())
		}
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case "bytes":
		return fmt.Sprintf("%.1fKiB", float64(v)/1024)
	}
	return fmt.Sprint(v)
}
