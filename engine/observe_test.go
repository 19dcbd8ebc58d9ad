package engine

import (
	"sync"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device/sim"
	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// phaseEvent is one observer call.
type phaseEvent struct {
	isBegin bool
	p       phase.Phase
	b       phase.Batch
}

type recordingObserver struct {
	mu     sync.Mutex
	events []phaseEvent
}

func (r *recordingObserver) Begin(p phase.Phase, b *phase.Batch) { r.add(true, p, b) }
func (r *recordingObserver) End(p phase.Phase, b *phase.Batch)   { r.add(false, p, b) }

func (r *recordingObserver) add(isBegin bool, p phase.Phase, b *phase.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, phaseEvent{isBegin, p, *b})
}

// TestObserverSeesEveryStep runs two requests (prompts of 10 and 20 tokens,
// 3 new tokens each, chunk size 16) and checks the phases the loop reports:
// properly nested, every step's shape right, every submitted step collected.
func TestObserverSeesEveryStep(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		obs := &recordingObserver{}
		cfg := baseConfig()
		cfg.Observer = obs
		cfg.OverlapSchedule = overlap
		e := newEngine(t, cfg, newSim(t, sim.Options{}))
		var streams []*Stream
		for i, n := range []int{10, 20} {
			s, err := e.Submit(&Request{PromptTokens: prompt(100*i+1, n), MaxTokens: 3, HasSeed: true, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, s)
		}
		for _, s := range streams {
			collect(t, s)
		}
		e.Close()

		obs.mu.Lock()
		events := obs.events
		obs.mu.Unlock()
		var open []phase.Phase
		forwards := map[int64]phase.Batch{}
		emitted := map[int64]bool{}
		numWaits := 0
		for i, ev := range events {
			if ev.isBegin {
				if ev.p == phase.Step && len(open) != 0 || ev.p != phase.Step && (len(open) == 0 || open[0] != phase.Step) {
					t.Fatalf("overlap=%v event %d: %v begins inside %v", overlap, i, ev.p, open)
				}
				open = append(open, ev.p)
				continue
			}
			if len(open) == 0 || open[len(open)-1] != ev.p {
				t.Fatalf("overlap=%v event %d: %v ends, open %v", overlap, i, ev.p, open)
			}
			open = open[:len(open)-1]
			switch ev.p {
			case phase.Forward:
				forwards[ev.b.Step] = ev.b
			case phase.Emit:
				if _, ok := forwards[ev.b.Step]; !ok || emitted[ev.b.Step] {
					t.Errorf("overlap=%v: emit of step %d (forwarded %v, emitted before %v)", overlap, ev.b.Step, ok, emitted[ev.b.Step])
				}
				emitted[ev.b.Step] = true
			case phase.Wait:
				numWaits++
			}
		}
		if len(open) != 0 {
			t.Errorf("overlap=%v: phases left open %v", overlap, open)
		}
		if len(emitted) != len(forwards) || len(forwards) == 0 {
			t.Errorf("overlap=%v: %d steps forwarded, %d emitted", overlap, len(forwards), len(emitted))
		}
		if !overlap && numWaits != 0 {
			t.Errorf("synchronous engine reported %d waits", numWaits)
		}
		if overlap && numWaits == 0 {
			t.Error("overlap engine reported no waits")
		}
		// When the second request arrives before the loop's first intake (the
		// usual case), step 1 prefills the 10-token prompt and 16 of the
		// 20-token one (chunk size) and step 2 the last 4 of the 20-token
		// prompt while the first request decodes. On a loaded machine the loop
		// may run a step or two with the first request alone; then the
		// 20-token prompt still goes in as a chunk of 16 and one of 4.
		first, second := forwards[1], forwards[2]
		if first.NumSeqs == 2 {
			if first != (phase.Batch{Step: 1, NumSeqs: 2, NumPrefillTokens: 26}) {
				t.Errorf("overlap=%v: step 1 %+v", overlap, first)
			}
			if second.NumSeqs != 2 || second.NumDecodeSeqs != 1 || second.NumPrefillTokens != 4 {
				t.Errorf("overlap=%v: step 2 %+v", overlap, second)
			}
		} else {
			if first != (phase.Batch{Step: 1, NumSeqs: 1, NumPrefillTokens: 10}) {
				t.Errorf("overlap=%v: step 1 alone %+v", overlap, first)
			}
			var chunks []int
			for step := int64(2); step <= int64(len(forwards)); step++ {
				if n := forwards[step].NumPrefillTokens; n > 0 {
					chunks = append(chunks, n)
				}
			}
			if len(chunks) != 2 || chunks[0] != 16 || chunks[1] != 4 {
				t.Errorf("overlap=%v: the 20-token prompt went in as chunks %v, want [16 4]", overlap, chunks)
			}
		}
		numTokens := 0
		for _, f := range forwards {
			numTokens += f.NumPrefillTokens + f.NumDecodeSeqs
		}
		// 30 prompt tokens are prefilled; of the 6 generated tokens the last
		// of each request is never fed back.
		if numTokens != 30+4 {
			t.Errorf("overlap=%v: %d tokens fed over all steps, want 34", overlap, numTokens)
		}
	}
}
