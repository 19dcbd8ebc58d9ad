// Package replay sends a round of requests open-loop at absolute times: each
// request goes out at its scheduled instant whether or not earlier ones have
// finished, so a slow server shows up as latency, never as a lower offered
// load. It records, per request, the scheduled time t_s next to the actual
// send time t_0, so harness/metrics can judge whether the client kept up.
// RunSessions replays conversations: first turns open-loop as above, each
// later turn after the answer to the turn it continues.
package replay

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/roseinfer/roseinfer/engine/hrtimer"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/results"
)

// Item is one request of a round, with its body already encoded so the
// dispatcher does no work between wake-up and send.
type Item struct {
	Index     int     // trace row
	AtS       float64 // scheduled send time, seconds after the round start (t_s)
	InputLen  int
	OutputLen int // requested max_tokens
	Body      []byte
	// ImpliedTokens is the prompt's prefix the workload implies the server
	// has seen (recorded as prefix_implied_tokens); nil: not known.
	ImpliedTokens *int
	// Session places the item in a conversation; nil for an independent
	// request. Run sends every item at AtS regardless; RunSessions sends a
	// later turn after the turn it continues (see Turn).
	Session *Turn
}

// Turn is an item's place in its session.
type Turn struct {
	Number int // 1-based
	// Parent is the index in the items of the turn this one continues, -1
	// for a first turn (sent at AtS).
	Parent int
	// GapS is how long after the parent's answer ended this turn is sent:
	// the think time, already scaled.
	GapS float64
}

// stamp writes what the record knows of items[i] before it is sent.
func stamp(rec *results.Request, items []Item, i int) {
	it := &items[i]
	rec.Index, rec.InputLen, rec.OutputLen, rec.ScheduledS = it.Index, it.InputLen, it.OutputLen, it.AtS
	rec.PrefixImpliedTokens = nil
	if it.ImpliedTokens != nil {
		v := *it.ImpliedTokens
		rec.PrefixImpliedTokens = &v
	}
	if t := it.Session; t != nil {
		rec.Turn = t.Number
		if p := parentOf(items, i); p >= 0 {
			row := items[p].Index
			rec.ParentIndex = &row
		}
	}
}

// Options configure Run.
type Options struct {
	Client   *client.Client
	Endpoint client.Endpoint
	// RequestContext is the parent of every request's context; cancelling
	// it aborts requests in flight (a second Ctrl-C). Cancelling Run's own
	// ctx only stops dispatching (the first Ctrl-C): requests in flight
	// are drained. Default: context.Background().
	RequestContext context.Context
	// SpinWindow is how long before a send the dispatcher stops sleeping
	// and spins (yielding). The sleep is on an hrtimer, which wakes tens of
	// µs late (a Go timer wakes up to 1 ms late); a spin of about that
	// length absorbs the lateness for a few µs of CPU per request.
	// 0: DefaultSpinWindow; negative: no spin.
	SpinWindow time.Duration
	// OnDone is called after each request finishes (progress display); it
	// must be safe for concurrent use.
	OnDone func(rec *results.Request)
}

// DefaultSpinWindow is Options.SpinWindow's default.
const DefaultSpinWindow = 100 * time.Microsecond

// goTimerSpinWindow replaces the spin window when no hrtimer can be made:
// a Go timer wakes up to a millisecond late.
const goTimerSpinWindow = 1500 * time.Microsecond

// Round is the outcome of one replay.
type Round struct {
	Start       time.Time         // time origin of AtS, start_s and end_s
	Requests    []results.Request // the dispatched requests, in send order
	NotSent     int               // items never dispatched (interrupted)
	Interrupted bool
	Wall        time.Duration // from Start until the last request ended
}

// Run replays items: each is sent at Start + AtS by the dispatcher (the
// calling goroutine), on an idle keep-alive connection, and its answer is
// read by a goroutine of its own. It returns when every dispatched request
// has ended.
func Run(ctx context.Context, items []Item, opts Options) *Round {
	opts = opts.withDefaults()
	// One timer for the dispatcher goroutine, which alone sleeps on it.
	timer := dispatcherTimer(&opts.SpinWindow)
	if timer != nil {
		defer timer.Close()
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return items[order[a]].AtS < items[order[b]].AtS })

	recs := make([]results.Request, len(items))
	round := &Round{Start: time.Now()}
	var wg sync.WaitGroup
	sent := 0
	for _, i := range order {
		it := &items[i]
		target := round.Start.Add(time.Duration(it.AtS * float64(time.Second)))
		if !sleepUntil(ctx, timer, target, opts.SpinWindow) {
			round.Interrupted = true
			break
		}
		// The request is written here, on the dispatcher, as it wakes: a
		// goroutine started to send it would wait in the run queue behind
		// the stream readers, and the send would run late.
		p := opts.Client.Start(opts.RequestContext, opts.Endpoint, it.Body)
		rec := &recs[sent]
		sent++
		stamp(rec, items, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := p.Finish()
			res.Fill(rec, round.Start)
			if opts.OnDone != nil {
				opts.OnDone(rec)
			}
		}()
	}
	wg.Wait()
	round.Wall = time.Since(round.Start)
	round.Requests = recs[:sent]
	round.NotSent = len(items) - sent
	return round
}

// withDefaults fills o's zero fields: no request context means
// context.Background(), a zero SpinWindow DefaultSpinWindow, a negative one
// none.
func (o Options) withDefaults() Options {
	if o.RequestContext == nil {
		o.RequestContext = context.Background()
	}
	switch {
	case o.SpinWindow == 0:
		o.SpinWindow = DefaultSpinWindow
	case o.SpinWindow < 0:
		o.SpinWindow = 0
	}
	return o
}

// dispatcherTimer makes the dispatcher's hrtimer, or returns nil when none
// can be made (out of file descriptors): the dispatcher then sleeps on a Go
// timer, which wakes up to a millisecond late, so spin is widened to cover
// that. The caller closes a timer it gets.
func dispatcherTimer(spin *time.Duration) *hrtimer.Timer {
	timer, err := hrtimer.New()
	if err != nil {
		*spin = max(*spin, goTimerSpinWindow)
		return nil
	}
	return timer
}

// sleepUntil waits until target: asleep on timer (a Go timer when nil) up
// to spin before it, then a yielding spin. It returns false if ctx ends
// first.
func sleepUntil(ctx context.Context, timer *hrtimer.Timer, target time.Time, spin time.Duration) bool {
	wake := target.Add(-spin)
	switch {
	case !time.Now().Before(wake):
	case timer != nil:
		if err := timer.SleepUntil(ctx, wake); err != nil {
			return false // ctx ended (the dispatcher never closes its timer early)
		}
	default:
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	spinUntil(target)
	return ctx.Err() == nil
}

// maxHeldSpin is the longest the dispatcher spins without yielding: the
// default spin window and the timer's usual lateness fit in it.
const maxHeldSpin = 200 * time.Microsecond

// spinUntil busy-waits until target. Within maxHeldSpin of it, it keeps
// its processor: a yield (runtime.Gosched) puts the goroutine at the tail of
// the global run queue, which during a burst of stream chunks holds the
// reader goroutines the netpoller woke; with 2,000 streams on 2 cores a
// yielding dispatcher's sends ran late in ramps of 10-20 ms, one per burst.
// Holding the processor costs at most maxHeldSpin of CPU per request;
// further out (the Go timer fallback's long spin) it yields as
// hrtimer.SpinUntil does.
func spinUntil(target time.Time) {
	for {
		left := time.Until(target)
		if left <= 0 {
			return
		}
		if left > maxHeldSpin {
			runtime.Gosched()
		}
	}
}

// Warmup sends bodies one after another and drains each stream, as the
// original's warmup. It stops at the first failed request.
func Warmup(ctx context.Context, c *client.Client, endpoint client.Endpoint, bodies [][]byte) (time.Duration, error) {
	return warmup(ctx, c, endpoint, bodies, nil)
}

// warmup is Warmup, handing each successful result to seen (when not nil).
func warmup(ctx context.Context, c *client.Client, endpoint client.Endpoint, bodies [][]byte,
	seen func(*client.Result)) (time.Duration, error) {
	start := time.Now()
	for i, body := range bodies {
		res := c.Do(ctx, endpoint, body)
		if res.Err != nil {
			return time.Since(start), fmt.Errorf("warmup request %d of %d: %s: %w", i+1, len(bodies), res.ErrKind, res.Err)
		}
		if seen != nil {
			seen(res)
		}
	}
	return time.Since(start), nil
}
