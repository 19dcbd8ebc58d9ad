package sim

import (
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/sample"
)

func mustNew(t *testing.T, opts Options) *Device {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no vocabulary", Options{VocabSize: 0}},
		{"one-token vocabulary", Options{VocabSize: 1}},
		{"negative step", Options{VocabSize: 10, StepDuration: -time.Millisecond}},
		{"negative prefill cost", Options{VocabSize: 10, PrefillPerToken: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.opts); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestTokens(t *testing.T) {
	const eos = 3
	plain := mustNew(t, Options{VocabSize: 4, EOS: eos})
	eosAt5 := mustNew(t, Options{VocabSize: 4, EOS: eos, EOSAt: func(_ uint64, i int) bool { return i == 5 }})
	for _, tc := range []struct {
		name   string
		d      *Device
		index  int
		banned int32
		check  func(tok int32) bool
	}{
		{"never EOS unasked", plain, 5, -1, func(tok int32) bool { return tok != eos && tok >= 0 && tok < 4 }},
		{"banned token avoided", plain, 5, plain.Token(9, 5, -1), func(tok int32) bool { return tok != plain.Token(9, 5, -1) && tok != eos }},
		{"EOS where asked", eosAt5, 5, -1, func(tok int32) bool { return tok == eos }},
		{"EOS banned (min_tokens) wins over EOSAt", eosAt5, 5, eos, func(tok int32) bool { return tok != eos }},
		{"EOSAt only at its index", eosAt5, 4, -1, func(tok int32) bool { return tok == plain.Token(9, 4, -1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tok := tc.d.Token(9, tc.index, tc.banned); !tc.check(tok) {
				t.Fatalf("token %d", tok)
			}
		})
	}
}

func TestTokensAreAPureFunctionOfSeedAndIndex(t *testing.T) {
	d := mustNew(t, Options{VocabSize: 50257, EOS: 50256})
	distinct := map[int32]bool{}
	for i := range 100 {
		a, b := d.Token(42, i, -1), d.Token(42, i, -1)
		if a != b {
			t.Fatalf("index %d: %d then %d", i, a, b)
		}
		distinct[a] = true
	}
	if len(distinct) < 90 {
		t.Fatalf("only %d distinct tokens in 100 draws", len(distinct))
	}
	if d.Token(42, 0, -1) == d.Token(43, 0, -1) && d.Token(42, 1, -1) == d.Token(43, 1, -1) {
		t.Fatal("different seeds draw the same tokens")
	}
}

func batch() *device.Batch {
	return &device.Batch{Seqs: []device.Seq{
		{SeqID: 1, Tokens: []int32{7}, StartPos: 10, Sample: true, SampleIndex: 3, Params: sample.Params{Seed: 1}, BannedToken: -1},
		{SeqID: 2, Tokens: make([]int32, 20), Sample: false, BannedToken: -1},
		{SeqID: 3, Tokens: make([]int32, 5), StartPos: 20, Sample: true, Params: sample.Params{Seed: 2}, WantLogprob: true, BannedToken: -1},
	}}
}

func TestForward(t *testing.T) {
	const step, perToken = 2 * time.Millisecond, 50 * time.Microsecond
	d := mustNew(t, Options{VocabSize: 100, EOS: 99, StepDuration: step, PrefillPerToken: perToken})
	b := batch()
	start := time.Now()
	out, err := d.Forward(b, nil)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	want := []device.Sampled{{Token: d.Token(1, 3, -1)}, {Token: -1}, {Token: d.Token(2, 0, -1), Logprob: -1}}
	if len(out) != len(want) {
		t.Fatalf("got %d results for %d sequences", len(out), len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("result %d = %+v, want %+v", i, out[i], want[i])
		}
	}
	// 25 prefill tokens (the decode's token is free): the step must not end early.
	if minimum := step + 25*perToken; elapsed < minimum {
		t.Fatalf("forward returned after %v, before its %v", elapsed, minimum)
	}
}

func TestForwardReusesOutAndDoesNotAllocate(t *testing.T) {
	d := mustNew(t, Options{VocabSize: 100, EOS: 99})
	b := batch()
	out := make([]device.Sampled, 0, len(b.Seqs))
	allocs := testing.AllocsPerRun(100, func() {
		out, _ = d.Forward(b, out)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per forward", allocs)
	}
}
