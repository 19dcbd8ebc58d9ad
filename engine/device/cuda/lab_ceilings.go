//go:build cudalab

package cuda

import (
	_ "embed"
	"fmt"
	"runtime"
	"slices"

	"github.com/ebitengine/purego"
)

// ceiling.cu's kernels: the DRAM read ceiling, L2's broadcast rate and an
// empty kernel for launch costs (lab_gemmchain.go).
//
//go:embed kernels/lab/ceiling.cu
var ceilingSource string

func init() {
	labKernelFiles["ceiling.cu"] = ceilingSource
	labKernelNames = append(labKernelNames, "read_bandwidth", "l2_broadcast_read", "empty_pdl", "pdl_probe")
}

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
	// A plain launch: timed alone, not overlapping what precedes it.
	ms, err = d.timeMedian(5, func() error {
		return g.launchOn(g.stream, false, g.kernel("read_bandwidth"), 2*g.smCount, 1, 1, 1024, 0, argPtr(src), uint64(bytes/16), argPtr(dst))
	})
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
	defer purego.SyscallN(g.drv.cuEventDestroy, start)
	end, err := g.drv.eventCreate(0)
	if err != nil {
		return 0, err
	}
	defer purego.SyscallN(g.drv.cuEventDestroy, end)
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
	slices.Sort(times)
	return times[len(times)/2], nil
}

// SetNoCUDAGraph switches CUDA graphs off (true) or on for later steps, as
// Options.NoCUDAGraph.
func (d *Device) SetNoCUDAGraph(v bool) { d.opts.NoCUDAGraph = v }

// SetChunkRows sets Options.ChunkRows (0 = default, negative = one-token
// sequences only) for later steps.
func (d *Device) SetChunkRows(n int) {
	d.opts.ChunkRows = n
	d.opts = withDefaults(d.opts)
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

// whenDrained runs fn on this goroutine's OS thread with the device's context
// bound and its stream drained.
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
