package cuda

import (
	"math"

	"github.com/ebitengine/purego"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

var (
	sharedOnce sync.Once
	sharedG    *gpu
	sharedErr  error
)

// testGPU returns the process's GPU for kernel-level tests, or skips the test
// when this machine has no usable CUDA. The calling goroutine is locked to
// its thread and the context bound for the rest of the test.
func testGPU(t *testing.T) *gpu {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	sharedOnce.Do(func() { sharedG, sharedErr = openGPU() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	if err := sharedG.bind(); err != nil {
		t.Fatal(err)
	}
	var cur uintptr
	purego.SyscallN(sharedG.drv.cuCtxGetCurrent, uintptr(unsafe.Pointer(&cur)))
	if cur != sharedG.ctx {
		t.Fatalf("current context %#x after binding %#x", cur, sharedG.ctx)
	}
	return sharedG
}

// devBuf allocates bytes on the GPU, filled with 0xFF: NaN as fp16 and fp32,
// -1 as int32, so an element a kernel never writes is caught.
func devBuf(t *testing.T, g *gpu, bytes int) devPtr {
	t.Helper()
	p, err := g.drv.memAlloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.drv.memFree(p) })
	if err := g.sync(); err != nil {
		t.Fatalf("before poisoning %d bytes: stream reports %v", bytes, err)
	}
	r, _, _ := purego.SyscallN(g.drv.cuMemsetD8, uintptr(p), 0xff, uintptr(bytes))
	if err := g.drv.check("cuMemsetD8_v2", r); err != nil {
		var cur uintptr
		purego.SyscallN(g.drv.cuCtxGetCurrent, uintptr(unsafe.Pointer(&cur)))
		t.Fatalf("poisoning %d bytes at %#x (ctx %#x, current %#x): %v", bytes, p, g.ctx, cur, err)
	}
	return p
}

func upload[T any](t *testing.T, g *gpu, data []T) devPtr {
	t.Helper()
	var zero T
	size := int(unsafe.Sizeof(zero)) * len(data)
	p := devBuf(t, g, size)
	if err := g.sync(); err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 {
		if err := g.drv.htod(p, unsafe.Pointer(&data[0]), size); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func download[T any](t *testing.T, g *gpu, p devPtr, n int) []T {
	t.Helper()
	if err := g.sync(); err != nil {
		t.Fatal(err)
	}
	out := make([]T, n)
	var zero T
	if n > 0 {
		if err := g.drv.dtoh(unsafe.Pointer(&out[0]), p, n*int(unsafe.Sizeof(zero))); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func toF16(x []float32) []uint16 {
	out := make([]uint16, len(x))
	for i, v := range x {
		out[i] = f32ToF16(v)
	}
	return out
}

func fromF16(x []uint16) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = f16ToF32(v)
	}
	return out
}

// roundF16 is x as the GPU sees it after the fp16 upload.
func roundF16(x []float32) []float32 { return fromF16(toF16(x)) }

func hasNaN(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) {
			return true
		}
	}
	return false
}
