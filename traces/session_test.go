package traces

import (
	"slices"
	"strings"
	"testing"
)

func TestParents(t *testing.T) {
	tr, err := Load("testdata/qwen_sample.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Sorted: 1002, 1001, 1003 (continues 1001), 1004.
	if got := Parents(tr.Rows); !slices.Equal(got, []int{-1, -1, 1, -1}) {
		t.Errorf("parents = %v, want [-1 -1 1 -1]", got)
	}
	if !HasSessions(tr.Rows) {
		t.Error("the sample has a second turn")
	}
	// --n 2 reads lines 1-2 (1001, 1002): no second turn among them.
	head, err := Load("testdata/qwen_sample.jsonl", Options{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	if HasSessions(head.Rows) {
		t.Error("first two rows: no turn continues another")
	}
	// A parent cut off by --n makes its child a first turn.
	rows := []Row{{HasChat: true, ChatID: 5, ParentChatID: 4}, {HasChat: true, ChatID: 6, ParentChatID: 5}}
	if got := Parents(rows); !slices.Equal(got, []int{-1, 0}) {
		t.Errorf("parents = %v, want [-1 0]", got)
	}
	// Formats without conversation fields never link (zero ids are not ids).
	if got := Parents([]Row{{}, {}}); !slices.Equal(got, []int{-1, -1}) {
		t.Errorf("rows without chat fields: parents = %v", got)
	}
}

func TestSyntheticSessions(t *testing.T) {
	o := SessionOptions{NumSessions: 3, NumTurns: 3, ThinkTimeS: 2, RatePerS: 4, InputLen: 100, TurnInputLen: 10, OutputLen: 20}
	tr, err := SyntheticSessions(o)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != FormatSessions || len(tr.Rows) != 9 {
		t.Fatalf("format %q, %d rows", tr.Format, len(tr.Rows))
	}
	parents := Parents(tr.Rows)
	for i, r := range tr.Rows {
		s, k := int(r.ChatID)/3, int(r.ChatID)%3
		if r.Turn != k+1 || r.TimestampS != float64(s)*0.25+float64(k)*2 || r.OutputLen != 20 {
			t.Errorf("row %d: %+v", i, r)
		}
		if want := 100 + k*30; r.InputLen != want {
			t.Errorf("row %d: input %d, want %d", i, r.InputLen, want)
		}
		if k == 0 {
			if parents[i] != -1 {
				t.Errorf("row %d: first turn has parent %d", i, parents[i])
			}
			continue
		}
		p := tr.Rows[parents[i]]
		if p.ChatID != r.ChatID-1 || r.TimestampS-p.TimestampS != 2 {
			t.Errorf("row %d continues %+v", i, p)
		}
		// The new input is what the prompt adds beyond the history.
		if r.InputLen-p.InputLen-p.OutputLen != 10 {
			t.Errorf("row %d adds %d tokens", i, r.InputLen-p.InputLen-p.OutputLen)
		}
	}
	if o.LastPromptLen() != 160 {
		t.Errorf("last prompt %d, want 160", o.LastPromptLen())
	}
	// Rate 0 and think time 0: everything at t=0, children still after parents.
	o.RatePerS, o.ThinkTimeS = 0, 0
	tr, err = SyntheticSessions(o)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range Parents(tr.Rows) {
		if tr.Rows[i].Turn > 1 && (p < 0 || p >= i) {
			t.Errorf("row %d: parent %d", i, p)
		}
	}

	bad := []struct {
		mutate func(*SessionOptions)
		flag   string
	}{
		{func(o *SessionOptions) { o.NumSessions = 0 }, "--sessions"},
		{func(o *SessionOptions) { o.NumTurns = 0 }, "--turns"},
		{func(o *SessionOptions) { o.ThinkTimeS = -1 }, "--think-time-s"},
		{func(o *SessionOptions) { o.RatePerS = -1 }, "--session-rate"},
		{func(o *SessionOptions) { o.InputLen = 0 }, "--session-input-len"},
		{func(o *SessionOptions) { o.TurnInputLen = 0 }, "--session-turn-input-len"},
		{func(o *SessionOptions) { o.OutputLen = 0 }, "--session-output-len"},
	}
	for _, b := range bad {
		o := SessionOptions{NumSessions: 1, NumTurns: 2, InputLen: 1, TurnInputLen: 1, OutputLen: 1}
		b.mutate(&o)
		if _, err := SyntheticSessions(o); err == nil || !strings.HasPrefix(err.Error(), b.flag+" ") {
			t.Errorf("%s: err = %v", b.flag, err)
		}
	}
}
