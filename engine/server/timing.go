package server

import (
	"time"

	"github.com/roseinfer/roseinfer/engine"
)

// serverTiming is the return_server_timing extension: the server's own
// instants for one request, in seconds after the request arrived at the HTTP
// handler, so a client can split its TTFT into network, queue and compute.
// The JSON keys are those of results.ServerTiming (the harness's schema).
type serverTiming struct {
	QueuedS         float64   `json:"queued_s"`          // handed to the engine (after parsing and tokenizing)
	FirstScheduledS float64   `json:"first_scheduled_s"` // first engine step that included it
	TokenS          []float64 `json:"token_s"`           // each generated token the response carries
	FinishedS       float64   `json:"finished_s"`        // the engine finished it
}

// newServerTiming converts the engine's monotonic instants. Only the first
// numTokens token instants are kept: tokens generated after a stop string
// matched are not part of the response. An instant the engine never reached
// (a request aborted before its first step) reads as the one before it.
func newServerTiming(arrival time.Time, t engine.Timing, numTokens int) *serverTiming {
	since := func(at, fallback time.Time) float64 {
		if at.IsZero() {
			at = fallback
		}
		return max(at.Sub(arrival).Seconds(), 0)
	}
	st := &serverTiming{
		QueuedS:         since(t.Arrival, arrival),
		FirstScheduledS: since(t.FirstScheduled, t.Arrival),
		TokenS:          make([]float64, 0, min(numTokens, len(t.Tokens))),
		FinishedS:       since(t.Finished, t.FirstScheduled),
	}
	for _, at := range t.Tokens[:min(numTokens, len(t.Tokens))] {
		st.TokenS = append(st.TokenS, since(at, arrival))
	}
	return st
}

func (st *serverTiming) appendJSON(b []byte) []byte {
	b = append(b, `{"queued_s":`...)
	b = appendSeconds(b, st.QueuedS)
	b = append(b, `,"first_scheduled_s":`...)
	b = appendSeconds(b, st.FirstScheduledS)
	b = append(b, `,"token_s":[`...)
	for i, s := range st.TokenS {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSeconds(b, s)
	}
	b = append(b, `],"finished_s":`...)
	b = appendSeconds(b, st.FinishedS)
	return append(b, '}')
}

// MarshalJSON keeps the non-streaming response's numbers identical to the
// streamed ones (microsecond resolution).
func (st *serverTiming) MarshalJSON() ([]byte, error) { return st.appendJSON(nil), nil }
