package metrics

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// Times in these fixtures are multiples of 1/128 s so every difference,
// quotient by a token count, and ms conversion below is exact.

// oneTokenChunks: four chunks of one token each.
func oneTokenChunks() results.Request {
	return results.Request{StartS: 1, ScheduledS: 0.9921875, EndS: 1.5625,
		ChunkS: []float64{0.25, 0.3125, 0.375, 0.5}, ChunkTokens: []int{1, 1, 1, 1}}
}

// multiTokenChunks: chunks carrying 3, 4 and 2 tokens (N = 9).
func multiTokenChunks() results.Request {
	return results.Request{StartS: 2, ScheduledS: 2, EndS: 2.75,
		ChunkS: []float64{0.125, 0.25, 0.5}, ChunkTokens: []int{3, 4, 2}}
}

func singleToken() results.Request {
	return results.Request{StartS: 0.5, ScheduledS: 0.5, EndS: 0.625,
		ChunkS: []float64{0.0625}, ChunkTokens: []int{1}}
}

func failed(kind string) results.Request {
	msg := "server went away"
	return results.Request{StartS: 3, ScheduledS: 2.96875, EndS: 3.125, Error: &msg, ErrorKind: kind,
		ChunkS: []float64{0.0625}, ChunkTokens: []int{1}}
}

func TestPerRequestFigures(t *testing.T) {
	type figures struct {
		n, events             int
		ttft, ttftSched, tpot *float64
		e2e, sendLag          float64
		itl, icl              []float64
	}
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name string
		r    results.Request
		want figures
	}{
		{"one token per chunk", oneTokenChunks(), figures{
			n: 4, events: 4, ttft: f(0.25), ttftSched: f(0.2578125), tpot: f(0.25 / 3),
			e2e: 0.5625, sendLag: 0.0078125,
			itl: []float64{0.0625, 0.0625, 0.125}, icl: []float64{0.0625, 0.0625, 0.125}}},
		// TPOT = (0.5 − 0.125) / (9 − 1); chunk 2's 0.125 s gap is 4 tokens of
		// 0.03125 s, chunk 3's 0.25 s gap 2 tokens of 0.125 s; chunk 1's
		// extra 2 tokens give no ITL sample.
		{"several tokens per chunk", multiTokenChunks(), figures{
			n: 9, events: 3, ttft: f(0.125), ttftSched: f(0.125), tpot: f(0.046875),
			e2e: 0.75,
			itl: []float64{0.03125, 0.03125, 0.03125, 0.03125, 0.125, 0.125}, icl: []float64{0.125, 0.25}}},
		{"chunks without tokens are not events", results.Request{StartS: 1, ScheduledS: 1, EndS: 2,
			ChunkS: []float64{0.0625, 0.125, 0.25, 0.5}, ChunkTokens: []int{0, 2, 0, 1}}, figures{
			n: 3, events: 2, ttft: f(0.125), ttftSched: f(0.125), tpot: f(0.1875),
			e2e: 1, itl: []float64{0.375}, icl: []float64{0.375}}},
		{"one token: no TPOT, no ITL", singleToken(), figures{
			n: 1, events: 1, ttft: f(0.0625), ttftSched: f(0.0625), e2e: 0.125}},
		{"no tokens at all", results.Request{StartS: 1, ScheduledS: 1, EndS: 1.5}, figures{e2e: 0.5}},
		{"chunk arrays disagree: nothing guessed", results.Request{StartS: 1, ScheduledS: 0.5, EndS: 2,
			ChunkS: []float64{0.25, 0.5}, ChunkTokens: []int{1}}, figures{e2e: 1, sendLag: 0.5}},
		{"an absurd chunk count: nothing guessed", results.Request{StartS: 1, ScheduledS: 1, EndS: 2,
			ChunkS: []float64{0.25, 0.5}, ChunkTokens: []int{1, 1 << 40}}, figures{e2e: 1}},
		{"an error keeps its timings", failed("http_5xx"), figures{
			n: 1, events: 1, ttft: f(0.0625), ttftSched: f(0.09375), e2e: 0.125, sendLag: 0.03125}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			var got figures
			got.n, _ = OutputTokens(&r)
			got.ttft = optional(TTFT(&r))
			got.ttftSched = optional(TTFTFromScheduled(&r))
			got.tpot = optional(TPOT(&r))
			got.e2e, got.sendLag = E2E(&r), SendLag(&r)
			got.itl, got.icl = ITL(&r), ICL(&r)
			FillRequest(&r)
			got.events = r.NumStreamEvents
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %s\nwant %s", show(got), show(tt.want))
			}
			if r.NumOutputTokens != tt.want.n || !reflect.DeepEqual(r.TTFTS, tt.want.ttft) ||
				!reflect.DeepEqual(r.TPOTS, tt.want.tpot) || *r.E2ES != tt.want.e2e {
				t.Errorf("FillRequest: n %d ttft %v tpot %v e2e %v", r.NumOutputTokens, r.TTFTS, r.TPOTS, *r.E2ES)
			}
			if len(got.itl) != max(0, got.n-firstChunkTokens(&r)) {
				t.Errorf("%d ITL samples for N = %d", len(got.itl), got.n)
			}
		})
	}
}

// firstChunkTokens is k_1 of the first token-carrying chunk.
func firstChunkTokens(r *results.Request) int {
	_, k, _ := tokenEvents(r)
	if len(k) == 0 {
		return 0
	}
	return k[0]
}

func TestSucceeded(t *testing.T) {
	ok, bad := singleToken(), failed("")
	if !Succeeded(&ok) || Succeeded(&bad) {
		t.Error("success is Error == nil")
	}
}

// show prints pointers as values in failure messages.
func show(v any) string {
	rv := reflect.ValueOf(v)
	out := "{"
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch {
		case f.Kind() == reflect.Pointer && f.IsNil():
			out += " nil"
		case f.Kind() == reflect.Pointer:
			out += fmt.Sprint(" ", f.Elem().Interface())
		default:
			out += fmt.Sprint(" ", f.Interface())
		}
	}
	return out + " }"
}
