package report

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/roseinfer/roseinfer/results"
)

// traceEvent is the part of a trace event the summary needs.
type traceEvent struct {
	Name string          `json:"name"`
	Ph   string          `json:"ph"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Ts   float64         `json:"ts"`
	Dur  float64         `json:"dur"`
	Args struct {
		Name string `json:"name"`
	} `json:"args"`
}

// SummarizeChromeTrace reads a Chrome trace-event file (JSON object or bare
// array form, gzipped if the name ends in .gz) and totals its complete
// events. It fails if the file is not a trace: that is the check that the
// file opens in Perfetto.
func SummarizeChromeTrace(path string) (*results.TraceSummary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 256<<10)
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	s, err := summarizeTrace(json.NewDecoder(r))
	if err != nil {
		return nil, fmt.Errorf("%s: not a Chrome trace: %w", path, err)
	}
	s.Path = path
	return s, nil
}

type phaseKey struct{ track, name string }

type traceTotals struct {
	threads    map[string]string // "pid/tid" -> thread name
	rows       map[phaseKey]*results.TracePhase
	start, end float64
	numEvents  int
}

func summarizeTrace(dec *json.Decoder) (*results.TraceSummary, error) {
	tt := &traceTotals{threads: map[string]string{}, rows: map[phaseKey]*results.TracePhase{}, start: math.Inf(1), end: math.Inf(-1)}
	s := &results.TraceSummary{}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		if err := tt.readEvents(dec); err != nil {
			return nil, err
		}
	case json.Delim('{'):
		found := false
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return nil, err
			}
			switch key {
			case "traceEvents":
				if t, err := dec.Token(); err != nil || t != json.Delim('[') {
					return nil, errors.New("traceEvents is not an array")
				}
				if err := tt.readEvents(dec); err != nil {
					return nil, err
				}
				found = true
			case "otherData":
				if err := dec.Decode(&s.OtherData); err != nil {
					return nil, err
				}
			default:
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return nil, err
				}
			}
		}
		if !found {
			return nil, errors.New("no traceEvents")
		}
	default:
		return nil, errors.New("neither an object nor an array")
	}
	s.NumEvents = tt.numEvents
	if tt.numEvents > 0 {
		s.SpanS = (tt.end - tt.start) / 1e6
	}
	s.Phases = make([]results.TracePhase, 0, len(tt.rows))
	for _, row := range tt.rows {
		if name, ok := tt.threads[row.Track]; ok {
			row.Track = name
		}
		row.MeanMs = row.TotalMs / float64(row.Count)
		s.Phases = append(s.Phases, *row)
	}
	sort.Slice(s.Phases, func(a, b int) bool {
		pa, pb := s.Phases[a], s.Phases[b]
		if pa.Track != pb.Track {
			return pa.Track < pb.Track
		}
		if pa.TotalMs != pb.TotalMs {
			return pa.TotalMs > pb.TotalMs
		}
		return pa.Name < pb.Name
	})
	return s, nil
}

// readEvents consumes the events of an array whose '[' was read.
func (tt *traceTotals) readEvents(dec *json.Decoder) error {
	for dec.More() {
		var ev traceEvent
		if err := dec.Decode(&ev); err != nil {
			return err
		}
		thread := string(ev.Pid) + "/" + string(ev.Tid)
		switch ev.Ph {
		case "M":
			if ev.Name == "thread_name" {
				tt.threads[thread] = ev.Args.Name
			}
		case "X":
			if ev.Dur < 0 {
				return fmt.Errorf("event %q has a negative duration", ev.Name)
			}
			tt.numEvents++
			tt.start = math.Min(tt.start, ev.Ts)
			tt.end = math.Max(tt.end, ev.Ts+ev.Dur)
			key := phaseKey{thread, ev.Name}
			row := tt.rows[key]
			if row == nil {
				row = &results.TracePhase{Track: thread, Name: ev.Name}
				tt.rows[key] = row
			}
			ms := ev.Dur / 1e3
			row.Count++
			row.TotalMs += ms
			row.MaxMs = math.Max(row.MaxMs, ms)
		}
	}
	_, err := dec.Token() // ']'
	return err
}
