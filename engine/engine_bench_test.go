package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/device/sim"
)

// BenchmarkDecodeStep measures the engine's own cost per step (the sim device
// takes no time) while numStreams readers each take 100 tokens: scheduling,
// batch building, token delivery, and the readers' wake-ups on the same cores.
func BenchmarkDecodeStep(b *testing.B) {
	for _, numStreams := range []int{1, 32, 256, 2000} {
		b.Run(fmt.Sprintf("streams=%d", numStreams), func(b *testing.B) {
			d, err := sim.New(sim.Options{VocabSize: testVocab, EOS: testEOS})
			if err != nil {
				b.Fatal(err)
			}
			cfg := baseConfig()
			cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens = numStreams, 4096
			cfg.MaxModelLen, cfg.NumBlocks, cfg.BlockSizeTokens = 1024, numStreams*8+8, 16
			e, err := New(cfg, d)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			const maxTokens = 100
			var wg sync.WaitGroup
			var elapsed time.Duration
			steps0 := e.Stats().NumSteps
			for range b.N {
				start := time.Now()
				for i := range numStreams {
					s, err := e.Submit(&Request{PromptTokens: prompt(i, 8), MaxTokens: maxTokens, IgnoreEOS: true})
					if err != nil {
						b.Fatal(err)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range s.Outputs() {
						}
					}()
				}
				wg.Wait()
				elapsed += time.Since(start)
			}
			steps := e.Stats().NumSteps - steps0
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(steps), "ns/step")
			b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
		})
	}
}
