package timeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	ID   int            `json:"id"`
	BP   string         `json:"bp"`
	Args map[string]any `json:"args"`
}

type chromeFile struct {
	TraceEvents []chromeEvent  `json:"traceEvents"`
	OtherData   map[string]any `json:"otherData"`
}

// TestWrite renders a run of two rounds: one with a server trace (its
// origin 1 ms before the round's start) and an outlier inside its mixed
// step, one (earlier) whose capture failed. A round without a timeline
// record is left out.
func TestWrite(t *testing.T) {
	runDir := t.TempDir()
	c := overlapCapture()
	tracePath := writeCapture(t, c)
	rel := filepath.Join(Dir, "roseinfer", "scale_1.0_round_1", "trace.json")
	if err := os.MkdirAll(filepath.Dir(filepath.Join(runDir, rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(tracePath)
	if err := os.WriteFile(filepath.Join(runDir, rel), data, 0o644); err != nil {
		t.Fatal(err)
	}
	start := c.Origin.UnixNano() + 1_000_000
	// On the round's clock the mixed step runs from 4 to 19 ms.
	reqs := []results.Request{req(0.0035, 0.0041, 0.0192), req(0.0010, 0.0030, 0.0050, 0.0070)}
	reqs[0].Index, reqs[0].InputLen, reqs[0].OutputLen = 7, 512, 3
	itl := results.Stats{P50: f64(2), P99: f64(10)}
	traced := results.Run{Scale: 1, Summary: results.Summary{ITLMs: itl}, RequestMetrics: reqs,
		Timeline: &results.RoundTimeline{StartUnixNs: start, ServerTrace: rel, ServerOriginS: f64(-0.001),
			Clock: ClockSharedRealtime, ClockErrorS: f64(1e-6)}}
	failed := results.Run{Scale: 2, Summary: results.Summary{ITLMs: itl}, RequestMetrics: reqs[:1],
		Timeline: &results.RoundTimeline{StartUnixNs: start - 5e9, ServerNote: "start_profile: HTTP 404"}}
	on := &results.Online{ByBackend: map[string]*results.Backend{
		"roseinfer": {Runs: []results.Run{traced, failed}},
		"vllm":      {Runs: []results.Run{{Scale: 1, RequestMetrics: reqs}}},
	}}
	path, err := Write(runDir, on)
	if err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f chromeFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("timeline.json is not JSON: %v", err)
	}
	rounds, _ := f.OtherData["rounds"].([]any)
	if len(rounds) != 2 {
		t.Fatalf("otherData.rounds %v, want the two rounds with a timeline", f.OtherData["rounds"])
	}
	first, second := rounds[0].(map[string]any), rounds[1].(map[string]any)
	if first["server_note"] != "start_profile: HTTP 404" || second["clock"] != ClockSharedRealtime ||
		second["num_itl_outliers"] != 1.0 {
		t.Errorf("rounds %v", rounds)
	}

	// The failed round came first (t = 0); the traced one 5 s later: pids 3 and 4.
	names := map[int]string{}
	var outlier, step2 *chromeEvent
	flows := map[string]chromeEvent{}
	for i := range f.TraceEvents {
		ev := &f.TraceEvents[i]
		switch {
		case ev.Ph == "M" && ev.Name == "process_name":
			names[ev.Pid] = ev.Args["name"].(string)
		case ev.Ph == "X" && ev.Cat == "itl_outlier" && ev.Pid == 3:
			outlier = ev
		case ev.Ph == "X" && ev.Cat == "engine_step" && ev.Args["step"] == 2.0:
			step2 = ev
		case ev.Ph == "s" || ev.Ph == "f":
			flows[ev.Ph] = *ev
		}
	}
	if names[1] != "roseinfer · scale 2 · round 1 · client" || names[3] != "roseinfer · scale 1 · round 1 · client" ||
		names[4] != "roseinfer · scale 1 · round 1 · server" || names[2] != "" {
		t.Errorf("process names %v", names)
	}
	if outlier == nil || step2 == nil {
		t.Fatalf("outlier %v, step 2 %v", outlier, step2)
	}
	// ts are µs from the first round's start: the traced round starts at 5 s.
	if !nearUs(step2.Ts, 5e6+4000) || !nearUs(step2.Dur, 15000) || step2.Name != "mixed" || step2.Args["exec"] != "eager" {
		t.Errorf("step 2 %+v", step2)
	}
	if !nearUs(outlier.Ts, 5e6+4100) || !nearUs(outlier.Dur, 15100) || outlier.Tid != 1 ||
		outlier.Args["cause"] != CausePrefillInStep || outlier.Args["step"] != 2.0 ||
		!strings.Contains(outlier.Args["why"].(string), "prefill chunk of 256 tokens in the same step") {
		t.Errorf("outlier %+v", outlier)
	}
	s, fl := flows["s"], flows["f"]
	if s.ID == 0 || s.ID != fl.ID || s.Pid != 4 || s.Tid != tidSteps || fl.Pid != 3 || fl.Tid != 1 || fl.BP != "e" {
		t.Errorf("flow %+v -> %+v", s, fl)
	}
}

func nearUs(a, b float64) bool { return a-b < 0.01 && b-a < 0.01 }
