package cuda

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TestKernelResources compiles every kernel file with ptxas' resource report
// and fails on register spills or a stack frame (an array that went to local
// memory: slow, and usually a run-time index into a register array) beyond
// the few known ones in spillAllowance. It logs each kernel's registers and
// shared memory. Skips without NVRTC.
func TestKernelResources(t *testing.T) {
	nv, files, headers := testNVRTC(t)
	for name, src := range files {
		arch := kernelArch(name, "sm_90", nv.major)
		if arch == "" {
			arch = "sm_90" // the file's kernels without their features (TestKernelsCompile)
		}
		log, err := nv.compileLog(name, src, headers, arch, []string{"--ptxas-options=-v"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkResourceLog(t, name, log)
	}
}

// spillAllowance: stack-frame and spill bytes tolerated per kernel beyond
// the default (a few bytes, which ptxas versions move around). Head size 128
// is off GPT-2's path; the sampler's spills belong to its general (top_k
// off) path, and at 262,144 ids to draw_all's float64 loop (168 bytes
// stored, 184 loaded with NVRTC 13 at 64 registers; none below that
// vocabulary); sincosf keeps its slow path's range reduction (angles past
// 105,615 rad, far positions) on the stack.
var spillAllowance = map[string]int{
	"attention_prefill_128": 1024,
	"sample_rows":           64,
	"sample_rows_large":     192,
	"sample_rows_large_bf":  192,
	"q3_embed":              32,
	"q3f_embed":             32,
}

const defaultSpillAllowance = 16

func allowedSpill(fn string) int {
	if n, ok := spillAllowance[fn]; ok {
		return n
	}
	return defaultSpillAllowance
}

var (
	reFunction = regexp.MustCompile(`Compiling entry function '(\w+)'`)
	reFrame    = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reUsed     = regexp.MustCompile(`Used (\d+) registers(.*)`)
)

func checkResourceLog(t *testing.T, file, log string) {
	t.Helper()
	fn := ""
	for _, line := range strings.Split(log, "\n") {
		if m := reFunction.FindStringSubmatch(line); m != nil {
			fn = m[1]
		}
		if m := reFrame.FindStringSubmatch(line); m != nil {
			frame, _ := strconv.Atoi(m[1])
			spill, _ := strconv.Atoi(m[2])
			if frame > allowedSpill(fn) || spill > allowedSpill(fn) {
				t.Errorf("%s %s: %s", file, fn, strings.TrimSpace(line))
			}
		}
		if m := reUsed.FindStringSubmatch(line); m != nil {
			t.Logf("%-20s %-34s %s registers%s", file, fn, m[1], m[2])
		}
	}
}

// compileLog compiles like compileCubin and returns NVRTC's log.
func (n *nvrtc) compileLog(name, src string, headers map[string]string, arch string, extraOpts []string) (string, error) {
	arena, err := newCArena(1 << 20)
	if err != nil {
		return "", err
	}
	defer arena.free()
	var hdrNames, hdrSrcs []string
	for k, v := range headers {
		hdrNames, hdrSrcs = append(hdrNames, k), append(hdrSrcs, v)
	}
	cSrc, _ := arena.cString(src)
	cName, _ := arena.cString(name)
	cHdrSrcs, _ := arena.cStringArray(hdrSrcs)
	cHdrNames, _ := arena.cStringArray(hdrNames)
	opts := append([]string{"--gpu-architecture=" + arch, "--std=c++17", "-default-device"}, extraOpts...)
	cOpts, _ := arena.cStringArray(opts)
	var prog uintptr
	if r, _, _ := purego.SyscallN(n.create, uintptr(unsafe.Pointer(&prog)), cSrc, cName, uintptr(len(headers)), cHdrSrcs, cHdrNames); r != 0 {
		return "", errors.New(n.errString(r))
	}
	defer purego.SyscallN(n.destroy, uintptr(unsafe.Pointer(&prog)))
	r, _, _ := purego.SyscallN(n.compile, prog, uintptr(len(opts)), cOpts)
	log := n.programLog(prog)
	if r != 0 {
		return "", &compileError{name: name, log: log}
	}
	return log, nil
}
