package cpu

import (
	"syscall"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// BenchmarkDecode32 is the tiny preset's sizing target: one step decodes one
// token for each of 32 sequences whose contexts run from about 100 to 300
// tokens, sampling with the harness's defaults (temperature 0.7, top_p 0.9,
// top_k 50) or greedily. It reports tokens/s (wall clock) and tokens per
// CPU-second (process CPU time, which stays meaningful when other processes
// share the cores).
func BenchmarkDecode32(b *testing.B) {
	cfg, _ := model.Preset("tiny")
	w, err := model.InitRandom(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	const numSeqs, blockSize = 32, 16
	blocksPerSeq := cfg.MaxSeqLen / blockSize
	d, err := New(w, device.KVConfig{NumBlocks: numSeqs * blocksPerSeq, BlockSizeTokens: blockSize}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for _, bc := range []struct {
		name   string
		params sample.Params
	}{
		{"t0.7_p0.9_k50", sample.Params{Temperature: 0.7, TopP: 0.9, TopK: 50, Seed: 1}},
		{"greedy", sample.Params{TopP: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			batch := &device.Batch{Seqs: make([]device.Seq, numSeqs)}
			for i := range batch.Seqs {
				table := make([]int32, blocksPerSeq)
				for j := range table {
					table[j] = int32(i*blocksPerSeq + j)
				}
				batch.Seqs[i] = device.Seq{SeqID: uint64(i), Tokens: []int32{int32(i * 100)}, BlockTable: table,
					Sample: true, Params: bc.params, BannedToken: -1}
			}
			out := make([]device.Sampled, 0, numSeqs)
			cpu0 := cpuTime()
			step := 0
			for b.Loop() {
				for i := range batch.Seqs {
					s := &batch.Seqs[i]
					s.StartPos = 100 + 6*i + step%100 // contexts of 100..385
					s.SampleIndex = step
				}
				var err error
				if out, err = d.Forward(batch, out); err != nil {
					b.Fatal(err)
				}
				for i := range batch.Seqs {
					batch.Seqs[i].Tokens[0] = out[i].Token
				}
				step++
			}
			tokens := float64(step * numSeqs)
			b.ReportMetric(tokens/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(tokens/(cpuTime()-cpu0).Seconds(), "tok/cpu-s")
		})
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPrefill256 is one 256-token prompt in one chunk, sampled at its
// end: the device's share of the time to first token.
func BenchmarkPrefill256(b *testing.B) {
	cfg, _ := model.Preset("tiny")
	w, err := model.InitRandom(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(w, device.KVConfig{NumBlocks: 16, BlockSizeTokens: 16}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	prompt := make([]int32, 256)
	for i := range prompt {
		prompt[i] = int32(i * 191 % cfg.VocabSize)
	}
	table := make([]int32, 16)
	for i := range table {
		table[i] = int32(i)
	}
	batch := &device.Batch{Seqs: []device.Seq{{Tokens: prompt, BlockTable: table, Sample: true, BannedToken: -1,
		Params: sample.Params{Temperature: 0.7, TopP: 0.9, TopK: 50, Seed: 1}}}}
	out := make([]device.Sampled, 0, 1)
	for b.Loop() {
		if out, err = d.Forward(batch, out); err != nil {
			b.Fatal(err)
		}
	}
}
