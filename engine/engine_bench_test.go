package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/device"
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
			steps0 := e.Stats().NumSteps
			elapsed := runStreams(b, e, numStreams, 100)
			steps := e.Stats().NumSteps - steps0
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(steps), "ns/step")
			b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
		})
	}
}

// runStreams submits numStreams requests of maxTokens tokens b.N times,
// each with a reader draining its stream, and returns the wall time spent
// until all of them finished.
func runStreams(b *testing.B, e *Engine, numStreams, maxTokens int) time.Duration {
	var wg sync.WaitGroup
	var elapsed time.Duration
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
	return elapsed
}

// syncSim is the sim device as a plain synchronous GPU would be: each
// Forward is a Submit and a Collect, so the engine's work between steps adds
// to the step (the sim's own Forward hides it by anchoring to the previous
// step; this does not). It is not an AsyncDevice.
type syncSim struct{ d *sim.Device }

func (s syncSim) Name() string { return "sim" }
func (s syncSim) Close() error { return s.d.Close() }
func (s syncSim) Forward(b *device.Batch, out []device.Sampled) ([]device.Sampled, error) {
	if err := s.d.Submit(b); err != nil {
		return out, err
	}
	return s.d.Collect(out)
}

// BenchmarkOverlapStepTime measures the time per decode step (a stream's
// per-token time) with a sim device of fixed step time: synchronously it is
// the step plus the engine's own work (scheduling, batch building, token
// delivery, readers' wake-ups); with overlap the engine works while the
// device runs, so it is the step time itself (step_ratio 1.00) as long as the
// engine's work per step is shorter than the step.
func BenchmarkOverlapStepTime(b *testing.B) {
	const step = time.Millisecond
	for _, numStreams := range []int{1, 256} {
		for _, overlap := range []bool{false, true} {
			b.Run(fmt.Sprintf("streams=%d/overlap=%v", numStreams, overlap), func(b *testing.B) {
				d, err := sim.New(sim.Options{StepDuration: step, VocabSize: testVocab, EOS: testEOS})
				if err != nil {
					b.Fatal(err)
				}
				var dev device.Device = d
				if !overlap {
					dev = syncSim{d}
				}
				cfg := baseConfig()
				cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens = numStreams, 4096
				cfg.MaxModelLen, cfg.NumBlocks, cfg.BlockSizeTokens = 1024, numStreams*8+8, 16
				cfg.OverlapSchedule = overlap
				e, err := New(cfg, dev)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				steps0 := e.Stats().NumSteps
				elapsed := runStreams(b, e, numStreams, 50)
				perStep := float64(elapsed.Nanoseconds()) / float64(e.Stats().NumSteps-steps0)
				b.ReportMetric(perStep, "ns/step")
				b.ReportMetric(perStep/float64(step.Nanoseconds()), "step_ratio")
			})
		}
	}
}
