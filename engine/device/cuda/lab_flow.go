//go:build cudalab

package cuda

import (
	_ "embed"
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// flow.cu: a dataflow batch-1 decode loop over the rotary block's layers
// (see the file): per-block weight streams run ahead of every dependency,
// and a layer waits on all blocks twice instead of persist.cu's five grid
// barriers.
//
//go:embed kernels/lab/flow.cu
var flowSource string

// flowVariant is a build of flow.cu's ring: slots of chunk bytes, each
// filled by pieces bulk copies, at most inflight of them not yet landed;
// poll is FL_POLL, how a warp waits for a count.
// Only 16 KiB slots run the arithmetic (the others time the stream alone).
type flowVariant struct{ chunk, slots, pieces, inflight, poll int }

func (v flowVariant) name() string {
	return fmt.Sprintf("flow_probe_%dk_%d_%d_%d_p%d", v.chunk>>10, v.slots, v.pieces, v.inflight, v.poll)
}

func (v flowVariant) smem() int { return v.slots*v.chunk + 4*128 + 16*v.slots }

var flowVariants = []flowVariant{{16384, 12, 1, 12, 2}, {16384, 12, 1, 1, 2}, {16384, 12, 1, 2, 2}, {16384, 12, 1, 3, 2}, {16384, 12, 1, 4, 2}, {16384, 12, 1, 6, 2}}

func init() {
	for _, v := range flowVariants {
		labKernelFiles[v.name()+".cu"] = fmt.Sprintf("#define FL_NAME %s\n#define FL_CHUNK %d\n#define FL_SLOTS %d\n#define FL_PIECES %d\n#define FL_INFLIGHT %d\n#define FL_POLL %d\n",
			v.name(), v.chunk, v.slots, v.pieces, v.inflight, v.poll) + flowSource
		labKernelNames = append(labKernelNames, v.name())
	}
}

// Sizes of flow.cu (FL_*): Qwen3-0.6B's layer on 128 blocks.
const (
	flowThreads     = 256 + 64
	flowEvents      = 9
	flowWorkers     = 128
	flowFlags       = 34
	flowLayerElems  = 240 * 1024 / 2 // bf16 a layer a block
	flowC, flowI    = 1024, 3072
	flowQKV, flowNH = 4096, 16
)

// flowPiece lays out block b's weights of one layer (bf16 bits) in the
// order flow.cu reads them: q|k|v rows 32b..32b+31; o_proj's tile of rows
// 128 (b % 8).. and head b / 8's 128 columns; gate|up rows 48b..48b+47
// (gate and up interleaved, as the device keeps them); down_proj's columns
// 24b..24b+23 as rows.
func flowPiece(dst []uint16, b int, qkv, o, gu, down []uint16) {
	C, A := flowC, flowNH*128
	off := copy(dst, qkv[32*b*C:(32*b+32)*C])
	h, rc := b/8, b%8
	for r := 0; r < 128; r++ {
		row := 128*rc + r
		off += copy(dst[off:], o[row*A+128*h:row*A+128*h+128])
	}
	off += copy(dst[off:], gu[48*b*C:(48*b+48)*C])
	for j := 0; j < 24; j++ {
		col := 24*b + j
		for r := 0; r < C; r++ {
			dst[off+C*j+r] = down[r*flowI+col]
		}
	}
}

// FlowProbe runs flow.cu over the model's layers for a one-token step at
// position 0 and reports its time with and without the waits between
// blocks (reps launches each, median) and its residual stream's relative
// difference from the device's own step of that token, after the first
// launch and after the timed ones.
func (d *Device) FlowProbe(reps int) (string, error) {
	q, g := d.q3, d.g
	if q == nil || q.f32 || g.ccMajor < 9 {
		return "", fmt.Errorf("cuda: the flow probe needs the rotary block in bf16 on Hopper")
	}
	C, L := d.cfg.Channels, len(q.w.layers)
	if C != flowC || q.I != flowI || q.NH != flowNH || q.NKV != 8 || q.HD != 128 || q.qkvWidth != flowQKV || g.smCount < flowWorkers {
		return "", fmt.Errorf("cuda: the flow probe is laid out for Qwen3-0.6B's layer on %d SMs", flowWorkers)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	want, x0, err := d.probeReference()
	if err != nil {
		return "", err
	}
	streams := make([]uint16, flowWorkers*L*flowLayerElems)
	mats := [4][]uint16{make([]uint16, flowQKV*C), make([]uint16, C*flowNH*128), make([]uint16, 2*flowI*C), make([]uint16, C*flowI)}
	norms := make([]uint64, 0, 2*L)
	for l, ly := range q.w.layers {
		for i, p := range []devPtr{ly.qkv, ly.o, ly.gateUp, ly.down} {
			if err := g.drv.dtoh(unsafe.Pointer(&mats[i][0]), p, 2*len(mats[i])); err != nil {
				return "", fmt.Errorf("flow probe: layer %d weight %d: %w", l, i, err)
			}
		}
		for b := 0; b < flowWorkers; b++ {
			flowPiece(streams[(b*L+l)*flowLayerElems:], b, mats[0], mats[1], mats[2], mats[3])
		}
		norms = append(norms, uint64(ly.ln1), uint64(ly.ln2))
	}
	var bufs [7]devPtr // streams, norms, x0, q|k|v outputs, residual sums, flags, trace
	for i, n := range []int{2 * len(streams), 8 * len(norms), 4 * C, 4 * L * flowQKV, 4 * 2 * L * 2 * C, 4 * L * flowFlags, 8 * L * flowWorkers * flowEvents} {
		p, err := g.drv.memAlloc(n)
		if err != nil {
			return "", err
		}
		defer g.drv.memFree(p)
		bufs[i] = p
	}
	for _, c := range []struct {
		dst   devPtr
		src   unsafe.Pointer
		bytes int
	}{{bufs[0], unsafe.Pointer(&streams[0]), 2 * len(streams)}, {bufs[1], unsafe.Pointer(&norms[0]), 8 * len(norms)}, {bufs[2], unsafe.Pointer(&x0[0]), 4 * C}} {
		if err := g.drv.htod(c.dst, c.src, c.bytes); err != nil {
			return "", err
		}
	}
	pdl := g.pdl
	g.pdl = false // the probe waits for nothing before it
	defer func() { g.pdl = pdl }()
	ep := 0
	var k kernel
	var smem int
	var trace devPtr // set for one launch
	launch := func(mode int) error {
		err := g.launch(k, g.smCount, 1, 1, flowThreads, smem, argPtr(bufs[0]), argPtr(bufs[1]), argPtr(bufs[2]),
			argPtr(bufs[3]), argPtr(bufs[4]), argPtr(bufs[5]), argInt(L), argInt(ep), argF32(q.eps), argInt(mode), argPtr(trace))
		ep++
		return err
	}
	// traced: one launch of mode with its events, summed up.
	traced := func(mode int) (string, error) {
		trace = bufs[6]
		err := launch(mode)
		trace = 0
		if err != nil {
			return "", err
		}
		if err := g.sync(); err != nil {
			return "", err
		}
		tr := make([]uint64, L*flowWorkers*flowEvents)
		if err := g.drv.dtoh(unsafe.Pointer(&tr[0]), bufs[6], 8*len(tr)); err != nil {
			return "", err
		}
		return flowTraceReport(tr, L), nil
	}
	// residual: the last launch's final residual against want.
	residual := func() (float64, error) {
		if err := g.sync(); err != nil {
			return 0, err
		}
		got := make([]float32, C)
		set := (ep - 1) & 1
		if err := g.drv.dtoh(unsafe.Pointer(&got[0]), bufs[4]+devPtr(4*(set*L*2*C+(2*(L-1)+1)*C)), 4*C); err != nil {
			return 0, fmt.Errorf("flow probe: residual of set %d: %w", set, err)
		}
		return relDiff(got, want), nil
	}
	bytes := float64(2 * len(streams))
	var report strings.Builder
	for _, v := range flowVariants {
		var ok bool
		if k, ok = g.kernels[v.name()]; !ok {
			return "", fmt.Errorf("cuda: %s was not built for %s", v.name(), g.arch)
		}
		smem = v.smem()
		if err := g.setMaxDynamicSmem(k, smem); err != nil {
			return "", err
		}
		// Each variant starts from zero: launches without waits leave the
		// counts behind the launch index.
		if err := g.drv.memsetD32Async(bufs[4], 0, 2*L*2*C, g.stream); err != nil {
			return "", err
		}
		if err := g.drv.memsetD32Async(bufs[5], 0, L*flowFlags, g.stream); err != nil {
			return "", err
		}
		ep = 0
		if v.chunk == 16384 {
			if err := launch(0); err != nil {
				return "", err
			}
			rel0, err := residual()
			if err != nil {
				return "", err
			}
			waits, err := d.timeMedian(reps, func() error { return launch(0) })
			if err != nil {
				return "", err
			}
			rel1, err := residual()
			if err != nil {
				return "", err
			}
			stepTrace, err := traced(0)
			if err != nil {
				return "", err
			}
			chainTrace, err := traced(3)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&report, "flow probe %s, one step's events: %s\nthe same without the weight stream: %s\n", v.name(), stepTrace, chainTrace)
			// The chain alone counts as the step does; the launches
			// without waits last, as they count nothing.
			chain, err := d.timeMedian(reps, func() error { return launch(3) })
			if err != nil {
				return "", err
			}
			free, err := d.timeMedian(reps, func() error { return launch(1) })
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&report, "flow probe %s: the chain of waits and arithmetic without the weight stream %.1f us\n", v.name(), 1000*chain)
			fmt.Fprintf(&report, "flow probe %s, %d layers at batch 1 (%d blocks, %.0f MB of weights): %.1f us (%.0f GB/s); "+
				"without the waits between blocks %.1f us (%.0f GB/s); residual vs the device's one-token step: rel diff "+
				"%.2e (first launch), %.2e (last timed)\n", v.name(), L, flowWorkers, bytes/1e6, 1000*waits, bytes/waits/1e6,
				1000*free, bytes/free/1e6, rel0, rel1)
		}
		stream, err := d.timeMedian(reps, func() error { return launch(2) })
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&report, "flow probe's weight stream alone, %d slots of %d KiB, %d bulk copies a slot, at most %d in flight: %.1f us (%.0f GB/s)\n",
			v.slots, v.chunk>>10, v.pieces, v.inflight, 1000*stream, bytes/stream/1e6)
	}
	return report.String(), nil
}

// flowTraceReport sums up flow.cu's events (FL_EVENTS, global timer in ns:
// 0 the residual seen, 1 q|k|v done, 2 the head counted, 3 the value head
// seen, 4 o_proj's tile done, 5 it counted, 6 the residual after o_proj
// seen, 7 down_proj done, 8 it counted; warp 0 for 0, 1, 4 and 7): each
// block's stretches between them and the waits from the last count a wait
// needs to the block seeing it, in microseconds averaged over blocks and
// layers 1..L-2, and the layer's period.
func flowTraceReport(tr []uint64, L int) string {
	at := func(l, b, k int) float64 { return float64(tr[(l*flowWorkers+b)*flowEvents+k]) / 1000 }
	last := func(l, k int, bs []int) float64 {
		m := 0.0
		for _, b := range bs {
			m = max(m, at(l, b, k))
		}
		return m
	}
	all := make([]int, flowWorkers)
	for b := range all {
		all[b] = b
	}
	names := []string{"q|k|v", "count", "head seen", "o_proj", "count", "residual seen", "gate|up+down", "count", "residual seen", "period", "last count's lag (o_proj)", "(down_proj)"}
	sums := make([]float64, len(names))
	n := 0
	for l := 1; l < L-1; l++ {
		last5, last8 := last(l, 5, all), last(l, 8, all)
		var mean5, mean8 float64
		for b := 0; b < flowWorkers; b++ {
			vhead := 24 + (b/8)/2
			producers := []int{4 * vhead, 4*vhead + 1, 4*vhead + 2, 4*vhead + 3}
			seg := []float64{at(l, b, 1) - at(l, b, 0), at(l, b, 2) - at(l, b, 1), at(l, b, 3) - last(l, 2, producers),
				at(l, b, 4) - at(l, b, 3), at(l, b, 5) - at(l, b, 4), at(l, b, 6) - last5, at(l, b, 7) - at(l, b, 6),
				at(l, b, 8) - at(l, b, 7), at(l+1, b, 0) - last8}
			for i, v := range seg {
				sums[i] += v
			}
			mean5 += at(l, b, 5) / flowWorkers
			mean8 += at(l, b, 8) / flowWorkers
			n++
		}
		sums[9] += (last(l+1, 0, all) - last(l, 0, all)) * flowWorkers
		sums[10] += (last5 - mean5) * flowWorkers
		sums[11] += (last8 - mean8) * flowWorkers
	}
	var b strings.Builder
	for i, name := range names {
		fmt.Fprintf(&b, "%s %.2f", name, sums[i]/float64(n))
		if i < len(names)-1 {
			b.WriteString(", ")
		}
	}
	b.WriteString(" us")
	return b.String()
}
