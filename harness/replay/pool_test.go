package replay

import "testing"

func TestPoolSize(t *testing.T) {
	// Each request lasts PoolHeadroom × (0.01 + 0.01×(OutputLen−1)) s: an
	// OutputLen of 5 is 0.1 s with the headroom.
	lat := &Latency{FirstTokenS: 0.01, PerTokenS: 0.01}
	at := func(ts ...float64) []Item {
		out := make([]Item, len(ts))
		for i, s := range ts {
			out[i] = Item{Index: i, AtS: s, OutputLen: 5}
		}
		return out
	}
	tests := []struct {
		name  string
		items []Item
		lat   *Latency
		want  int
	}{
		{"no items", nil, lat, 0},
		// Without a measured latency any request may last the whole round.
		{"latency unknown", at(0, 1, 2), nil, 3},
		{"one at a time", at(0, 0.2, 0.4, 0.6), lat, 1},
		{"all at once", at(0.5, 0.5, 0.5, 0.5, 0.5), lat, 5},
		// 0.1 s each: at 0.08 three overlap; the one at 0.3 is alone.
		{"peak of a burst", at(0, 0.04, 0.08, 0.3), lat, 3},
		// One ends exactly as the next starts: its connection is free.
		{"end meets start", at(0, 0.1), lat, 1},
		// Unsorted input: the peak does not depend on item order.
		{"unsorted", at(0.08, 0.3, 0, 0.04), lat, 3},
		// Longer outputs keep requests in flight longer.
		{"long outputs overlap", []Item{{AtS: 0, OutputLen: 51}, {AtS: 0.5, OutputLen: 51}, {AtS: 0.9, OutputLen: 51}}, lat, 3},
	}
	for _, tt := range tests {
		if got := PoolSize(tt.items, tt.lat); got != tt.want {
			t.Errorf("%s: PoolSize = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// A later turn starts its gap after its parent's expected end, however
// early its own AtS says: two sessions of two turns never need more than
// two connections, and a gap of zero lets a turn take its parent's.
func TestPoolSizeSessions(t *testing.T) {
	lat := &Latency{FirstTokenS: 0.01, PerTokenS: 0.01} // OutputLen 5: 0.1 s with the headroom
	items := []Item{
		{AtS: 0, OutputLen: 5, Session: &Turn{Number: 1, Parent: -1}},
		{AtS: 0, OutputLen: 5, Session: &Turn{Number: 1, Parent: -1}},
		{AtS: 0, OutputLen: 5, Session: &Turn{Number: 2, Parent: 0, GapS: 0}},
		{AtS: 0, OutputLen: 5, Session: &Turn{Number: 2, Parent: 1, GapS: 0.5}},
	}
	if got := PoolSize(items, lat); got != 2 {
		t.Errorf("PoolSize = %d, want 2", got)
	}
	// As independent requests, all four would be in flight at 0.
	for i := range items {
		items[i].Session = nil
	}
	if got := PoolSize(items, lat); got != 4 {
		t.Errorf("without sessions: PoolSize = %d, want 4", got)
	}
}

func TestLatencyOf(t *testing.T) {
	lat := Latency{FirstTokenS: 0.02, PerTokenS: 0.001}
	for _, tt := range []struct {
		outputLen int
		want      float64
	}{{0, 0.02}, {1, 0.02}, {11, 0.03}} {
		if got := lat.Of(&Item{OutputLen: tt.outputLen}); got < tt.want-1e-12 || got > tt.want+1e-12 {
			t.Errorf("OutputLen %d: %v, want %v", tt.outputLen, got, tt.want)
		}
	}
}
