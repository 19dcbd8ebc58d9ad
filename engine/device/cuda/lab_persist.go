//go:build cudalab

package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// persist.cu: a persistent batch-1 decode loop over the rotary block's
// layers (see the file), the measurement behind a persistent decode kernel:
// how fast one grid can stream the layers' weights with a grid barrier
// between every two dependent stages.
//
//go:embed kernels/lab/persist.cu
var persistSource string

func init() {
	labKernelFiles["persist.cu"] = persistSource
	labKernelNames = append(labKernelNames, "persist_probe")
}

// Sizes of persist.cu (PB_*).
const (
	probeThreads    = 512
	probeStageBytes = 96 * 1024
	probeMaxK       = 3072
	probeSmem       = 2*probeStageBytes + 4*probeMaxK + 16 + 4*probeThreads/32
)

// PersistProbe runs persist.cu over the model's layers for a one-token step
// at position 0 and reports its time with and without the grid barriers
// (reps launches each, median) and its residual stream's relative
// difference from the device's own step of that token (bf16 activations
// there, fp32 here).
func (d *Device) PersistProbe(reps int) (string, error) {
	q, g := d.q3, d.g
	if q == nil || q.f32 || g.ccMajor < 9 {
		return "", fmt.Errorf("cuda: the persistent probe needs the rotary block in bf16 on Hopper")
	}
	k, ok := g.kernels["persist_probe"]
	if !ok {
		return "", fmt.Errorf("cuda: persist_probe was not built for %s", g.arch)
	}
	C, I, A, G := d.cfg.Channels, q.I, q.NH*q.HD, g.smCount
	for _, p := range [][2]int{{q.qkvWidth, C}, {C, A}, {2 * q.I, C}, {C, q.I}} {
		rows := (ceilDiv(p[0], G) + 1) &^ 1
		if q.HD != 128 || p[1] > probeMaxK || rows*p[1]*2 > probeStageBytes {
			return "", fmt.Errorf("cuda: the persistent probe does not fit %d rows x %d on %d SMs", p[0], p[1], G)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	want, x0, err := d.probeReference()
	if err != nil {
		return "", err
	}
	layers := make([]uint64, 0, 6*len(q.w.layers))
	for _, l := range q.w.layers {
		layers = append(layers, uint64(l.qkv), uint64(l.o), uint64(l.gateUp), uint64(l.down), uint64(l.ln1), uint64(l.ln2))
	}
	var bufs [6]devPtr // layers, x, qkv, att, hidden, barrier
	for i, n := range []int{8 * len(layers), 4 * C, 4 * q.qkvWidth, 4 * A, 4 * I, 8} {
		p, err := g.drv.memAlloc(n)
		if err != nil {
			return "", err
		}
		defer g.drv.memFree(p)
		bufs[i] = p
	}
	if err := g.drv.htod(bufs[0], unsafe.Pointer(&layers[0]), 8*len(layers)); err != nil {
		return "", err
	}
	if err := g.drv.memsetD32Async(bufs[5], 0, 2, g.stream); err != nil {
		return "", err
	}
	if err := g.setMaxDynamicSmem(k, probeSmem); err != nil {
		return "", err
	}
	pdl := g.pdl
	g.pdl = false // the probe waits for nothing before it
	defer func() { g.pdl = pdl }()
	// The barrier counter only grows: each launch with barriers starts
	// from where the last one left it (persist.cu's pb_grid_sync).
	var counter uint32
	launch := func(noBarriers int) error {
		err := g.launch(k, G, 1, 1, probeThreads, probeSmem, argPtr(bufs[0]), argInt(len(q.w.layers)), argPtr(bufs[1]),
			argPtr(bufs[2]), argPtr(bufs[3]), argPtr(bufs[4]), argPtr(bufs[5]), argInt(int(counter)), argInt(C), argInt(q.NH),
			argInt(q.NKV), argInt(I), argF32(q.eps), argInt(noBarriers))
		if noBarriers == 0 {
			counter += uint32(5 * len(q.w.layers) * G)
		}
		return err
	}
	if err := g.drv.htod(bufs[1], unsafe.Pointer(&x0[0]), 4*C); err != nil {
		return "", err
	}
	if err := launch(0); err != nil {
		return "", err
	}
	if err := g.sync(); err != nil {
		return "", err
	}
	got := make([]float32, C)
	if err := g.drv.dtoh(unsafe.Pointer(&got[0]), bufs[1], 4*C); err != nil {
		return "", err
	}
	rel := relDiff(got, want)
	var us [2]float64
	for nb := range us {
		ms, err := d.timeMedian(reps, func() error { return launch(nb) })
		if err != nil {
			return "", err
		}
		us[nb] = 1000 * ms
	}
	var weights int
	for _, p := range [][2]int{{q.qkvWidth, C}, {C, A}, {2 * q.I, C}, {C, q.I}} {
		weights += 2 * p[0] * p[1] * len(q.w.layers)
	}
	return fmt.Sprintf("persistent probe, %d layers at batch 1 (%d blocks, %.0f MB of weights): %.1f us (%.0f GB/s); "+
		"without the %d grid barriers %.1f us (%.0f GB/s); residual vs the device's one-token step: rel diff %.2e\n",
		len(q.w.layers), G, float64(weights)/1e6, us[0], float64(weights)/us[0]/1e3, 5*len(q.w.layers), us[1],
		float64(weights)/us[1]/1e3, rel), nil
}

// relDiff is ||a - b|| / ||b||.
func relDiff(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}

// probeReference runs the device's own one-token step at position 0 and
// returns the residual stream it ends with and the token's embedding, the
// layer probes' input: at position 0 attention over the one key is its
// value, so a probe that skips attention computes the same step. The caller
// holds its OS thread, which probeReference leaves bound to the GPU.
func (d *Device) probeReference() (want, x0 []float32, err error) {
	q, g, C := d.q3, d.g, d.cfg.Channels
	const token = 1000
	batch := device.Batch{Seqs: []device.Seq{{SeqID: 1, Tokens: []int32{token}, BlockTable: []int32{0}, Sample: true,
		Params: sample.Params{Temperature: 0, TopP: 1}, BannedToken: -1}}}
	if _, err := d.Forward(&batch, nil); err != nil {
		return nil, nil, err
	}
	if err := g.bind(); err != nil {
		return nil, nil, err
	}
	want = make([]float32, C)
	if err := g.drv.dtoh(unsafe.Pointer(&want[0]), d.act.residual, 4*C); err != nil {
		return nil, nil, err
	}
	emb := make([]uint16, C)
	if err := g.drv.dtoh(unsafe.Pointer(&emb[0]), q.w.wte+devPtr(2*token*C), 2*C); err != nil {
		return nil, nil, err
	}
	x0 = make([]float32, C)
	for i, h := range emb {
		x0[i] = math.Float32frombits(uint32(h) << 16)
	}
	return want, x0, nil
}
