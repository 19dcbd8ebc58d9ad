package timeline

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"
)

// ServerTrace is roseinfer's phase trace of one capture (engine/profile's
// trace.json), read back: its origin on the server's wall clock, its spans,
// and the engine steps they describe. Times are seconds after the origin,
// measured on the server's monotonic clock.
type ServerTrace struct {
	Origin    time.Time // CLOCK_REALTIME when the capture started (otherData.origin)
	DurationS float64   // from the origin until the capture stopped (otherData.duration_s)
	Truncated bool      // the server dropped spans past its limit: steps after the last one are unknown
	Threads   map[int]string
	Spans     []Span
	Steps     []Step // in step order
}

// Span is one complete event of the trace, as written by engine/profile.
type Span struct {
	Name, Cat     string
	Tid           int
	StartS, DurS  float64
	Step          int64
	NumSeqs       int
	PrefillTokens int
	DecodeRows    int
	Exec          string // device spans: "graph" or "eager"
}

// Step is one engine step as the client's tokens saw it: from when the
// device could start it until its tokens were handed to the streams.
//
// EndS is the start of the step's emit phase (its results are in). StartS
// is the later of its forward phase's start (the batch was handed to the
// device) and the previous step's EndS: with overlap scheduling step N+1 is
// submitted while step N still runs, and the device starts it only when N
// is done. Consecutive busy steps therefore tile the time axis, and a
// decoding stream's inter-token gap is the length of the step that
// produced the token.
type Step struct {
	Num           int64
	StartS, EndS  float64
	NumSeqs       int    // sequences in the batch
	PrefillTokens int    // prompt (or recompute) tokens in it
	DecodeRows    int    // sequences fed one generated token
	Exec          string // "graph", "eager", or "" when the device does not say (cpu, sim)
}

// Kind is "prefill", "decode" or "mixed" (both in one step).
func (s *Step) Kind() string {
	switch {
	case s.PrefillTokens > 0 && s.DecodeRows > 0:
		return "mixed"
	case s.PrefillTokens > 0:
		return "prefill"
	}
	return "decode"
}

// rawTrace is the part of engine/profile's trace.json read here.
type rawTrace struct {
	TraceEvents []rawEvent `json:"traceEvents"`
	OtherData   struct {
		Origin    string   `json:"origin"`
		DurationS *float64 `json:"duration_s"`
		Truncated bool     `json:"truncated"`
	} `json:"otherData"`
}

type rawEvent struct {
	Name string   `json:"name"`
	Cat  string   `json:"cat"`
	Ph   string   `json:"ph"`
	Tid  int      `json:"tid"`
	Ts   *float64 `json:"ts"`  // µs after the origin
	Dur  *float64 `json:"dur"` // µs
	Args struct {
		Name          string `json:"name"` // metadata events
		Step          int64  `json:"step"`
		NumSeqs       int    `json:"num_seqs"`
		PrefillTokens int    `json:"prefill_tokens"`
		DecodeSeqs    int    `json:"decode_seqs"`
		Exec          string `json:"exec"`
	} `json:"args"`
}

// ReadServerTrace reads a trace.json that roseinfer's profiler wrote.
// Errors name the file and, for a bad event, its position in traceEvents.
func ReadServerTrace(path string) (*ServerTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var raw rawTrace
	if err := json.NewDecoder(bufio.NewReaderSize(f, 256<<10)).Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: not a Chrome trace: %w", path, err)
	}
	tr, err := parseServerTrace(&raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tr, nil
}

func parseServerTrace(raw *rawTrace) (*ServerTrace, error) {
	od := raw.OtherData
	if od.Origin == "" {
		return nil, errors.New("otherData.origin is missing: not a roseinfer phase trace")
	}
	origin, err := time.Parse(time.RFC3339Nano, od.Origin)
	if err != nil {
		return nil, fmt.Errorf("otherData.origin %q: %w", od.Origin, err)
	}
	if od.DurationS == nil || *od.DurationS < 0 {
		return nil, errors.New("otherData.duration_s is missing or negative")
	}
	tr := &ServerTrace{Origin: origin, DurationS: *od.DurationS, Truncated: od.Truncated, Threads: map[int]string{}}
	for i, ev := range raw.TraceEvents {
		switch ev.Ph {
		case "M":
			if ev.Name == "thread_name" {
				tr.Threads[ev.Tid] = ev.Args.Name
			}
		case "X":
			if ev.Ts == nil || ev.Dur == nil || *ev.Dur < 0 {
				return nil, fmt.Errorf("traceEvents[%d] (%q): ts and a non-negative dur are required", i, ev.Name)
			}
			a := &ev.Args
			tr.Spans = append(tr.Spans, Span{Name: ev.Name, Cat: ev.Cat, Tid: ev.Tid, StartS: *ev.Ts / 1e6,
				DurS: *ev.Dur / 1e6, Step: a.Step, NumSeqs: a.NumSeqs, PrefillTokens: a.PrefillTokens,
				DecodeRows: a.DecodeSeqs, Exec: a.Exec})
		}
	}
	tr.Steps = steps(tr.Spans)
	return tr, nil
}

// steps assembles the engine steps from the spans: the emit phase gives a
// step's end and shape, the forward phase its submission, a device span
// (when the device reports one) graph or eager. A step whose emit was not
// captured is left out; so is the first emitted step when its forward
// began before the capture (its start is unknown).
func steps(spans []Span) []Step {
	type parts struct {
		forwardS, emitS float64
		hasForward      bool
		hasEmit         bool
		shape           Span
		exec            string
	}
	byNum := map[int64]*parts{}
	get := func(n int64) *parts {
		p := byNum[n]
		if p == nil {
			p = &parts{}
			byNum[n] = p
		}
		return p
	}
	for i := range spans {
		s := &spans[i]
		switch {
		case s.Cat == "forward":
			p := get(s.Step)
			p.forwardS, p.hasForward = s.StartS, true
		case s.Cat == "emit":
			p := get(s.Step)
			p.emitS, p.hasEmit, p.shape = s.StartS, true, *s
		case s.Cat == "device" && s.Exec != "":
			// The step span and the ones nested in it agree; the first wins.
			if p := get(s.Step); p.exec == "" {
				p.exec = s.Exec
			}
		}
	}
	nums := make([]int64, 0, len(byNum))
	for n, p := range byNum {
		if p.hasEmit && p.shape.NumSeqs > 0 {
			nums = append(nums, n)
		}
	}
	sort.Slice(nums, func(a, b int) bool { return nums[a] < nums[b] })
	out := make([]Step, 0, len(nums))
	prevEnd, hasPrev := 0.0, false
	for _, n := range nums {
		p := byNum[n]
		start := p.forwardS
		switch {
		case hasPrev && (!p.hasForward || prevEnd > start):
			start = prevEnd
		case !p.hasForward:
			prevEnd, hasPrev = p.emitS, true
			continue
		}
		sh := &p.shape
		out = append(out, Step{Num: n, StartS: start, EndS: max(start, p.emitS), NumSeqs: sh.NumSeqs,
			PrefillTokens: sh.PrefillTokens, DecodeRows: sh.DecodeRows, Exec: p.exec})
		prevEnd, hasPrev = p.emitS, true
	}
	return out
}
