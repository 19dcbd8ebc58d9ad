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

// Back-to-back Forwards end exactly StepDuration apart: each step counts from
// the previous step's deadline, so the timer's wake-up latency never adds up.
func TestForwardStepsDoNotDrift(t *testing.T) {
	const step, n = 20 * time.Millisecond, 5
	d := mustNew(t, Options{VocabSize: 100, EOS: 99, StepDuration: step})
	defer d.Close()
	b := decode(1, 7, 1)
	var first time.Time
	for i := range n {
		prevEnd, called := d.lastEnd, time.Now()
		out, err := d.Forward(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && called.Sub(prevEnd) >= step/2 {
			t.Skip("the machine is too loaded to call Forward straight back")
		}
		if i == 0 {
			first = d.lastDeadline
		}
		if time.Now().Before(d.lastDeadline) {
			t.Fatalf("step %d returned before its deadline", i)
		}
		b = decode(1, out[0].Token, i+2)
	}
	if got, want := d.lastDeadline.Sub(first), (n-1)*step; got != want {
		t.Fatalf("%d steps spanned %v, want exactly %v", n, got, want)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestForwardReusesOutAndDoesNotAllocate(t *testing.T) {
	d := mustNew(t, Options{VocabSize: 100, EOS: 99})
	b := batch()
	out := make([]device.Sampled, 0, len(b.Seqs))
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if out, err = d.Forward(b, out); err != nil {
			t.Fatal(err)
		}
		b.Seqs[0].Tokens[0] = out[0].Token // the decode feeds what it sampled
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per forward", allocs)
	}
}

// decode is a one-sequence decode step feeding tok at sample index i.
func decode(id uint64, tok int32, i int) *device.Batch {
	return &device.Batch{Seqs: []device.Seq{
		{SeqID: id, Tokens: []int32{tok}, StartPos: 10 + i, Sample: true, SampleIndex: i, Params: sample.Params{Seed: id}, BannedToken: -1},
	}}
}

// Submitted steps queue one behind the other like kernels on a stream, and
// give the tokens Forward would.
func TestSubmitCollect(t *testing.T) {
	const step = 2 * time.Millisecond
	d := mustNew(t, Options{VocabSize: 100, EOS: 99, StepDuration: step})
	start := time.Now()
	if err := d.Submit(batch()); err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(decode(1, device.FromPrevious, 4)); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) >= step {
		t.Skip("the machine is too loaded to tell a queued submit from a blocking one")
	}
	if err := d.Submit(decode(1, device.FromPrevious, 5)); err == nil {
		t.Fatal("a third step in flight was accepted")
	}
	if _, err := d.Forward(batch(), nil); err == nil {
		t.Fatal("Forward with steps in flight was accepted")
	}
	first, err := d.Collect(nil)
	if err != nil {
		t.Fatal(err)
	}
	firstAt := time.Since(start)
	second, err := d.Collect(nil)
	if err != nil {
		t.Fatal(err)
	}
	secondAt := time.Since(start)
	if len(first) != 3 || first[0].Token != d.Token(1, 3, -1) || first[2].Token != d.Token(2, 0, -1) {
		t.Fatalf("first step sampled %+v", first)
	}
	if len(second) != 1 || second[0].Token != d.Token(1, 4, -1) {
		t.Fatalf("second step sampled %+v", second)
	}
	if firstAt < step+25*d.opts.PrefillPerToken || secondAt < 2*step {
		t.Fatalf("steps ended at %v and %v, before %v and %v", firstAt, secondAt, step, 2*step)
	}
	if _, err := d.Collect(nil); err == nil {
		t.Fatal("Collect with nothing submitted succeeded")
	}
}

// The sim checks the engine's side of the FromPrevious contract.
func TestFedTokensMustMatchThePreviousStep(t *testing.T) {
	prev := mustNew(t, Options{VocabSize: 100, EOS: 99}).Token(1, 3, -1)
	for _, tc := range []struct {
		name    string
		next    *device.Batch
		wantErr bool
	}{
		{"FromPrevious of a sequence that sampled", decode(1, device.FromPrevious, 4), false},
		{"the token it sampled", decode(1, prev, 4), false},
		{"another token", decode(1, (prev+1)%99, 4), true},
		{"FromPrevious of a sequence that did not sample", decode(2, device.FromPrevious, 1), true},
		{"FromPrevious in a prefill chunk", &device.Batch{Seqs: []device.Seq{{SeqID: 1, Tokens: []int32{device.FromPrevious, 5}, BannedToken: -1}}}, true},
		{"no token", &device.Batch{Seqs: []device.Seq{{SeqID: 1, BannedToken: -1}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustNew(t, Options{VocabSize: 100, EOS: 99})
			if err := d.Submit(decode(1, 7, 3)); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Collect(nil); err != nil {
				t.Fatal(err)
			}
			_, err := d.Forward(tc.next, nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}
