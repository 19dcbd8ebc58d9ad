//go:build cudalab

package cuda

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/ebitengine/purego"
)

func init() { labHooks = append(labHooks, openDeviceStats) }

// deviceStats counts where a serving run's time goes, for finding what the
// product path pays that the device's own benchmark does not:
// ROSEINFER_CUDA_STATS=1 prints a summary to stderr when the device closes,
// =2 also one line per step as it is collected (times in seconds since the
// process started, like GODEBUG=gctrace=1's). Off (nil), nothing is
// measured. GPU times come from a pair of timing events around each step.
type deviceStats struct {
	noHook
	d           *Device
	stage       [numStages]stageStats
	perStep     bool
	w           io.Writer
	lastCollect time.Time // when the previous Collect returned

	prewarm            time.Duration
	prewarmPlans       int
	prewarmGraphs      int
	plans0, tuned0     int           // cuBLASLt counters when prewarm ended:
	planTime0          time.Duration // what came after was built on the serving path
	steps              [numStepKinds]int
	gpu                [numStepKinds]time.Duration
	submit, submitMax  time.Duration
	wait, waitMax      time.Duration
	firstStep, lastEnd time.Time
	slow               []slowStep // the slowest Submits, slowest first
	n                  int
}

// stageStats is what the stats know of the step a stage holds.
type stageStats struct {
	start, end     uintptr // timing events around the step's GPU work
	kind           stepKind
	submitAt       time.Time     // when Submit began
	submitHost     time.Duration // how long Submit took
	gap            time.Duration // from the last Collect's return to this Submit
	plans0, tuned0 int           // cuBLASLt counters when Submit began
}

// slowStep is one step's Submit, kept when it was among the slowest.
type slowStep struct {
	host                 time.Duration
	at                   time.Time
	kind                 stepKind
	nTok, nSeq, nSample  int
	plans, tuned, seqNum int
}

type stepKind int

const (
	stepGraph        stepKind = iota // a captured decode graph replayed
	stepGraphCapture                 // a decode graph captured, then launched
	stepGraphFirst                   // a graph size's first step, run eagerly
	stepDecodeEager                  // decode, no graph (graphs off, or too large)
	stepPrefill
	stepMixed
	numStepKinds
)

var stepKindNames = [numStepKinds]string{"graph", "graph-capture", "graph-first-eager", "decode-eager", "prefill", "mixed"}

const maxSlowSteps = 8

// openDeviceStats installs the stats hook when ROSEINFER_CUDA_STATS is set.
func openDeviceStats(d *Device) error {
	v := os.Getenv("ROSEINFER_CUDA_STATS")
	if v == "" || v == "0" {
		return nil
	}
	s := &deviceStats{d: d, perStep: v == "2", w: os.Stderr}
	for i := range s.stage {
		for _, e := range []*uintptr{&s.stage[i].start, &s.stage[i].end} {
			var err error
			if *e, err = d.g.drv.eventCreate(0); err != nil {
				s.close()
				return err
			}
		}
	}
	s.prewarmed(d.instr.prewarmTook, d.instr.prewarmGraphs, d.g.blas)
	d.addHook(s)
	return nil
}

// processStart is (within the package initialisation) when the process
// started: step times are printed relative to it, as GODEBUG=gctrace=1
// prints GC cycles, so slow steps can be matched to collections.
var processStart = time.Now()

// sinceStart is t in seconds since processStart.
func sinceStart(t time.Time) float64 { return t.Sub(processStart).Seconds() }

// stepKindOf classifies the step about to be submitted.
func (d *Device) stepKindOf(p *stepPlan) stepKind {
	switch {
	case p.graphBatch > 0:
		key := d.graphKey(p)
		gr := d.graphs.byKey[key]
		switch {
		case gr == nil && !d.graphSizeSeen(key):
			return stepGraphFirst
		case gr == nil:
			return stepGraphCapture
		case gr.exec == 0:
			return stepGraphCapture
		}
		return stepGraph
	case p.chunkSeqs > 0 && p.oneTokenSeqs > 0:
		return stepMixed
	case p.chunkSeqs > 0:
		return stepPrefill
	}
	return stepDecodeEager
}

func (s *deviceStats) prewarmed(took time.Duration, graphs int, b *blasLt) {
	plans := b.plansBuilt
	s.prewarm, s.prewarmPlans, s.prewarmGraphs = took, plans, graphs
	s.plans0, s.tuned0, s.planTime0 = b.plansBuilt, b.plansTuned, b.planTime
	fmt.Fprintf(s.w, "cuda stats: prewarm %.3f s: %d cuBLASLt plans (%d tuned, %.3f s), %d decode graphs\n",
		took.Seconds(), plans, b.plansTuned, b.planTime.Seconds(), graphs)
}

// stepBegin notes when the Submit began, the gap since the last Collect
// returned (the engine's own host work, and any stall, before it), the
// step's kind and the cuBLASLt counters, and starts the GPU timing.
func (s *deviceStats) stepBegin(st *staging) error {
	x := &s.stage[st.index]
	x.submitAt, x.gap = time.Now(), 0
	if !s.lastCollect.IsZero() && x.submitAt.After(s.lastCollect) {
		x.gap = x.submitAt.Sub(s.lastCollect)
	}
	x.kind = s.d.stepKindOf(&st.plan)
	x.plans0, x.tuned0 = s.d.g.blas.plansBuilt, s.d.g.blas.plansTuned
	return s.d.g.drv.eventRecord(x.start, s.d.g.stream)
}

// stepEnd ends the GPU timing and records the Submit's host time and the
// cuBLASLt plans it built.
func (s *deviceStats) stepEnd(st *staging) error {
	x := &s.stage[st.index]
	if err := s.d.g.drv.eventRecord(x.end, s.d.g.stream); err != nil {
		return err
	}
	start, kind := x.submitAt, x.kind
	host := time.Since(start)
	x.submitHost = host
	p := &st.plan
	s.n++
	if s.firstStep.IsZero() {
		s.firstStep = start
	}
	s.steps[kind]++
	s.submit += host
	s.submitMax = max(s.submitMax, host)
	b := s.d.g.blas
	slow := slowStep{host: host, at: start, kind: kind, nTok: p.lay.nTok, nSeq: p.lay.nSeq, nSample: p.lay.nSample,
		plans: b.plansBuilt - x.plans0, tuned: b.plansTuned - x.tuned0, seqNum: s.n}
	i, _ := slices.BinarySearchFunc(s.slow, host, func(x slowStep, h time.Duration) int {
		switch {
		case x.host > h:
			return -1
		case x.host < h:
			return 1
		}
		return 0
	})
	if i < maxSlowSteps {
		s.slow = slices.Insert(s.slow, i, slow)
		if len(s.slow) > maxSlowSteps {
			s.slow = s.slow[:maxSlowSteps]
		}
	}
	return nil
}

// collected records one Collect: the wait for the step's samples and its
// GPU time.
func (s *deviceStats) collected(st *staging, wait time.Duration) error {
	x := &s.stage[st.index]
	gpu, err := s.d.elapsed(x.start, x.end)
	if err != nil {
		return err
	}
	s.wait += wait
	s.waitMax = max(s.waitMax, wait)
	s.gpu[x.kind] += gpu
	s.lastEnd = time.Now()
	if s.perStep {
		p := &st.plan
		fmt.Fprintf(s.w, "cuda step @%.6fs kind=%s tok=%d seqs=%d samples=%d gap=%.0fus submit=%.0fus wait=%.0fus gpu=%.0fus\n",
			sinceStart(x.submitAt), stepKindNames[x.kind], p.lay.nTok, p.lay.nSeq, p.lay.nSample,
			us(x.gap), us(x.submitHost), us(wait), us(gpu))
	}
	s.lastCollect = s.lastEnd
	return nil
}

// close prints the summary and frees the timing events.
func (s *deviceStats) close() {
	if s.d.g.blas != nil {
		s.report(s.d.g.blas)
	}
	for i := range s.stage {
		for _, e := range []uintptr{s.stage[i].start, s.stage[i].end} {
			if e != 0 {
				purego.SyscallN(s.d.g.drv.cuEventDestroy, e)
			}
		}
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// report prints the summary (at Close).
func (s *deviceStats) report(b *blasLt) {
	w := s.w
	fmt.Fprintf(w, "cuda stats: prewarm %.3f s (%d plans, %d graphs); serving path built %d cuBLASLt plans (%d tuned) in %.1f ms\n",
		s.prewarm.Seconds(), s.prewarmPlans, s.prewarmGraphs, b.plansBuilt-s.plans0, b.plansTuned-s.tuned0, 1000*(b.planTime-s.planTime0).Seconds())
	if s.n == 0 {
		return
	}
	fmt.Fprintf(w, "cuda stats: %d steps over %.3f s (first Submit to last Collect); Submit host %.1f ms (max %.0f us), Collect wait %.1f ms (max %.0f us)\n",
		s.n, s.lastEnd.Sub(s.firstStep).Seconds(), 1000*s.submit.Seconds(), us(s.submitMax), 1000*s.wait.Seconds(), us(s.waitMax))
	for k := range numStepKinds {
		if s.steps[k] > 0 {
			fmt.Fprintf(w, "cuda stats:   %-18s %6d steps, GPU %8.1f ms (%.0f us/step)\n", stepKindNames[k], s.steps[k],
				1000*s.gpu[k].Seconds(), us(s.gpu[k])/float64(s.steps[k]))
		}
	}
	for _, x := range s.slow {
		fmt.Fprintf(w, "cuda stats:   slow Submit #%d @%.3fs: %.0f us, %s, tok=%d seqs=%d samples=%d, plans built %d (tuned %d)\n",
			x.seqNum, sinceStart(x.at), us(x.host), stepKindNames[x.kind], x.nTok, x.nSeq, x.nSample, x.plans, x.tuned)
	}
}
