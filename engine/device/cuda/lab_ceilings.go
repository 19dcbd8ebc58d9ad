package cuda

import (
	"fmt"
	"runtime"
)

// Ceilings are the device's measured limits, the denominators of the
// benchmark's "fraction of peak" columns.
type Ceilings struct {
	CopyGBs    float64 // device-to-device copy, bytes read + written per second / 1e9
	ReadGBs    float64 // a kernel that only reads (ceiling.cu), bytes per second / 1e9
	GemmTFLOPs float64 // fp16 GEMM with fp32 accumulate through cuBLASLt, 8192^3
	GPU        string
	DriverCUDA int // cuDriverGetVersion, e.g. 13000
}

// MeasureCeilings times a 1 GiB device copy, a 1 GiB read and an 8192^3
// fp16 GEMM (median of several runs after a warm-up).
func (d *Device) MeasureCeilings() (Ceilings, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := d.g
	c := Ceilings{GPU: d.GPUName(), DriverCUDA: g.driverVersion}
	if err := g.bind(); err != nil {
		return c, err
	}
	const bytes = 1 << 30
	src, err := g.drv.memAlloc(bytes)
	if err != nil {
		return c, err
	}
	defer g.drv.memFree(src)
	dst, err := g.drv.memAlloc(bytes)
	if err != nil {
		return c, err
	}
	defer g.drv.memFree(dst)
	if err := g.drv.memsetD32Async(src, 0x3c003c00, bytes/4, g.stream); err != nil { // fp16 ones, not zeros
		return c, err
	}
	ms, err := d.timeMedian(5, func() error { return g.drv.dtodAsync(dst, src, bytes, g.stream) })
	if err != nil {
		return c, err
	}
	c.CopyGBs = 2 * bytes / (ms / 1000) / 1e9
	// Two 1024-thread blocks per SM with four 16-byte loads each in flight:
	// far more bytes in flight than the DRAM latency needs.
	pdl := g.pdl
	g.pdl = false // a plain launch: timed alone, not overlapping what precedes it
	ms, err = d.timeMedian(5, func() error {
		return g.launch(g.kernel("read_bandwidth"), 2*g.smCount, 1, 1, 1024, 0, argPtr(src), uint64(bytes/16), argPtr(dst))
	})
	g.pdl = pdl
	if err != nil {
		return c, err
	}
	c.ReadGBs = bytes / (ms / 1000) / 1e9
	const n = 8192
	ms, err = d.timeMedian(5, func() error {
		return g.blas.gemm(g.stream, dst, dataR16F, n, src, src+n*n*2, 0, n, n, n, epilogueDefault, false)
	})
	if err != nil {
		return c, err
	}
	c.GemmTFLOPs = 2 * n * n * n / (ms / 1000) / 1e12
	return c, nil
}

// timeMedian runs fn once to warm up, then reps times between events, and
// returns the median in milliseconds.
func (d *Device) timeMedian(reps int, fn func() error) (float64, error) {
	g := d.g
	start, err := g.drv.eventCreate(0)
	if err != nil {
		return 0, err
	}
	end, err := g.drv.eventCreate(0)
	if err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	var times []float64
	for i := 0; i < reps; i++ {
		if err := g.drv.eventRecord(start, g.stream); err != nil {
			return 0, err
		}
		if err := fn(); err != nil {
			return 0, err
		}
		if err := g.drv.eventRecord(end, g.stream); err != nil {
			return 0, err
		}
		if err := g.drv.eventSync(end); err != nil {
			return 0, err
		}
		ms, err := g.drv.eventElapsedMs(start, end)
		if err != nil {
			return 0, err
		}
		times = append(times, float64(ms))
	}
	for i := range times {
		for j := i + 1; j < len(times); j++ {
			if times[j] < times[i] {
				times[i], times[j] = times[j], times[i]
			}
		}
	}
	return times[len(times)/2], nil
}

// SetNoCUDAGraph switches CUDA graphs off (true) or on for later steps.
func (d *Device) SetNoCUDAGraph(v bool) { d.opts.NoCUDAGraph = v }

// SetSimplePrefillAttention switches between the CUDA-core (true) and the
// tensor-core prefill attention kernel for later steps (A/B measurements).
func (d *Device) SetSimplePrefillAttention(v bool) error {
	d.opts.SimplePrefillAttention = v
	return d.resolveKernels()
}

// SetKernelVariants switches the decode-path A/B kernels for later steps:
// gemvMaxRows and skinnyRows as Options.GemvMaxRows and SkinnyGemmRows (0 =
// default, negative = off) and the block-per-head decode attention kernel.
// Captured graphs are dropped, since they hold the previous kernels.
func (d *Device) SetKernelVariants(gemvMaxRows, skinnyRows int, blockDecodeAttention bool) error {
	return d.reconfigure(func() error {
		d.opts.GemvMaxRows, d.opts.SkinnyGemmRows, d.opts.BlockDecodeAttention = gemvMaxRows, skinnyRows, blockDecodeAttention
		d.opts = withDefaults(d.opts)
		return d.resolveKernels()
	})
}

// SetSkinnyVariant makes gemm_skinny steps use the named kernel of
// skinnyKernels (GemmChainImpls) at every row count, or the default
// kernels for "" (A/B measurements), dropping captured graphs.
func (d *Device) SetSkinnyVariant(name string) error {
	return d.reconfigure(func() error {
		d.skinnyVariant = nil
		if name == "" {
			return nil
		}
		if d.skinnyVariant = skinnyKernelNamed(name); d.skinnyVariant == nil {
			return fmt.Errorf("cuda: no gemm_skinny variant %q", name)
		}
		return nil
	})
}

// SetChunkRows sets Options.ChunkRows (0 = default, negative = one-token
// sequences only) for later steps (A/B measurements).
func (d *Device) SetChunkRows(n int) {
	d.opts.ChunkRows = n
	d.opts = withDefaults(d.opts)
}

// SetTiledLMHead switches the small-step LM head between lmhead.cu with its
// tile keys (on) and gemv.cu with the sampler's full-row scan (off) for
// later steps (Options.NoTiledLMHead), dropping captured graphs.
func (d *Device) SetTiledLMHead(on bool) error {
	return d.reconfigure(func() error {
		d.opts.NoTiledLMHead = !on
		return d.resolveKernels()
	})
}

// SetFP32Logits switches cuBLASLt's LM head (17+ sampled rows) between
// fp32 logits (on) and fp16 ones for later steps (Options.FP32Logits),
// dropping captured graphs.
func (d *Device) SetFP32Logits(on bool) error {
	return d.reconfigure(func() error {
		d.opts.FP32Logits = on
		return nil
	})
}

// SetDecodeWarpsPerSM sets Options.DecodeWarpsPerSM (0 = the default,
// negative = never) for later steps, dropping captured graphs.
func (d *Device) SetDecodeWarpsPerSM(w int) error {
	return d.reconfigure(func() error {
		d.opts.DecodeWarpsPerSM = w
		d.opts = withDefaults(d.opts)
		return nil
	})
}

// ProfilerRange starts (on) or stops the collection of an attached profiler
// such as Nsight Compute run with --profile-from-start off, after the stream
// drains, so exactly the steps in between are profiled.
func (d *Device) ProfilerRange(on bool) error {
	return d.whenDrained(func() error {
		fn, name := d.g.drv.cuProfilerStart, "cuProfilerStart"
		if !on {
			fn, name = d.g.drv.cuProfilerStop, "cuProfilerStop"
		}
		if fn == 0 {
			return fmt.Errorf("cuda: the driver has no %s", name)
		}
		return d.g.drv.call(name, fn)
	})
}

// SetPDL switches programmatic dependent launch on or off for later steps
// (Options.NoPDL), dropping captured graphs.
func (d *Device) SetPDL(on bool) error {
	return d.reconfigure(func() error {
		d.opts.NoPDL, d.g.pdl = !on, on
		return nil
	})
}

// reconfigure runs fn, a change of kernels or options, when the stream has
// drained (whenDrained) and after dropping the captured graphs, which hold
// the previous kernels and launch parameters.
func (d *Device) reconfigure(fn func() error) error {
	return d.whenDrained(func() error {
		d.dropGraphs()
		return fn()
	})
}

// whenDrained runs fn on this goroutine's OS thread with the device's context
// bound and its stream drained: the switches above must not change kernels or
// drop graphs under a step still on the GPU.
func (d *Device) whenDrained(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.g.bind(); err != nil {
		return err
	}
	if err := d.g.sync(); err != nil {
		return err
	}
	return fn()
}
