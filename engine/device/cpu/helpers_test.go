package cpu

import (
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

const testBlockSize = 16

// newTestDevice builds a device over w with room for numSeqs full-length
// sequences.
func newTestDevice(t testing.TB, w *model.Weights, numSeqs int, opts Options) *Device {
	t.Helper()
	blocks := numSeqs * ((w.Config.MaxSeqLen + testBlockSize - 1) / testBlockSize)
	d, err := New(w, device.KVConfig{NumBlocks: blocks, BlockSizeTokens: testBlockSize}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// blockTable gives sequence i of a device made by newTestDevice its own
// blocks, in a scrambled order so that logical and physical blocks differ.
func blockTable(cfg model.Config, i, numSeqs int) []int32 {
	perSeq := (cfg.MaxSeqLen + testBlockSize - 1) / testBlockSize
	table := make([]int32, perSeq)
	for j := range table {
		table[j] = int32(((j*7+3)%perSeq)*numSeqs + i)
	}
	return table
}

// greedy is the argmax rule through the reference sampler.
func greedy(logits []float32) int32 {
	return sample.NewSampler(len(logits)).Sample(logits, sample.Params{}, 0, -1)
}

// runSingle feeds one sequence alone: the prompt as chunks ending at each of
// stops (the last stop must be len(prompt)-1), then numDecode greedy decode
// steps. It returns the logits at each stop and after each decode step, and
// the decoded tokens.
func runSingle(t testing.TB, d *Device, table []int32, prompt []int32, stops []int, numDecode int) (rows [][]float32, tokens []int32) {
	t.Helper()
	pos := 0
	var logits []float32
	for _, stop := range stops {
		b := &device.Batch{Seqs: []device.Seq{{SeqID: 1, Tokens: prompt[pos : stop+1], StartPos: pos, BlockTable: table, Sample: true, BannedToken: -1}}}
		var err error
		if logits, err = d.ForwardLogits(b, logits); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, append([]float32(nil), logits...))
		pos = stop + 1
	}
	for range numDecode {
		tok := greedy(rows[len(rows)-1])
		tokens = append(tokens, tok)
		b := &device.Batch{Seqs: []device.Seq{{SeqID: 1, Tokens: []int32{tok}, StartPos: pos, BlockTable: table, Sample: true, BannedToken: -1}}}
		var err error
		if logits, err = d.ForwardLogits(b, logits); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, append([]float32(nil), logits...))
		pos++
	}
	return rows, tokens
}
