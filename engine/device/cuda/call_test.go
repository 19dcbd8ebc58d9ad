package cuda

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TestCallKeepsPointersAlive: a C function writing through a pointer to a Go
// stack variable, called through our variadic wrapper from fresh goroutines
// (small stacks that grow during the call), must land in the variable. Without
// go:uintptrescapes on the wrapper the variable stays on the stack, the stack
// moves, and the write is lost (this broke cuMemAlloc in new goroutines).
func TestCallKeepsPointersAlive(t *testing.T) {
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	memcpy, err := purego.Dlsym(libc, "memcpy")
	if err != nil {
		t.Fatal(err)
	}
	b := &blasLt{}
	src := new(uint64)
	*src = 0xdeadbeef
	var lost sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	for i := 0; i < 2000; i++ {
		lost.Go(func() {
			var dst uint64
			b.call(memcpy, uintptr(unsafe.Pointer(&dst)), uintptr(unsafe.Pointer(src)), 8)
			if dst != *src {
				mu.Lock()
				bad++
				mu.Unlock()
			}
		})
	}
	lost.Wait()
	if bad > 0 {
		t.Fatalf("%d of 2000 writes through a converted pointer were lost", bad)
	}
}
