package report

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/roseinfer/roseinfer/results"
)

// testProfile builds a CPU-like profile by hand. Stacks are leaf first:
//
//	main.a <- main.main              10 ms
//	main.b <- main.a <- main.main     30 ms
//	main.b (with main.c inlined into it) <- main.main  20 ms (leaf: main.c)
//
// so flat: c 20, b 30, a 10; cum: main 60, b 50, a 40, c 20.
func testProfile() *profile.Profile {
	fns := map[string]*profile.Function{}
	var fnList []*profile.Function
	fn := func(name string) *profile.Function {
		if f, ok := fns[name]; ok {
			return f
		}
		f := &profile.Function{ID: uint64(len(fns) + 1), Name: name}
		fns[name] = f
		fnList = append(fnList, f)
		return f
	}
	var locs []*profile.Location
	loc := func(names ...string) *profile.Location {
		l := &profile.Location{ID: uint64(len(locs) + 1)}
		for _, n := range names {
			l.Line = append(l.Line, profile.Line{Function: fn(n), Line: 1})
		}
		locs = append(locs, l)
		return l
	}
	lMain, lA, lB, lCinB := loc("main.main"), loc("main.a"), loc("main.b"), loc("main.c", "main.b")
	ms := int64(1e6)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10 * ms,
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lA, lMain}, Value: []int64{1, 10 * ms}},
			{Location: []*profile.Location{lB, lA, lMain}, Value: []int64{3, 30 * ms}},
			{Location: []*profile.Location{lCinB, lMain}, Value: []int64{2, 20 * ms}},
		},
		Location:      locs,
		Function:      fnList,
		DurationNanos: 2e9,
	}
	return p
}

func TestSummarizePprof(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := testProfile().Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s := SummarizePprof("pprof_cpu", path, 3)
	if s.Error != "" {
		t.Fatal(s.Error)
	}
	ms := int64(1e6)
	want := []results.PprofFunc{
		{Function: "main.b", Flat: 30 * ms, FlatPct: 50, Cum: 50 * ms, CumPct: 100 * 50.0 / 60},
		{Function: "main.c", Flat: 20 * ms, FlatPct: 100 * 20.0 / 60, Cum: 20 * ms, CumPct: 100 * 20.0 / 60},
		{Function: "main.a", Flat: 10 * ms, FlatPct: 100 * 10.0 / 60, Cum: 40 * ms, CumPct: 100 * 40.0 / 60},
	}
	if !reflect.DeepEqual(s.Top, want) {
		t.Errorf("top:\n got %+v\nwant %+v", s.Top, want)
	}
	if s.SampleType != "cpu" || s.Unit != "nanoseconds" || s.Total != 60*ms || s.NumSamples != 3 || s.DurationS != 2 {
		t.Errorf("summary %+v", s)
	}
	if got := formatPprofValue(&s, s.Total); got != "60.00ms" {
		t.Errorf("formatPprofValue = %q", got)
	}

	all := SummarizePprof("pprof_cpu", path, 0)
	if len(all.Top) != 4 || all.Top[3].Function != "main.main" || all.Top[3].Flat != 0 || all.Top[3].CumPct != 100 {
		t.Errorf("full top %+v", all.Top)
	}

	bad := filepath.Join(dir, "bad.pprof")
	os.WriteFile(bad, []byte("not a profile"), 0o644)
	for _, p := range []string{bad, filepath.Join(dir, "missing.pprof")} {
		if s := SummarizePprof("pprof_cpu", p, 3); s.Error == "" || len(s.Top) != 0 {
			t.Errorf("%s: summary %+v, want an error", p, s)
		}
	}
}

const traceObject = `{"traceEvents":[
{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"engine loop"}},
{"name":"thread_name","ph":"M","pid":1,"tid":3,"args":{"name":"device (GPU clock)"}},
{"name":"step","ph":"X","pid":1,"tid":1,"ts":0,"dur":1000},
{"name":"forward/decode","ph":"X","pid":1,"tid":1,"ts":100,"dur":800},
{"name":"step","ph":"X","pid":1,"tid":1,"ts":2000,"dur":3000},
{"name":"sample","ph":"X","pid":1,"tid":3,"ts":150,"dur":50.5},
{"name":"instant","ph":"i","pid":1,"tid":1,"ts":7}
],"displayTimeUnit":"ms","otherData":{"device":"sim"}}`

func TestSummarizeChromeTrace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, gz bool) string {
		p := filepath.Join(dir, name)
		var data []byte
		if gz {
			var buf bytes.Buffer
			w := gzip.NewWriter(&buf)
			w.Write([]byte(body))
			w.Close()
			data = buf.Bytes()
		} else {
			data = []byte(body)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := []results.TracePhase{
		{Track: "device (GPU clock)", Name: "sample", Count: 1, TotalMs: 0.0505, MeanMs: 0.0505, MaxMs: 0.0505},
		{Track: "engine loop", Name: "step", Count: 2, TotalMs: 4, MeanMs: 2, MaxMs: 3},
		{Track: "engine loop", Name: "forward/decode", Count: 1, TotalMs: 0.8, MeanMs: 0.8, MaxMs: 0.8},
	}
	for _, path := range []string{write("trace.json", traceObject, false), write("t.trace.json.gz", traceObject, true)} {
		s, err := SummarizeChromeTrace(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.Phases, want) || s.NumEvents != 4 || s.SpanS != 0.005 || s.OtherData["device"] != "sim" {
			t.Errorf("%s: %+v", path, s)
		}
	}
	arr := write("array.json", `[{"name":"x","ph":"X","pid":"p","tid":"t","ts":5,"dur":1}]`, false)
	if s, err := SummarizeChromeTrace(arr); err != nil || len(s.Phases) != 1 || s.Phases[0].Track != `"p"/"t"` {
		t.Errorf("array form: %+v, %v", s, err)
	}
	for _, body := range []string{`{"foo":1}`, `"text"`, `{"traceEvents":[{"name":"x","ph":"X","dur":-1}]}`, `{"traceEvents":[`} {
		if _, err := SummarizeChromeTrace(write("bad.json", body, false)); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
}

func TestWriteProfileSummary(t *testing.T) {
	errMsg := "nsys report not produced: o/vllm.nsys-rep\nmore"
	m := &results.ProfileManifest{
		Meta: map[string]any{"profile": "pprof", "tools": []string{"pprof"}},
		Runs: []results.ProfileRun{
			{Tool: "pprof", Backend: "roseinfer", WallS: 3.25, NumRequests: 8, NumSuccess: 8,
				Files: []results.ProfileFile{{Kind: "pprof_cpu", Path: "/run/profiles/pprof/roseinfer/cpu.pprof"}},
				Trace: &results.TraceSummary{Path: "/run/profiles/pprof/roseinfer/trace.json", NumEvents: 3, SpanS: 1,
					Phases: []results.TracePhase{{Track: "engine loop", Name: "step", Count: 3, TotalMs: 6, MeanMs: 2, MaxMs: 3}}},
				Pprof: []results.PprofSummary{{Kind: "pprof_cpu", Path: "/run/profiles/pprof/roseinfer/cpu.pprof", SampleType: "cpu",
					Unit: "nanoseconds", Total: 2e6, NumSamples: 2, Top: []results.PprofFunc{{Function: "a|b", Flat: 2e6, FlatPct: 100, Cum: 2e6, CumPct: 100}}}}},
			{Tool: "nsys", Backend: "vllm", ProfileError: &errMsg},
		},
	}
	var buf bytes.Buffer
	if err := WriteProfileSummary(&buf, m, "/run"); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	for _, want := range []string{
		"# Profile Summary", "- profile: `pprof`",
		"| pprof | roseinfer | ok ", "profiles/pprof/roseinfer/cpu.pprof",
		"| nsys  | vllm      | ERROR: nsys report not produced: o/vllm.nsys-rep |",
		"## pprof / roseinfer", "| engine loop | step  |     3 |       6.00 |",
		"Top functions of `profiles/pprof/roseinfer/cpu.pprof` (cpu, total 2.00ms, 2 samples)",
		"`a\\|b`",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
