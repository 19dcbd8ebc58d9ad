package timeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/results"
)

// File is the timeline's name in the run directory.
const File = "timeline.json"

// round is one replay with a timeline record, as Write draws it.
type round struct {
	label string
	run   *results.Run
	steps *Steps
	trace *ServerTrace
	note  string
}

// Write renders the timeline of an online run from its results and the
// server traces they name (relative names are inside runDir) into
// runDir/timeline.json, and returns its path. Rounds without a timeline
// record are left out. A server trace that cannot be read is named in the
// file's otherData and its round is drawn from the client's side only.
func Write(runDir string, on *results.Online) (string, error) {
	var rounds []*round
	for label, b := range on.ByBackend {
		if b == nil {
			continue
		}
		for i := range b.Runs {
			run := &b.Runs[i]
			if run.Timeline == nil {
				continue
			}
			rd := &round{label: label, run: run, note: run.Timeline.ServerNote}
			rd.load(runDir)
			rounds = append(rounds, rd)
		}
	}
	sort.Slice(rounds, func(a, b int) bool {
		return rounds[a].run.Timeline.StartUnixNs < rounds[b].run.Timeline.StartUnixNs
	})
	path := filepath.Join(runDir, File)
	err := results.WriteAtomic(path, func(w io.Writer) error { return writeTrace(w, rounds) })
	return path, err
}

// load reads the round's server trace and puts it on the round's clock.
func (rd *round) load(runDir string) {
	rt := rd.run.Timeline
	if rt.ServerTrace == "" || rt.ServerOriginS == nil || rt.ClockErrorS == nil {
		return
	}
	path := rt.ServerTrace
	if !filepath.IsAbs(path) {
		path = filepath.Join(runDir, path)
	}
	tr, err := ReadServerTrace(path)
	if err != nil {
		rd.note = err.Error()
		return
	}
	rd.trace = tr
	rd.steps = OnClock(tr, Clock{OriginS: *rt.ServerOriginS, Method: rt.Clock, ErrorS: *rt.ClockErrorS})
}

// Chrome trace events (the JSON object format Perfetto and chrome://tracing
// read): ts and dur in µs from the first round's start.
type event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	S    string         `json:"s,omitempty"`  // instant scope
	ID   int            `json:"id,omitempty"` // flow id
	BP   string         `json:"bp,omitempty"` // flow binding
	Args map[string]any `json:"args,omitempty"`
}

// traceWriter streams events into the traceEvents array.
type traceWriter struct {
	w      *bufio.Writer
	n      int
	err    error
	flowID int
}

func (tw *traceWriter) add(ev event) {
	if tw.err != nil {
		return
	}
	data, err := json.Marshal(ev)
	if err != nil {
		tw.err = err
		return
	}
	if tw.n > 0 {
		tw.w.WriteString(",\n")
	}
	tw.n++
	tw.w.Write(data)
}

func (tw *traceWriter) slice(name, cat string, pid, tid int, startUs, endUs float64, args map[string]any) {
	dur := max(0, endUs-startUs)
	tw.add(event{Name: name, Cat: cat, Ph: "X", Pid: pid, Tid: tid, Ts: startUs, Dur: &dur, Args: args})
}

func (tw *traceWriter) meta(name string, pid, tid int, args map[string]any) {
	tw.add(event{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: args})
}

// Thread ids of a round's server process.
const (
	tidSteps      = 1  // the steps as the timeline derived them
	tidServerBase = 10 // + the server trace's own thread ids
)

func writeTrace(w io.Writer, rounds []*round) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteString("{\"traceEvents\":[\n")
	tw := &traceWriter{w: bw}
	var t0 int64
	if len(rounds) > 0 {
		t0 = rounds[0].run.Timeline.StartUnixNs
	}
	var info []map[string]any
	for i, rd := range rounds {
		baseUs := float64(rd.run.Timeline.StartUnixNs-t0) / 1e3
		info = append(info, rd.draw(tw, 2*i+1, 2*i+2, baseUs))
	}
	if tw.err != nil {
		return tw.err
	}
	other, err := json.Marshal(map[string]any{
		"generator":   "bench online --timeline",
		"t0_unix_ns":  t0,
		"time_origin": "ts 0 is the first round's start on the client's clock (CLOCK_REALTIME at t0_unix_ns)",
		"rounds":      info,
	})
	if err != nil {
		return err
	}
	bw.WriteString("\n],\"displayTimeUnit\":\"ms\",\"otherData\":")
	bw.Write(other)
	bw.WriteString("}\n")
	return bw.Flush()
}

// draw writes one round: a client process (a thread per request) and a
// server process (its steps, its own phase spans, counters), with a flow
// arrow from each attributed step to its outlier. It returns the round's
// otherData entry.
func (rd *round) draw(tw *traceWriter, clientPid, serverPid int, baseUs float64) map[string]any {
	run, rt := rd.run, rd.run.Timeline
	us := func(s float64) float64 { return baseUs + s*1e6 }
	name := fmt.Sprintf("%s · scale %s · round %d", rd.label, strconv.FormatFloat(run.Scale, 'f', -1, 64), max(run.Round, 1))
	tw.meta("process_name", clientPid, 0, map[string]any{"name": name + " · client"})
	tw.meta("process_sort_index", clientPid, 0, map[string]any{"sort_index": clientPid})

	p99 := run.Summary.ITLMs.P99
	atts := Attribute(run.RequestMetrics, run.Summary.ITLMs, rd.steps)
	byChunk := map[[2]int]*Attribution{}
	for i := range atts {
		byChunk[[2]int{atts[i].Request, atts[i].Chunk}] = &atts[i]
	}
	for i := range run.RequestMetrics {
		drawRequest(tw, &run.RequestMetrics[i], clientPid, i+1, us, func(chunk int) *Attribution {
			return byChunk[[2]int{i, chunk}]
		})
	}

	entry := map[string]any{"backend": rd.label, "scale": run.Scale, "round": run.Round, "client_pid": clientPid,
		"itl_p99_ms": p99, "itl_outliers": Count(atts, p99).ByCause, "num_itl_outliers": len(atts)}
	if rd.note != "" {
		entry["server_note"] = rd.note
	}
	if rd.trace == nil {
		return entry
	}
	entry["server_pid"] = serverPid
	entry["server_trace"] = rt.ServerTrace
	entry["clock"] = rt.Clock
	entry["clock_error_us"] = *rt.ClockErrorS * 1e6
	entry["server_origin_s"] = *rt.ServerOriginS
	tw.meta("process_name", serverPid, 0, map[string]any{"name": name + " · server"})
	tw.meta("process_sort_index", serverPid, 0, map[string]any{"sort_index": serverPid})
	drawSteps(tw, rd.steps.Steps, serverPid, us)
	origin := *rt.ServerOriginS
	for tid, tname := range rd.trace.Threads {
		tw.meta("thread_name", serverPid, tidServerBase+tid, map[string]any{"name": "server: " + tname})
	}
	for _, s := range rd.trace.Spans {
		args := map[string]any{"step": s.Step}
		if s.NumSeqs > 0 {
			args["num_seqs"], args["prefill_tokens"], args["decode_seqs"] = s.NumSeqs, s.PrefillTokens, s.DecodeRows
		}
		if s.Exec != "" {
			args["exec"] = s.Exec
		}
		tw.slice(s.Name, s.Cat, serverPid, tidServerBase+s.Tid, us(origin+s.StartS), us(origin+s.StartS+s.DurS), args)
	}
	for i := range atts {
		a := &atts[i]
		if a.Step == nil {
			continue
		}
		tw.flowID++
		tw.add(event{Name: a.Cause, Cat: "itl_outlier", Ph: "s", Pid: serverPid, Tid: tidSteps, ID: tw.flowID,
			Ts: us((a.Step.StartS + a.Step.EndS) / 2)})
		tw.add(event{Name: a.Cause, Cat: "itl_outlier", Ph: "f", BP: "e", Pid: clientPid, Tid: a.Request + 1,
			ID: tw.flowID, Ts: us((a.GapStartS + a.GapEndS) / 2)})
	}
	return entry
}

// drawRequest writes one request's thread: its scheduled instant, the
// request from send to end, its TTFT, and one slice per later token chunk
// spanning the gap since the previous one (ITL outliers named and
// explained).
func drawRequest(tw *traceWriter, r *results.Request, pid, tid int, us func(float64) float64, outlier func(chunk int) *Attribution) {
	tw.meta("thread_name", pid, tid, map[string]any{"name": fmt.Sprintf("request %d (%d in, %d out)", r.Index,
		r.InputLen, r.OutputLen)})
	tw.add(event{Name: "scheduled", Cat: "request", Ph: "i", S: "t", Pid: pid, Tid: tid, Ts: us(r.ScheduledS),
		Args: map[string]any{"send_lag_ms": metrics.SendLag(r) * 1e3}})
	args := map[string]any{"index": r.Index, "input_len": r.InputLen, "max_tokens": r.OutputLen,
		"output_tokens": r.NumOutputTokens, "ttft_ms": msOf(r.TTFTS), "tpot_ms": msOf(r.TPOTS), "e2e_ms": msOf(r.E2ES)}
	name := "request"
	if r.Error != nil {
		name, args["error"] = "request (error)", *r.Error
	}
	tw.slice(name, "request", pid, tid, us(r.StartS), us(r.EndS), args)
	if len(r.ChunkS) != len(r.ChunkTokens) {
		return
	}
	prev := -1
	for j, k := range r.ChunkTokens {
		if k < 1 {
			continue
		}
		at := r.StartS + r.ChunkS[j]
		if prev < 0 {
			tw.slice("TTFT", "ttft", pid, tid, us(r.StartS), us(at), map[string]any{"tokens": k})
			prev = j
			continue
		}
		from := r.StartS + r.ChunkS[prev]
		args := map[string]any{"tokens": k, "gap_ms": (at - from) * 1e3, "itl_ms": (at - from) / float64(k) * 1e3}
		name, cat := "chunk", "chunk"
		if a := outlier(j); a != nil {
			name, cat = "ITL outlier: "+a.Cause, "itl_outlier"
			args["cause"], args["why"] = a.Cause, a.Why
			if a.Step != nil {
				args["step"] = a.Step.Num
			}
			if a.ServerGapS != nil {
				args["server_gap_ms"] = *a.ServerGapS * 1e3
			}
		}
		tw.slice(name, cat, pid, tid, us(from), us(at), args)
		prev = j
	}
}

// drawSteps writes the derived steps on their own thread and their shape
// as counters (zero while the engine is idle).
func drawSteps(tw *traceWriter, steps []Step, pid int, us func(float64) float64) {
	tw.meta("thread_name", pid, tidSteps, map[string]any{"name": "engine steps (client clock)"})
	for i := range steps {
		st := &steps[i]
		args := map[string]any{"step": st.Num, "batch_size": st.NumSeqs, "prefill_tokens": st.PrefillTokens,
			"decode_rows": st.DecodeRows, "ms": (st.EndS - st.StartS) * 1e3}
		if st.Exec != "" {
			args["exec"] = st.Exec
		}
		tw.slice(st.Kind(), "engine_step", pid, tidSteps, us(st.StartS), us(st.EndS), args)
		tw.add(event{Name: "batch", Ph: "C", Pid: pid, Ts: us(st.StartS), Args: map[string]any{
			"batch_size": st.NumSeqs, "prefill_tokens": st.PrefillTokens, "decode_rows": st.DecodeRows}})
		if i+1 == len(steps) || steps[i+1].StartS > st.EndS {
			tw.add(event{Name: "batch", Ph: "C", Pid: pid, Ts: us(st.EndS), Args: map[string]any{
				"batch_size": 0, "prefill_tokens": 0, "decode_rows": 0}})
		}
	}
}

func msOf(s *float64) *float64 {
	if s == nil {
		return nil
	}
	v := *s * 1e3
	return &v
}
