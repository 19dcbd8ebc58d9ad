package replay

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/results"
)

// FollowUp is a later turn's request, built once the turn it continues has
// ended: its prompt holds that turn's prompt and answer.
type FollowUp struct {
	Body          []byte
	InputLen      int // prompt tokens: the history and the new input
	ImpliedTokens int // of them, the history: the previous prompt and answer
}

// FollowFunc builds item i's request from the result of the turn it
// continues. It is called on that turn's goroutine, once per later turn, so
// it must be safe for concurrent use across items.
type FollowFunc func(i int, parent *client.Result) (FollowUp, error)

// ErrNotSent is the error kind of a turn that could not be built
// (FollowFunc failed): it and every later turn of its session are recorded
// as errors, never sent.
const ErrNotSent = "not_sent"

// RunSessions replays items as conversations. A first turn (Session nil or
// Parent -1) is sent at AtS, open-loop, as Run sends it. A later turn is
// sent GapS after the turn it continues ended (its answer arrived, or it
// failed: a user sends the next message either way), with the body follow
// builds from that turn's result; its scheduled time t_s is that instant.
// Parent must be an earlier item; one that is not makes the item a first
// turn. The round ends when every item was sent, or when ctx ends (the
// first Ctrl-C) and the requests in flight have ended.
func RunSessions(ctx context.Context, items []Item, follow FollowFunc, opts Options) *Round {
	opts = opts.withDefaults()
	s := &sessionRun{items: items, follow: follow, opts: opts, children: make([][]int, len(items)),
		recs: make([]results.Request, len(items)), numLeft: len(items)}
	s.round = &Round{Start: time.Now()}
	for i := range items {
		if p := parentOf(items, i); p >= 0 {
			s.children[p] = append(s.children[p], i)
			continue
		}
		start := s.round.Start.Add(time.Duration(items[i].AtS * float64(time.Second)))
		s.queue = append(s.queue, due{at: start, atS: items[i].AtS, i: i, body: items[i].Body,
			inputLen: items[i].InputLen, implied: items[i].ImpliedTokens})
	}
	heap.Init(&s.queue)
	s.dispatch(ctx)
	s.wg.Wait()
	s.round.Wall = time.Since(s.round.Start)
	s.round.Requests = s.recs[:s.numRecorded]
	s.round.NotSent = len(items) - s.numRecorded
	return s.round
}

// parentOf is item i's parent index, or -1 when it has none (or names no
// earlier item).
func parentOf(items []Item, i int) int {
	t := items[i].Session
	if t == nil || t.Parent < 0 || t.Parent >= i {
		return -1
	}
	return t.Parent
}

// due is a request whose send time is known.
type due struct {
	at       time.Time
	atS      float64 // at, in seconds after the round start (t_s)
	i        int
	body     []byte
	inputLen int
	implied  *int
}

// dueQueue is a min-heap of due requests: earliest first, then item order.
type dueQueue []due

func (q dueQueue) Len() int { return len(q) }
func (q dueQueue) Less(a, b int) bool {
	if !q[a].at.Equal(q[b].at) {
		return q[a].at.Before(q[b].at)
	}
	return q[a].i < q[b].i
}
func (q dueQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *dueQueue) Push(x any)   { *q = append(*q, x.(due)) }
func (q *dueQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

type sessionRun struct {
	items    []Item
	follow   FollowFunc
	opts     Options
	children [][]int // item -> the later turns continuing it
	round    *Round
	wg       sync.WaitGroup

	mu          sync.Mutex
	queue       dueQueue
	recs        []results.Request // in send order; records are filled by their request's goroutine
	numRecorded int               // recs[:numRecorded] are claimed
	numLeft     int               // items neither sent nor given up
	// wake ends the dispatcher's current wait: a turn that became due may
	// come before the one it waits for.
	wake    context.CancelFunc
	stopped bool // the dispatcher has returned: nothing more is sent
}

// dispatch sends each due request at its time until every item is sent or
// ctx ends. It waits as Run does (hrtimer, then a short spin); a turn that
// becomes due meanwhile ends the wait, so it is never held behind a later one.
func (s *sessionRun) dispatch(ctx context.Context) {
	timer := dispatcherTimer(&s.opts.SpinWindow)
	if timer != nil {
		defer timer.Close()
	}
	defer func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
	}()
	for {
		if ctx.Err() != nil {
			s.round.Interrupted = true
			return
		}
		s.mu.Lock()
		for len(s.queue) > 0 && !s.queue[0].at.After(time.Now()) {
			s.send(heap.Pop(&s.queue).(due))
		}
		if s.numLeft == 0 {
			s.mu.Unlock()
			return
		}
		wait, cancel := context.WithCancel(ctx)
		s.wake = cancel
		var target time.Time
		if len(s.queue) > 0 {
			target = s.queue[0].at
		}
		s.mu.Unlock()
		if target.IsZero() {
			<-wait.Done() // nothing due until a turn in flight ends
		} else {
			sleepUntil(wait, timer, target, s.opts.SpinWindow)
		}
		cancel()
	}
}

// send claims a record for d and sends its request, on the dispatcher as
// Run does; a goroutine reads the answer. Called with mu held: the write is
// short, and only a request's end waits for mu.
func (s *sessionRun) send(d due) {
	p := s.opts.Client.Start(s.opts.RequestContext, s.opts.Endpoint, d.body)
	rec := s.claim(d)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res := p.Finish()
		res.Fill(rec, s.round.Start)
		if s.opts.OnDone != nil {
			s.opts.OnDone(rec)
		}
		s.ended(d.i, res)
	}()
}

// claim takes the next record for d and stamps it. Called with mu held.
func (s *sessionRun) claim(d due) *results.Request {
	rec := &s.recs[s.numRecorded]
	s.numRecorded++
	s.numLeft--
	stamp(rec, s.items, d.i)
	rec.ScheduledS, rec.InputLen = d.atS, d.inputLen
	if d.implied != nil {
		v := *d.implied
		rec.PrefixImpliedTokens = &v
	}
	return rec
}

// ended schedules the turns continuing item i, whose request just ended.
func (s *sessionRun) ended(i int, res *client.Result) {
	for _, c := range s.children[i] {
		fu, err := s.follow(c, res)
		at := res.End.Add(time.Duration(s.items[c].Session.GapS * float64(time.Second)))
		d := due{at: at, atS: at.Sub(s.round.Start).Seconds(), i: c, body: fu.Body, inputLen: fu.InputLen,
			implied: &fu.ImpliedTokens}
		s.mu.Lock()
		switch {
		case s.stopped:
		case err != nil:
			s.giveUp(d, "session turn not built: "+err.Error())
		default:
			heap.Push(&s.queue, d)
			if s.wake != nil {
				s.wake()
				s.wake = nil
			}
		}
		s.mu.Unlock()
	}
}

// giveUp records d's item and every later turn of its session as not sent.
// Called with mu held.
func (s *sessionRun) giveUp(d due, why string) {
	rec := s.claim(d)
	rec.StartS, rec.EndS = d.atS, d.atS
	rec.ChunkS, rec.ChunkTokens = []float64{}, []int{}
	rec.Error, rec.ErrorKind = &why, ErrNotSent
	for _, c := range s.children[d.i] {
		s.giveUp(due{at: d.at, atS: d.atS, i: c, inputLen: s.items[c].InputLen}, why)
	}
	if s.numLeft == 0 && s.wake != nil {
		s.wake()
		s.wake = nil
	}
}
