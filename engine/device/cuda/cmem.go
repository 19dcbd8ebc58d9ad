package cuda

import (
	"fmt"
	"math"
	"syscall"
	"unsafe"
)

// cArena is memory outside the Go heap (an anonymous mapping) for the small
// arrays that C keeps pointers into during a call: kernel parameter arrays,
// NVRTC option strings. Go memory holding Go pointers may not be handed to C
// (cgo's rules, which purego inherits), and a mapping never moves.
type cArena struct {
	buf []byte
	off int
}

func newCArena(size int) (*cArena, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("cuda: mmap %d bytes: %w", size, err)
	}
	return &cArena{buf: b}, nil
}

func (a *cArena) reset() { a.off = 0 }

// alloc returns n bytes aligned to 8.
func (a *cArena) alloc(n int) (unsafe.Pointer, error) {
	start := (a.off + 7) &^ 7
	if start+n > len(a.buf) {
		return nil, fmt.Errorf("cuda: C arena full (%d of %d bytes)", start+n, len(a.buf))
	}
	a.off = start + n
	return unsafe.Pointer(&a.buf[start]), nil
}

// cString copies s with a NUL terminator into the arena.
func (a *cArena) cString(s string) (uintptr, error) {
	p, err := a.alloc(len(s) + 1)
	if err != nil {
		return 0, err
	}
	dst := unsafe.Slice((*byte)(p), len(s)+1)
	copy(dst, s)
	dst[len(s)] = 0
	return uintptr(p), nil
}

// cStringArray copies strs into the arena and returns a char** to them.
func (a *cArena) cStringArray(strs []string) (uintptr, error) {
	if len(strs) == 0 {
		return 0, nil
	}
	arr, err := a.alloc(8 * len(strs))
	if err != nil {
		return 0, err
	}
	ptrs := unsafe.Slice((*uintptr)(arr), len(strs))
	for i, s := range strs {
		if ptrs[i], err = a.cString(s); err != nil {
			return 0, err
		}
	}
	return uintptr(arr), nil
}

func (a *cArena) free() {
	if a.buf != nil {
		_ = syscall.Munmap(a.buf)
		a.buf = nil
	}
}

// goString reads a NUL-terminated C string (error names, NVRTC logs).
func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	n := 0
	for *(*byte)(cptr(p + uintptr(n))) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(cptr(p)), n))
}

// cptr turns an address that C returned into a pointer. The address is C
// memory, never the Go heap, so the GC has nothing to track; the double
// conversion keeps vet's unsafeptr check quiet about a deliberate case.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// Kernel arguments travel as 8-byte slots; the kernel reads sizeof(param)
// bytes from each, so a 4-byte int or float sits in the low half (little endian).
func argPtr(p devPtr) uint64 { return uint64(p) }
func argInt(v int) uint64    { return uint64(uint32(int32(v))) }
func argF32(v float32) uint64 {
	return uint64(math.Float32bits(v))
}
