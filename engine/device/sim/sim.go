// Package sim is a device whose forward is a fixed delay and whose tokens are
// a pure function of (seed, index). Everything else — server, scheduler, KV
// cache — is real, which makes it the ground truth the harness is tested
// against: with a step of D, every inter-token latency of a decoding stream
// should be D.
//
// It holds no KV storage and does no work per token beyond a hash and a map
// entry, so the step cost barely grows with the number of concurrent streams.
//
// It is also an AsyncDevice (Submit/Collect) like the CUDA device, and checks
// the engine's side of that contract: a decode fed device.FromPrevious must
// have sampled in the previous submitted step, and a decode fed a real token
// must feed the one it sampled there.
package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/hrtimer"
)

// Options configure a simulated device.
type Options struct {
	StepDuration    time.Duration // every Forward takes at least this long
	PrefillPerToken time.Duration // added per prefill token in the batch
	VocabSize       int           // tokens are drawn from [0, VocabSize)
	EOS             int32         // never drawn unless EOSAt says so
	// EOSAt, when set, makes the token a sequence draws at sampleIndex EOS
	// (unless EOS is banned for it). nil: EOS never appears.
	EOSAt func(seed uint64, sampleIndex int) bool
}

// Device implements device.AsyncDevice.
type Device struct {
	opts Options
	// timer ends steps. A Go timer would wake up to a millisecond late on
	// an idle Linux process (see hrtimer); a spin would end them on time but
	// take a core from the server the sim is there to measure. Made on the
	// first step that has to wait, so a device with no step time holds no fd.
	timer *hrtimer.Timer
	// lastEnd is when the previous Forward or Collect returned.
	lastEnd time.Time
	// lastDeadline is when the last submitted step completes.
	lastDeadline time.Time

	queue   [maxInFlight]submitted // steps submitted, not yet collected (a ring)
	head, n int

	// Tokens by SeqID sampled in the previous submitted step, and in the
	// step being sampled (swapped after each step; cleared, never reallocated).
	prevSampled, sampled map[uint64]int32
}

// submitted is one step on the simulated device.
type submitted struct {
	out      []device.Sampled
	deadline time.Time
}

// maxInFlight is how many submitted steps may wait to be collected, as on
// the CUDA device.
const maxInFlight = 2

// New makes a simulated device.
func New(opts Options) (*Device, error) {
	if opts.VocabSize < 2 {
		return nil, fmt.Errorf("sim: vocabulary needs at least 2 tokens, got %d", opts.VocabSize)
	}
	if opts.StepDuration < 0 || opts.PrefillPerToken < 0 {
		return nil, errors.New("sim: negative step duration")
	}
	return &Device{opts: opts, prevSampled: map[uint64]int32{}, sampled: map[uint64]int32{}}, nil
}

// Name is "sim".
func (d *Device) Name() string { return "sim" }

// Close releases the step timer.
func (d *Device) Close() error {
	if d.timer == nil {
		return nil
	}
	return d.timer.Close()
}

// Forward samples one token per sequence that asks for one and returns once
// StepDuration plus PrefillPerToken per prefill token has passed. A prefill
// token is any token fed other than a decode's single token.
//
// The time counts from the call, or, when the engine comes straight back from
// the previous step (sooner than StepDuration), from the previous step's end:
// the engine's own work between steps then hides inside the step, as it would
// behind a GPU running ahead, and a busy engine emits tokens exactly every
// StepDuration. That is what makes the device a ground truth for ITL. The end
// is the step's deadline, not the (slightly later) return, so wake-up
// latency does not add up from step to step.
func (d *Device) Forward(b *device.Batch, out []device.Sampled) ([]device.Sampled, error) {
	if d.n > 0 {
		return out[:0], fmt.Errorf("sim: Forward with %d submitted steps not collected", d.n)
	}
	start := time.Now()
	if gap := start.Sub(d.lastEnd); gap >= 0 && gap < d.opts.StepDuration {
		start = d.lastDeadline
	}
	out, numPrefillTokens, err := d.sample(b, out[:0])
	if err != nil {
		return out, err
	}
	d.lastDeadline = start.Add(d.stepDuration(numPrefillTokens))
	if err := d.waitUntil(d.lastDeadline); err != nil {
		return out[:0], err
	}
	d.lastEnd = time.Now()
	return out, nil
}

// Submit samples the batch at once and queues it; its step ends
// StepDuration (plus prefill time) after the later of now and the end of the
// previous submitted step, as kernels queue on a GPU stream. An engine that
// keeps one step queued therefore emits tokens exactly every StepDuration,
// its own work hidden. At most two steps wait to be collected.
func (d *Device) Submit(b *device.Batch) error {
	if d.n == maxInFlight {
		return fmt.Errorf("sim: %d steps already in flight; Collect first", d.n)
	}
	st := &d.queue[(d.head+d.n)%maxInFlight]
	out, numPrefillTokens, err := d.sample(b, st.out[:0])
	st.out = out
	if err != nil {
		return err
	}
	start := time.Now()
	if d.lastDeadline.After(start) {
		start = d.lastDeadline
	}
	st.deadline = start.Add(d.stepDuration(numPrefillTokens))
	d.lastDeadline = st.deadline
	d.n++
	return nil
}

// Collect waits until the oldest submitted step ends and returns its samples.
func (d *Device) Collect(out []device.Sampled) ([]device.Sampled, error) {
	if d.n == 0 {
		return out[:0], errors.New("sim: Collect with no submitted step")
	}
	st := &d.queue[d.head]
	d.head = (d.head + 1) % maxInFlight
	d.n--
	if err := d.waitUntil(st.deadline); err != nil {
		return out[:0], err
	}
	d.lastEnd = time.Now()
	return append(out[:0], st.out...), nil
}

func (d *Device) stepDuration(numPrefillTokens int) time.Duration {
	return d.opts.StepDuration + time.Duration(numPrefillTokens)*d.opts.PrefillPerToken
}

// sample draws each Seq's token into out and counts the prefill tokens. It
// checks the fed decode tokens against the previous step's samples, then
// makes this step the previous one.
func (d *Device) sample(b *device.Batch, out []device.Sampled) ([]device.Sampled, int, error) {
	clear(d.sampled)
	numPrefillTokens := 0
	for i := range b.Seqs {
		seq := &b.Seqs[i]
		if err := d.checkFed(seq); err != nil {
			clear(d.prevSampled) // a failed step samples nothing
			return out, 0, err
		}
		isDecode := len(seq.Tokens) == 1 && seq.Sample && seq.SampleIndex > 0
		if !isDecode {
			numPrefillTokens += len(seq.Tokens)
		}
		if !seq.Sample {
			out = append(out, device.Sampled{Token: -1})
			continue
		}
		s := device.Sampled{Token: d.Token(seq.Params.Seed, seq.SampleIndex, seq.BannedToken)}
		if seq.WantLogprob {
			s.Logprob = -1
		}
		d.sampled[seq.SeqID] = s.Token
		out = append(out, s)
	}
	d.prevSampled, d.sampled = d.sampled, d.prevSampled
	return out, numPrefillTokens, nil
}

// checkFed rejects a Seq that feeds no token, a FromPrevious token that the
// previous step did not sample, and a decode token other than the one the
// previous step sampled for the sequence.
func (d *Device) checkFed(seq *device.Seq) error {
	if len(seq.Tokens) == 0 {
		return fmt.Errorf("sim: seq %d feeds no token", seq.SeqID)
	}
	prev, ok := d.prevSampled[seq.SeqID]
	switch {
	case seq.Tokens[0] < 0 && (len(seq.Tokens) != 1 || !ok):
		return fmt.Errorf("sim: seq %d asks for its previous sample but the previous step did not sample it", seq.SeqID)
	case seq.Tokens[0] >= 0 && len(seq.Tokens) == 1 && ok && seq.Tokens[0] != prev:
		return fmt.Errorf("sim: seq %d feeds token %d, but sampled %d in the previous step", seq.SeqID, seq.Tokens[0], prev)
	}
	return nil
}

// Token is the token a sequence with seed draws at sampleIndex, never banned
// and never EOS unless Options.EOSAt asks for it.
func (d *Device) Token(seed uint64, sampleIndex int, banned int32) int32 {
	if d.opts.EOSAt != nil && banned != d.opts.EOS && d.opts.EOSAt(seed, sampleIndex) {
		return d.opts.EOS
	}
	vocab := uint64(d.opts.VocabSize)
	tok := int32(mix(seed+uint64(sampleIndex)*0x9e3779b97f4a7c15) % vocab)
	for tok == d.opts.EOS || tok == banned {
		tok = int32((uint64(tok) + 1) % vocab)
	}
	return tok
}

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// waitUntil sleeps until deadline on the device's timer, which wakes tens
// of µs late and uses no CPU meanwhile. Lateness does not accumulate: the
// next step's deadline counts from this one's, not from the wake-up.
func (d *Device) waitUntil(deadline time.Time) error {
	if !time.Now().Before(deadline) {
		return nil
	}
	if d.timer == nil {
		t, err := hrtimer.New()
		if err != nil {
			return fmt.Errorf("sim: step timer: %w", err)
		}
		d.timer = t
	}
	if err := d.timer.SleepUntil(context.Background(), deadline); err != nil {
		return fmt.Errorf("sim: step timer: %w", err)
	}
	return nil
}
