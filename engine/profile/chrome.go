package profile

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"time"
)

// Chrome trace process and thread ids. One process; one thread row per
// Track.
const (
	tracePID     = 1
	traceTIDBase = 1
)

// WriteChromeTrace writes c in the Chrome trace-event JSON format (object
// form: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}),
// which Perfetto (ui.perfetto.dev) and chrome://tracing open. Every span is
// a complete ("X") event with ts and dur in microseconds from the capture's
// start; args carry the step number and the batch's shape (device spans
// add "exec": "graph" or "eager"). otherData holds
// info plus the capture's own facts.
func WriteChromeTrace(w io.Writer, c *Capture, info map[string]string) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"traceEvents":[`)
	bw.WriteString("\n")
	writeMeta(bw, "process_name", 0, "roseinfer")
	for t := range numTracks {
		bw.WriteString(",\n")
		writeMeta(bw, "thread_name", traceTIDBase+int(t), t.String())
	}
	names := map[string][]byte{} // span names JSON-quoted once
	var buf []byte
	for i := range c.Spans {
		s := &c.Spans[i]
		q, ok := names[s.Name]
		if !ok {
			q, _ = json.Marshal(s.Name)
			names[s.Name] = q
		}
		buf = buf[:0]
		buf = append(buf, ",\n{\"name\":"...)
		buf = append(buf, q...)
		buf = append(buf, `,"cat":"`...)
		buf = append(buf, category(s)...)
		buf = append(buf, `","ph":"X","pid":`...)
		buf = strconv.AppendInt(buf, tracePID, 10)
		buf = append(buf, `,"tid":`...)
		buf = strconv.AppendInt(buf, int64(traceTIDBase+int(s.Track)), 10)
		buf = append(buf, `,"ts":`...)
		buf = appendMicros(buf, s.Start)
		buf = append(buf, `,"dur":`...)
		buf = appendMicros(buf, s.Dur)
		buf = append(buf, `,"args":{"step":`...)
		buf = strconv.AppendInt(buf, s.Batch.Step, 10)
		if s.Batch.NumSeqs > 0 {
			buf = append(buf, `,"num_seqs":`...)
			buf = strconv.AppendInt(buf, int64(s.Batch.NumSeqs), 10)
			buf = append(buf, `,"prefill_tokens":`...)
			buf = strconv.AppendInt(buf, int64(s.Batch.NumPrefillTokens), 10)
			buf = append(buf, `,"decode_seqs":`...)
			buf = strconv.AppendInt(buf, int64(s.Batch.NumDecodeSeqs), 10)
		}
		if s.Track != TrackEngine {
			buf = append(buf, `,"exec":"`...)
			buf = append(buf, execName(s.Graph)...)
			buf = append(buf, '"')
		}
		buf = append(buf, "}}"...)
		bw.Write(buf)
	}
	bw.WriteString("\n],\"displayTimeUnit\":\"ms\",\"otherData\":")
	other := map[string]any{
		"origin":         c.Origin.Format(time.RFC3339Nano),
		"duration_s":     c.Duration.Seconds(),
		"num_steps":      c.NumSteps,
		"num_spans":      len(c.Spans),
		"truncated":      c.Truncated,
		"device_reports": c.DeviceReports,
	}
	for k, v := range info {
		other[k] = v
	}
	data, err := json.Marshal(other)
	if err != nil {
		return err
	}
	bw.Write(data)
	bw.WriteString("}\n")
	return bw.Flush()
}

func writeMeta(bw *bufio.Writer, name string, tid int, value string) {
	q, _ := json.Marshal(value)
	bw.WriteString(`{"name":"` + name + `","ph":"M","pid":` + strconv.Itoa(tracePID) + `,"tid":` + strconv.Itoa(tid) +
		`,"args":{"name":` + string(q) + `}}`)
}

// category groups spans for Perfetto's filters: the engine phase, or
// "device" for what a device reported.
func category(s *Span) string {
	if s.Track != TrackEngine {
		return "device"
	}
	return s.Phase.String()
}

// execName is how a device ran a step: "graph" (replayed from a captured
// graph) or "eager" (op by op).
func execName(isGraph bool) string {
	if isGraph {
		return "graph"
	}
	return "eager"
}

// appendMicros writes d in microseconds with nanosecond precision.
func appendMicros(buf []byte, d time.Duration) []byte {
	return strconv.AppendFloat(buf, float64(d.Nanoseconds())/1e3, 'f', -1, 64)
}
