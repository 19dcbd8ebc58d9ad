package replay

import (
	"context"
	"slices"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
)

// Latency is how long a request took alone: the warmup's requests, sent
// one after another. PoolSize expects a request of the replay to take about
// that long, with headroom for the slowdown under load.
type Latency struct {
	FirstTokenS float64 // median time to the first token
	PerTokenS   float64 // median time per later output token
}

// Of is the time item it is expected to take alone.
func (l Latency) Of(it *Item) float64 {
	return l.FirstTokenS + float64(max(it.OutputLen-1, 0))*l.PerTokenS
}

// PoolHeadroom multiplies each request's expected duration when sizing the
// pool: under load a request takes longer than alone, and a connection too
// many costs a file descriptor while one too few is dialled on the schedule.
const PoolHeadroom = 2.0

// PoolSize is the most items in flight at once if each takes PoolHeadroom
// times lat.Of(item): the connections a replay should find open before its
// first send. A later turn of a session is expected to start its gap after
// its parent's expected end. With lat nil (no warmup measured it) a request
// may last the whole round, so every item counts.
func PoolSize(items []Item, lat *Latency) int {
	if lat == nil {
		return len(items)
	}
	type event struct {
		at    float64
		delta int // +1 start, -1 end
	}
	events := make([]event, 0, 2*len(items))
	end := make([]float64, len(items))
	for i := range items {
		it := &items[i]
		start := it.AtS
		if p := parentOf(items, i); p >= 0 {
			start = end[p] + it.Session.GapS
		}
		end[i] = start + PoolHeadroom*lat.Of(it)
		events = append(events, event{start, +1}, event{end[i], -1})
	}
	// An end before a start at the same instant: its connection is free.
	slices.SortFunc(events, func(a, b event) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.delta - b.delta
	})
	inFlight, peak := 0, 0
	for _, e := range events {
		inFlight += e.delta
		peak = max(peak, inFlight)
	}
	return peak
}

// WarmupLatency is Warmup that also measures the requests' latency; the
// Latency is nil when no request produced a token.
func WarmupLatency(ctx context.Context, c *client.Client, endpoint client.Endpoint, bodies [][]byte) (time.Duration, *Latency, error) {
	var firstS, perTokenS []float64
	wall, err := warmup(ctx, c, endpoint, bodies, func(res *client.Result) {
		if len(res.Chunks) == 0 {
			return
		}
		first := res.Chunks[0]
		firstS = append(firstS, first.At.Sub(res.Sent).Seconds())
		if later := res.NumTokens() - first.Tokens; later > 0 {
			perTokenS = append(perTokenS, res.Chunks[len(res.Chunks)-1].At.Sub(first.At).Seconds()/float64(later))
		}
	})
	if len(firstS) == 0 {
		return wall, nil, err
	}
	return wall, &Latency{FirstTokenS: median(firstS), PerTokenS: median(perTokenS)}, err
}

// median is the upper median of v (0 when empty); it sorts v.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
