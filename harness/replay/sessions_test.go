package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
)

// sessionItems is numSessions conversations of numTurns turns, first turns
// 5 ms apart, each later turn gapS after the one before.
func sessionItems(numSessions, numTurns int, gapS float64) []Item {
	var out []Item
	for s := range numSessions {
		for k := range numTurns {
			it := Item{Index: len(out), AtS: 0.005 * float64(s), InputLen: 10, OutputLen: 3, Body: []byte(`{}`),
				Session: &Turn{Number: k + 1, Parent: -1, GapS: gapS}}
			if k > 0 {
				it.Session.Parent = len(out) - 1
				it.Body = nil // built by the follow function
			}
			out = append(out, it)
		}
	}
	return out
}

func TestRunSessionsWaitsForTheAnswer(t *testing.T) {
	srv, served := tokenServer(t, 3, 10*time.Millisecond)
	c := client.New(client.Options{BaseURL: srv.URL, MaxConcurrency: 8})
	defer c.Close()
	const gapS = 0.02
	its := sessionItems(3, 3, gapS)
	var mu sync.Mutex
	followed := map[int]int{}
	follow := func(i int, parent *client.Result) (FollowUp, error) {
		mu.Lock()
		followed[i]++
		mu.Unlock()
		if parent.Err != nil || parent.NumTokens() != 3 {
			return FollowUp{}, fmt.Errorf("item %d: parent result %v with %d tokens", i, parent.Err, parent.NumTokens())
		}
		return FollowUp{Body: []byte(`{}`), InputLen: 100 + i, ImpliedTokens: 50 + i}, nil
	}
	round := RunSessions(context.Background(), its, follow, Options{Client: c})
	if len(round.Requests) != 9 || round.NotSent != 0 || round.Interrupted || served.Load() != 9 {
		t.Fatalf("sent %d, not sent %d, interrupted %v, served %d", len(round.Requests), round.NotSent,
			round.Interrupted, served.Load())
	}
	byIndex := map[int]int{}
	for j, r := range round.Requests {
		byIndex[r.Index] = j
	}
	for _, r := range round.Requests {
		it := its[r.Index]
		if r.Error != nil {
			t.Fatalf("item %d failed: %s", r.Index, *r.Error)
		}
		if r.Turn != it.Session.Number || r.StartS < r.ScheduledS {
			t.Errorf("item %d: turn %d, sent %.6f s before its time", r.Index, r.Turn, r.ScheduledS-r.StartS)
		}
		if it.Session.Parent < 0 {
			if r.ParentIndex != nil || r.ScheduledS != it.AtS || r.InputLen != 10 || r.PrefixImpliedTokens != nil {
				t.Errorf("first turn %d: %+v", r.Index, r)
			}
			continue
		}
		p := round.Requests[byIndex[it.Session.Parent]]
		// Sent the gap after the parent's answer ended, never before.
		if r.ParentIndex == nil || *r.ParentIndex != p.Index || r.ScheduledS < p.EndS+gapS-1e-6 ||
			r.ScheduledS > p.EndS+gapS+1e-6 {
			t.Errorf("turn %d scheduled at %.6f s, parent %d ended at %.6f s (gap %v)", r.Index, r.ScheduledS, p.Index,
				p.EndS, gapS)
		}
		if r.InputLen != 100+r.Index || r.PrefixImpliedTokens == nil || *r.PrefixImpliedTokens != 50+r.Index {
			t.Errorf("turn %d: input %d implied %v, want the follow-up's", r.Index, r.InputLen, r.PrefixImpliedTokens)
		}
	}
	for i, it := range its {
		if want := min(1, max(0, it.Session.Parent+1)); followed[i] != want {
			t.Errorf("item %d built %d times, want %d", i, followed[i], want)
		}
	}
}

func TestRunSessionsGivesUpATurnItCannotBuild(t *testing.T) {
	srv, served := tokenServer(t, 1, time.Millisecond)
	c := client.New(client.Options{BaseURL: srv.URL, MaxConcurrency: 4})
	defer c.Close()
	its := sessionItems(2, 3, 0)
	follow := func(i int, _ *client.Result) (FollowUp, error) {
		if i == 1 { // session 0's second turn
			return FollowUp{}, errors.New("no prompt")
		}
		return FollowUp{Body: []byte(`{}`), InputLen: 1}, nil
	}
	round := RunSessions(context.Background(), its, follow, Options{Client: c})
	if len(round.Requests) != 6 || round.NotSent != 0 || served.Load() != 4 {
		t.Fatalf("recorded %d, not sent %d, served %d", len(round.Requests), round.NotSent, served.Load())
	}
	for _, r := range round.Requests {
		broken := r.Index == 1 || r.Index == 2 // the turn and the one after it
		if broken != (r.ErrorKind == ErrNotSent) || (broken && (r.Error == nil || r.StartS != r.ScheduledS)) {
			t.Errorf("item %d: kind %q", r.Index, r.ErrorKind)
		}
	}
}

func TestRunSessionsInterrupt(t *testing.T) {
	srv, served := tokenServer(t, 1, time.Millisecond)
	c := client.New(client.Options{BaseURL: srv.URL, MaxConcurrency: 4})
	defer c.Close()
	its := sessionItems(2, 2, 3600) // second turns an hour after the first
	ctx, stop := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, stop)
	follow := func(int, *client.Result) (FollowUp, error) { return FollowUp{Body: []byte(`{}`)}, nil }
	round := RunSessions(ctx, its, follow, Options{Client: c})
	if !round.Interrupted || len(round.Requests) != 2 || round.NotSent != 2 || served.Load() != 2 {
		t.Fatalf("interrupted %v, sent %d, not sent %d, served %d", round.Interrupted, len(round.Requests),
			round.NotSent, served.Load())
	}
}

// A parent that is not an earlier item cannot be waited for: the item is
// sent at its own time, as a first turn.
func TestRunSessionsBadParentIsAFirstTurn(t *testing.T) {
	srv, _ := tokenServer(t, 1, time.Millisecond)
	c := client.New(client.Options{BaseURL: srv.URL, MaxConcurrency: 4})
	defer c.Close()
	its := []Item{
		{Index: 0, AtS: 0.01, Body: []byte(`{}`), Session: &Turn{Number: 2, Parent: 1}},
		{Index: 1, AtS: 0.02, Body: []byte(`{}`), Session: &Turn{Number: 2, Parent: 7}},
	}
	follow := func(int, *client.Result) (FollowUp, error) { return FollowUp{}, errors.New("never called") }
	round := RunSessions(context.Background(), its, follow, Options{Client: c})
	if len(round.Requests) != 2 {
		t.Fatalf("sent %d", len(round.Requests))
	}
	for _, r := range round.Requests {
		if r.Error != nil || r.ScheduledS != its[r.Index].AtS || r.ParentIndex != nil {
			t.Errorf("item %d: %+v", r.Index, r)
		}
	}
}
