package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// generateAsync prefills two prompts then decodes numDecode tokens each with
// two steps always in flight, every decode fed FromPrevious.
func generateAsync(t *testing.T, a *Async, prompts [][]int32, params []sample.Params, numDecode int) [][]int32 {
	t.Helper()
	step := func(k int) *device.Batch {
		b := &device.Batch{}
		for i, p := range prompts {
			s := device.Seq{SeqID: uint64(i + 1), StartPos: len(p) + k - 1, BlockTable: blockTable(smallConfig, i, len(prompts)),
				Sample: true, Params: params[i], SampleIndex: k, BannedToken: -1}
			s.Tokens = []int32{device.FromPrevious}
			if k == 0 {
				s.Tokens, s.StartPos = p, 0
			}
			b.Seqs = append(b.Seqs, s)
		}
		return b
	}
	got := make([][]int32, len(prompts))
	collect := func() {
		out, err := a.Collect(nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			got[i] = append(got[i], out[i].Token)
		}
	}
	if err := a.Submit(step(0)); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= numDecode; k++ {
		if err := a.Submit(step(k)); err != nil {
			t.Fatal(err)
		}
		collect()
	}
	collect()
	return got
}

// TestAsyncMatchesForward: decoding with FromPrevious tokens and two steps in
// flight gives the tokens synchronous Forward calls give when fed the
// sampled tokens explicitly, greedy and seeded.
func TestAsyncMatchesForward(t *testing.T) {
	w, err := model.InitRandom(smallConfig, 11)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 11))
	prompts := [][]int32{randomPrompt(rng, 13, 500), randomPrompt(rng, 30, 500)}
	params := []sample.Params{{}, {Temperature: 1.1, TopK: 50, TopP: 0.9, Seed: 5}}
	const numDecode = 8

	ref := newTestDevice(t, w, len(prompts), Options{})
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		table := blockTable(smallConfig, i, len(prompts))
		tokens, pos := p, 0
		for k := 0; k <= numDecode; k++ {
			b := &device.Batch{Seqs: []device.Seq{{SeqID: 1, Tokens: tokens, StartPos: pos, BlockTable: table,
				Sample: true, Params: params[i], SampleIndex: k, BannedToken: -1}}}
			out, err := ref.Forward(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			want[i] = append(want[i], out[0].Token)
			pos += len(tokens)
			tokens = []int32{out[0].Token}
		}
	}

	a := NewAsync(newTestDevice(t, w, len(prompts), Options{}))
	defer a.Close()
	got := generateAsync(t, a, prompts, params, numDecode)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("sequence %d: async %v, sync %v", i, got[i], want[i])
		}
	}
}

func TestAsyncRejectsMisuse(t *testing.T) {
	w, err := model.InitRandom(smallConfig, 12)
	if err != nil {
		t.Fatal(err)
	}
	a := NewAsync(newTestDevice(t, w, 1, Options{}))
	table := blockTable(smallConfig, 0, 1)
	prefill := &device.Batch{Seqs: []device.Seq{{SeqID: 1, Tokens: []int32{1, 2, 3}, BlockTable: table, Sample: true, BannedToken: -1}}}
	orphan := &device.Batch{Seqs: []device.Seq{{SeqID: 2, Tokens: []int32{device.FromPrevious}, StartPos: 3, BlockTable: table, Sample: true, BannedToken: -1}}}

	if _, err := a.Collect(nil); err == nil {
		t.Error("Collect with nothing submitted succeeded")
	}
	if err := a.Submit(orphan); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Collect(nil); err == nil {
		t.Error("a FromPrevious token of a sequence that never sampled was accepted")
	}
	for range maxAsyncSteps {
		if err := a.Submit(prefill); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Submit(prefill); err == nil {
		t.Error("a third step in flight was accepted")
	}
	if _, err := a.Forward(prefill, nil); err == nil {
		t.Error("Forward with steps in flight was accepted")
	}
	// Close with steps in flight lets them finish; twice is harmless.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Submit(prefill); err == nil {
		t.Error("Submit after Close succeeded")
	}
}
