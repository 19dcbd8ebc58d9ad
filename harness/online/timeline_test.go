package online

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/harness/timeline"
	"github.com/roseinfer/roseinfer/results"
)

// TestTimelineAttributesPrefillOutliers is the acceptance test of bench
// online --timeline, against the real `roseinfer serve --device sim`: every
// step takes 2 ms, plus 60 µs per prompt token, so a step that prefills a
// 512-token prompt (one chunk) takes at least 32.7 ms, and every stream
// decoding in that step sees one ITL of that length. Requests arrive 0.4 s
// apart and decode 400 tokens each, so those long gaps are about 0.4% of
// the ITL samples and all lie above the p99.
//
// Which gaps the prefill caused is known without the timeline: by the
// server's own token timestamps (return_server_timing), the token came at
// least the prefill cost after the previous one. The test checks that the
// timeline flags every one of them as an outlier, attributes it to a mixed
// step with the 512-token chunk, that the token arrived after that step
// ended on the aligned clock, and that no other outlier is blamed on such
// a step.
func TestTimelineAttributesPrefillOutliers(t *testing.T) {
	const (
		promptTokens      = 512
		prefillUSPerToken = 60
		outputTokens      = 400
		numRequests       = 8
	)
	o := simOptions(t, 2000, "--sim-prefill-us-per-token", "60", "--prefill-chunk-size", "512", "--no-prefix-cache")
	o.Workload.TracePath = backendtest.EvenBurstTrace(t, numRequests, 2.5, promptTokens, outputTokens)
	o.Workload.N = numRequests
	o.Workload.MaxOutputLen = outputTokens
	o.Output.Timeline = true
	rep, err := Online(context.Background(), context.Background(), o)
	on := loadCleanRun(t, rep, err)
	if rep.TimelinePath != filepath.Join(rep.RunDir, timeline.File) {
		t.Fatalf("timeline path %q", rep.TimelinePath)
	}
	run := on.ByBackend["roseinfer"].Runs[0]
	s, rt := run.Summary, run.Timeline
	if s.NumSuccess != numRequests || s.ITLOutliers == nil || rt == nil {
		t.Fatalf("%d/%d ok, outliers %+v, timeline %+v", s.NumSuccess, numRequests, s.ITLOutliers, rt)
	}
	if rt.ServerNote != "" || rt.Clock != timeline.ClockSharedRealtime || rt.ClockErrorS == nil {
		t.Fatalf("server side of the timeline: %+v", rt)
	}

	// The outliers again, from the files the run left.
	tr, err := timeline.ReadServerTrace(filepath.Join(rep.RunDir, rt.ServerTrace))
	if err != nil {
		t.Fatal(err)
	}
	steps := timeline.OnClock(tr, timeline.Clock{OriginS: *rt.ServerOriginS, Method: rt.Clock, ErrorS: *rt.ClockErrorS})
	atts := timeline.Attribute(run.RequestMetrics, s.ITLMs, steps)
	if got := timeline.Count(atts, s.ITLMs.P99); got.N != s.ITLOutliers.N {
		t.Fatalf("the summary counts %d outliers, the files give %d", s.ITLOutliers.N, got.N)
	}
	byChunk := map[[2]int]timeline.Attribution{}
	for _, a := range atts {
		byChunk[[2]int{a.Request, a.Chunk}] = a
		if a.Step != nil && a.Step.PrefillTokens >= promptTokens && a.Cause != timeline.CausePrefillInStep &&
			a.Cause != timeline.CausePrefillStep {
			t.Errorf("outlier blamed on the prefill step %d as %s: %s", a.Step.Num, a.Cause, a.Why)
		}
	}

	// Ground truth: the tokens the server itself emitted at least the
	// prefill cost after the previous one.
	prefillCostS := float64(promptTokens*prefillUSPerToken) / 1e6
	caused := 0
	for i, r := range run.RequestMetrics {
		if r.ServerTiming == nil || len(r.ServerTiming.TokenS) != r.NumOutputTokens || r.NumOutputTokens != outputTokens {
			t.Fatalf("request %d: %d tokens, server timing %v", i, r.NumOutputTokens, r.ServerTiming != nil)
		}
		token := -1
		for j, k := range r.ChunkTokens {
			prev := token
			token += k
			if prev < 0 || r.ServerTiming.TokenS[token]-r.ServerTiming.TokenS[prev] < prefillCostS {
				continue
			}
			caused++
			a, ok := byChunk[[2]int{i, j}]
			switch {
			case !ok:
				t.Errorf("request %d chunk %d: %.2f ms after the previous token (server %.2f ms), p99 %.2f ms: not flagged",
					i, j, (r.ChunkS[j]-r.ChunkS[j-1])*1e3, (r.ServerTiming.TokenS[token]-r.ServerTiming.TokenS[prev])*1e3,
					*s.ITLMs.P99)
			case a.Cause != timeline.CausePrefillInStep || a.Step.PrefillTokens != promptTokens || a.Step.DecodeRows == 0:
				t.Errorf("request %d chunk %d: %s: %s", i, j, a.Cause, a.Why)
			case a.GapEndS < a.Step.EndS-*rt.ClockErrorS:
				t.Errorf("request %d chunk %d arrived at %.6f s, before its step %d ended at %.6f s: the clocks disagree",
					i, j, a.GapEndS, a.Step.Num, a.Step.EndS)
			case !strings.Contains(a.Why, "prefill chunk of 512 tokens in the same step"):
				t.Errorf("request %d chunk %d: why %q", i, j, a.Why)
			}
		}
	}
	// Each of the 7 later arrivals lands while one to three streams decode.
	if caused < numRequests-1 {
		t.Errorf("only %d tokens were delayed by a prefill: the workload did not do what the test needs", caused)
	}
	if got := s.ITLOutliers.ByCause[timeline.CausePrefillInStep]; got < caused {
		t.Errorf("summary: %d prefill_in_step outliers, want at least the %d the prefills caused", got, caused)
	}
	t.Logf("%d tokens delayed by a prefill; %d outliers above p99 %.3f ms: %s", caused, s.ITLOutliers.N,
		*s.ITLMs.P99, timeline.CauseList(s.ITLOutliers.ByCause))
	checkTimelineFile(t, rep, s.ITLOutliers)
}

// checkTimelineFile: timeline.json is one JSON Chrome trace holding a
// client and a server process, every outlier the summary counts, each
// attributed one joined to its step by a flow, and the summary names the
// causes.
func checkTimelineFile(t *testing.T, rep *Report, want *results.ITLOutliers) {
	t.Helper()
	data, err := os.ReadFile(rep.TimelinePath)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []struct {
			Name, Cat, Ph string
			Args          map[string]any
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("timeline.json: %v", err)
	}
	processes, outliers, flows, steps := 0, map[string]int{}, 0, 0
	for _, ev := range f.TraceEvents {
		switch {
		case ev.Ph == "M" && ev.Name == "process_name":
			processes++
		case ev.Ph == "X" && ev.Cat == "itl_outlier":
			outliers[ev.Args["cause"].(string)]++
		case ev.Ph == "s":
			flows++
		case ev.Ph == "X" && ev.Cat == "engine_step":
			steps++
		}
	}
	n := 0
	for cause, c := range outliers {
		n += c
		if want.ByCause[cause] != c {
			t.Errorf("timeline.json: %d %s outliers, the summary %d", c, cause, want.ByCause[cause])
		}
	}
	if processes != 2 || n != want.N || steps == 0 || flows < want.ByCause[timeline.CausePrefillInStep] {
		t.Errorf("timeline.json: %d processes, %d outliers (summary %d), %d steps, %d flows", processes, n, want.N, steps, flows)
	}
	md, err := os.ReadFile(rep.SummaryPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "ITL outliers") || !strings.Contains(string(md), timeline.CausePrefillInStep) {
		t.Errorf("online_summary.md does not show the attribution:\n%s", md)
	}
}

// TestTimelineBaseURL: a roseinfer that bench did not launch (--base-url)
// is asked for its steps too. Its clock is not assumed to be ours: the
// trace is placed by the start_profile round trip's midpoint, and the
// trace stays in the server's own profile directory, read from there.
func TestTimelineBaseURL(t *testing.T) {
	profileDir := t.TempDir()
	spec := backend.Roseinfer(backend.RoseinferOptions{Binary: roseinferBinary(t), Device: "sim",
		Flags: []string{"--sim-step-us", "2000", "--profile-dir", profileDir}})
	srv, err := backend.Launch(context.Background(), spec, backend.LaunchOptions{PortBase: backendtest.PortBase(t),
		RunDir: t.TempDir(), ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	o := simOptions(t, 2000)
	o.Servers.BaseURL = srv.BaseURL
	o.Workload.TracePath = backendtest.EvenBurstTrace(t, 6, 20, 16, 20)
	o.Workload.N = 6
	o.Output.Timeline = true
	rep, err := Online(context.Background(), context.Background(), o)
	on := loadCleanRun(t, rep, err)
	var run results.Run
	for _, b := range on.ByBackend {
		run = b.Runs[0]
	}
	rt := run.Timeline
	if rt == nil || rt.ServerNote != "" || rt.Clock != timeline.ClockRoundTripMidpoint || rt.ClockErrorS == nil ||
		!strings.HasPrefix(rt.ServerTrace, profileDir) {
		t.Fatalf("timeline record %+v", rt)
	}
	tr, err := timeline.ReadServerTrace(rt.ServerTrace)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Steps) == 0 || run.Summary.ITLOutliers == nil {
		t.Fatalf("%d steps, outliers %+v", len(tr.Steps), run.Summary.ITLOutliers)
	}
	// The midpoint is within the error bound of the true origin, which on
	// this one host is the shared wall clock's reading.
	shared := float64(tr.Origin.UnixNano()-rt.StartUnixNs) / 1e9
	if d := shared - *rt.ServerOriginS; d > *rt.ClockErrorS || -d > *rt.ClockErrorS {
		t.Errorf("origin placed at %.6f s ± %.6f, the shared clock says %.6f s", *rt.ServerOriginS, *rt.ClockErrorS, shared)
	}
}
