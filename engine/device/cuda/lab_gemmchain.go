//go:build cudalab

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Diagnostics for the projections of large decode steps (cudabench
// -gemm-chain): the layer projections back to back in a CUDA graph without
// attention, through each implementation; what a launch of a given shape
// costs in a graph by itself; how fast L2 feeds every SM the same matrix.

// GemmChainImpls lists what GemmChain runs: cuBLASLt, gemm_wg.cu (fcproj
// with K split), the default gemm_skinny kernel for the row count, and each
// gemm_skinny kernel at every row count.
func GemmChainImpls() []string {
	return append([]string{"cublaslt", "wgmma", "skinny"}, skinnyKernelNames()...)
}

// skinnyKernelNamed is the entry of skinnyKernels with that name, or nil.
func skinnyKernelNamed(name string) *skinnyKernel {
	for i := range skinnyKernels {
		if skinnyKernels[i].name == name {
			return &skinnyKernels[i]
		}
	}
	return nil
}

// ChainOptions says what GemmChain runs besides the projections.
type ChainOptions struct {
	LN       bool   // the two LayerNorm kernels of each layer too
	OneLayer bool   // layer 0's weights in every layer, which then come from L2 (14 MB for GPT-2 124M)
	Only     string // one projection kind of ProjectionKinds, one launch a layer ("" = all four)
}

// ProjectionKinds are a layer's projections in the order a step runs them.
var ProjectionKinds = []string{"qkv", "attproj", "fc", "fcproj"}

// GemmChain times a CUDA graph of the model's layer projections (qkv,
// attproj, fc, fcproj per layer, or one kind of them) over rows token rows
// through impl, from a fixed random residual stream and attention output.
// OneLayer prices DRAM latency: what the projections cost with their
// weights in L2. It returns the graph's median replay time per projection
// in microseconds, and the relative difference of the final residual
// stream from cuBLASLt's (a wrong kernel shows as a large one; with Only
// "qkv" or "fc" nothing reaches the stream, so it is 0).
func (d *Device) GemmChain(rows int, impl string, o ChainOptions) (usPerGemm, relDiff float64, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.g.bind(); err != nil {
		return 0, 0, err
	}
	if err := d.g.sync(); err != nil {
		return 0, 0, err
	}
	if rows <= maxGemvRows || rows > maxSkinnyRows || rows > d.opts.MaxStepTokens {
		return 0, 0, fmt.Errorf("cuda: gemm chain of %d rows: want %d..%d", rows, maxGemvRows+1, min(maxSkinnyRows, d.opts.MaxStepTokens))
	}
	path := d.path
	defer func() { d.path = path }()
	C := d.cfg.Channels
	r := rand.New(rand.NewPCG(7, uint64(rows)))
	resid := make([]float32, rows*C)
	for i := range resid {
		resid[i] = float32(r.NormFloat64())
	}
	attn := make([]uint16, rows*C)
	for i := range attn {
		attn[i] = f32ToF16(float32(r.NormFloat64()))
	}
	run := func(impl string) ([]float32, error) {
		if err := d.selectProjections(impl); err != nil {
			return nil, err
		}
		if err := d.g.drv.htod(d.act.residual, unsafe.Pointer(&resid[0]), 4*len(resid)); err != nil {
			return nil, err
		}
		if err := d.g.drv.htod(d.act.attn, unsafe.Pointer(&attn[0]), 2*len(attn)); err != nil {
			return nil, err
		}
		if err := d.g.drv.htod(d.act.ln, unsafe.Pointer(&attn[0]), 2*len(attn)); err != nil {
			return nil, err
		}
		if err := d.projectionChain(rows, o); err != nil {
			return nil, err
		}
		out := make([]float32, rows*C)
		if err := d.g.sync(); err != nil {
			return nil, err
		}
		return out, d.g.drv.dtoh(unsafe.Pointer(&out[0]), d.act.residual, 4*len(out))
	}
	ref, err := run("cublaslt")
	if err != nil {
		return 0, 0, err
	}
	got, err := run(impl)
	if err != nil {
		return 0, 0, err
	}
	var num, den float64
	for i := range ref {
		e := float64(got[i] - ref[i])
		num, den = num+e*e, den+float64(ref[i])*float64(ref[i])
	}
	relDiff = math.Sqrt(num / max(den, 1e-30))
	ms, err := d.timeGraph(func() error { return d.projectionChain(rows, o) })
	if err != nil {
		return 0, 0, err
	}
	n := 4 * d.cfg.NumLayers
	if o.Only != "" {
		n = d.cfg.NumLayers
	}
	return ms * 1000 / float64(n), relDiff, nil
}

// selectProjections points the large-step projections at impl (see
// GemmChainImpls).
func (d *Device) selectProjections(impl string) error {
	d.path.skinnyVariant = nil
	d.path.wgRows = -1
	switch impl {
	case "cublaslt":
		d.path.skinnyRows = -1
		return nil
	case "wgmma":
		if !d.path.wgOK {
			return fmt.Errorf("cuda: gemm_wg.cu needs sm_90a and NVRTC 12+")
		}
		d.path.skinnyRows, d.path.wgRows = -1, maxSkinnyRows
		return nil
	case "skinny":
	default:
		if d.path.skinnyVariant = skinnyKernelNamed(impl); d.path.skinnyVariant == nil {
			return fmt.Errorf("cuda: no projection implementation %q (want one of %v)", impl, GemmChainImpls())
		}
	}
	if !d.path.skinnyOK {
		return fmt.Errorf("cuda: gemm_skinny needs thread-block clusters (compute capability 9+)")
	}
	d.path.skinnyRows = maxSkinnyRows
	return nil
}

// projectionChain enqueues the layer projections of a step of rows rows as
// forward does (those of kind o.Only alone, if set), without attention:
// its first kernel follows a copy, not a kernel, so it launches without
// programmatic dependent launch.
func (d *Device) projectionChain(rows int, o ChainOptions) error {
	a, C, eps := &d.act, d.cfg.Channels, d.cfg.LayerNormEpsilon
	if o.Only != "" && !slices.Contains(ProjectionKinds, o.Only) {
		return fmt.Errorf("cuda: no projection kind %q (want one of %v)", o.Only, ProjectionKinds)
	}
	ln := o.LN && o.Only == ""
	pdl := d.g.pdl
	defer func() { d.g.pdl = pdl }()
	d.g.pdl = false
	for l := range d.w.layers {
		w := &d.w.layers[l]
		if o.OneLayer {
			w = &d.w.layers[0]
		}
		// Each kernel but the chain's first launches under PDL.
		for _, kind := range ProjectionKinds {
			if o.Only != "" && kind != o.Only {
				continue
			}
			var err error
			switch kind {
			case "qkv":
				if ln {
					if err = d.layernorm(a.ln, a.residual, 0, w.ln1W, w.ln1B, rows, eps); err != nil {
						return err
					}
					d.g.pdl = pdl
				}
				err = d.projection(a.qkv, 3*C, a.ln, w.qkvW, w.qkvB, rows, C, 3*C, false)
			case "attproj":
				err = d.residualGemm(a.attn, w.attProjW, w.attProjB, w.attProjB16, rows, C)
			case "fc":
				if ln {
					if err = d.layernorm(a.ln, a.residual, 0, w.ln2W, w.ln2B, rows, eps); err != nil {
						return err
					}
				}
				err = d.projection(a.fc, 4*C, a.ln, w.fcW, w.fcB, rows, C, 4*C, true)
			case "fcproj":
				err = d.residualGemm(a.fc, w.fcProjW, w.fcProjB, w.fcProjB16, rows, 4*C)
			}
			if err != nil {
				return err
			}
			d.g.pdl = pdl
		}
	}
	return nil
}

// timeGraph captures enqueue into a CUDA graph and returns the median of
// 20 timed replays (after an untimed one) in milliseconds. enqueue must
// have run eagerly before, so that cuBLASLt's plans exist outside the
// capture.
func (d *Device) timeGraph(enqueue func() error) (float64, error) {
	graph, exec, err := d.g.capture(enqueue)
	if err != nil {
		return 0, fmt.Errorf("cuda: capturing a timing graph: %w", err)
	}
	defer d.destroyGraph(&decodeGraph{graph: graph, exec: exec})
	drv := d.g.drv
	return d.timeMedian(20, func() error {
		r, _, _ := purego.SyscallN(drv.cuGraphLaunch, exec, d.g.stream)
		return drv.check("cuGraphLaunch", r)
	})
}

// LaunchCost times a CUDA graph of 48 empty_pdl launches of blocks blocks
// of 128 threads with smem bytes of dynamic shared memory each, in
// thread-block clusters of 1 x cluster blocks when cluster > 1 (the grid is
// then blocks x cluster), every one preceded by a LayerNorm kernel over rows
// rows when withLN (the kernels around a projection in a step), and returns
// microseconds per pair (or per launch).
func (d *Device) LaunchCost(blocks, cluster, smem, rows int, withLN bool) (float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.g.bind(); err != nil {
		return 0, err
	}
	k := d.g.kernel("empty_pdl")
	if err := d.g.setMaxDynamicSmem(k, max(smem, 48*1024)); err != nil {
		return 0, err
	}
	w := &d.w.layers[0]
	enqueue := func() error {
		for i := 0; i < 48; i++ {
			if withLN {
				if err := d.layernorm(d.act.ln, d.act.residual, 0, w.ln1W, w.ln1B, rows, d.cfg.LayerNormEpsilon); err != nil {
					return err
				}
			}
			var err error
			if cluster > 1 {
				err = d.g.launchCluster(k, blocks, cluster, 1, cluster, 128, smem, argInt(0))
			} else {
				err = d.g.launch(k, blocks, 1, 1, 128, smem, argInt(0))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := enqueue(); err != nil {
		return 0, err
	}
	ms, err := d.timeGraph(enqueue)
	return ms * 1000 / 48, err
}

// L2BroadcastGBs has blocks blocks of 256 threads each read the same bytes
// (rounded to 16) from L2 and returns the rate per block (per SM when
// blocks <= SMs) in GB/s.
func (d *Device) L2BroadcastGBs(blocks, bytes int) (float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := d.g
	if err := g.bind(); err != nil {
		return 0, err
	}
	buf, err := g.drv.memAlloc(bytes + 16)
	if err != nil {
		return 0, err
	}
	defer g.drv.memFree(buf)
	if err := g.drv.memsetD32Async(buf, 0x3c003c00, bytes/4, g.stream); err != nil {
		return 0, err
	}
	pdl := g.pdl
	g.pdl = false
	defer func() { g.pdl = pdl }()
	ms, err := d.timeMedian(9, func() error {
		return g.launch(g.kernel("l2_broadcast_read"), blocks, 1, 1, 256, 0, argPtr(buf), argInt(bytes/16), argPtr(buf+devPtr(bytes)))
	})
	if err != nil {
		return 0, err
	}
	return float64(bytes) / (ms / 1000) / 1e9, nil
}
