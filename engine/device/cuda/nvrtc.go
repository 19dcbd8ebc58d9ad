package cuda

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// nvrtc compiles CUDA C to a cubin for the GPU we run on. It needs no GPU
// itself, so the kernel sources can be compile-checked on any machine that
// has the library (see TestKernelsCompile).
type nvrtc struct {
	lib                                                uintptr
	path                                               string
	create, compile, destroy, logSize, getLog, errText uintptr
	cubinSize, getCubin, version                       uintptr
	major, minor                                       int
}

func loadNVRTC() (*nvrtc, error) {
	lib, err := openLibrary("libnvrtc (CUDA runtime compiler)",
		[]string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, false)
	if err != nil {
		return nil, err
	}
	n := &nvrtc{lib: lib.handle, path: lib.path}
	err = lib.symbols(map[*uintptr][]string{
		&n.create:    {"nvrtcCreateProgram"},
		&n.compile:   {"nvrtcCompileProgram"},
		&n.destroy:   {"nvrtcDestroyProgram"},
		&n.logSize:   {"nvrtcGetProgramLogSize"},
		&n.getLog:    {"nvrtcGetProgramLog"},
		&n.errText:   {"nvrtcGetErrorString"},
		&n.cubinSize: {"nvrtcGetCUBINSize"},
		&n.getCubin:  {"nvrtcGetCUBIN"},
		&n.version:   {"nvrtcVersion"},
	})
	if err != nil {
		return nil, err
	}
	var major, minor int32
	purego.SyscallN(n.version, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor)))
	n.major, n.minor = int(major), int(minor)
	return n, nil
}

func (n *nvrtc) errString(code uintptr) string {
	p, _, _ := purego.SyscallN(n.errText, code)
	return goString(p)
}

// compileError carries NVRTC's log, which names the file and line.
type compileError struct {
	name string
	log  string
}

func (e *compileError) Error() string {
	return fmt.Sprintf("cuda: NVRTC failed to compile %s:\n%s", e.name, e.log)
}

// compileCubin compiles src (named name, with headers resolvable by
// #include "<name>") for arch ("sm_90") and returns the cubin.
func (n *nvrtc) compileCubin(name, src string, headers map[string]string, arch string, extraOpts []string) ([]byte, error) {
	arena, err := newCArena(1 << 20)
	if err != nil {
		return nil, err
	}
	defer arena.free()
	hdrNames := make([]string, 0, len(headers))
	hdrSrcs := make([]string, 0, len(headers))
	for k, v := range headers {
		hdrNames = append(hdrNames, k)
		hdrSrcs = append(hdrSrcs, v)
	}
	cSrc, err := arena.cString(src)
	if err != nil {
		return nil, err
	}
	cName, _ := arena.cString(name)
	cHdrSrcs, err := arena.cStringArray(hdrSrcs)
	if err != nil {
		return nil, err
	}
	cHdrNames, _ := arena.cStringArray(hdrNames)
	opts := append([]string{"--gpu-architecture=" + arch, "--std=c++17", "-default-device"}, extraOpts...)
	cOpts, _ := arena.cStringArray(opts)

	var prog uintptr
	r, _, _ := purego.SyscallN(n.create, uintptr(unsafe.Pointer(&prog)), cSrc, cName, uintptr(len(headers)), cHdrSrcs, cHdrNames)
	if r != 0 {
		return nil, fmt.Errorf("cuda: nvrtcCreateProgram(%s): %s", name, n.errString(r))
	}
	defer purego.SyscallN(n.destroy, uintptr(unsafe.Pointer(&prog)))

	r, _, _ = purego.SyscallN(n.compile, prog, uintptr(len(opts)), cOpts)
	logText := n.programLog(prog)
	if r != 0 {
		if logText == "" {
			logText = n.errString(r)
		}
		return nil, &compileError{name: name, log: logText}
	}
	var size uintptr
	r, _, _ = purego.SyscallN(n.cubinSize, prog, uintptr(unsafe.Pointer(&size)))
	if r != 0 || size == 0 {
		return nil, fmt.Errorf("cuda: nvrtcGetCUBINSize(%s): %s (is %s a real architecture?)", name, n.errString(r), arch)
	}
	cubin := make([]byte, size)
	r, _, _ = purego.SyscallN(n.getCubin, prog, uintptr(unsafe.Pointer(&cubin[0])))
	if r != 0 {
		return nil, fmt.Errorf("cuda: nvrtcGetCUBIN(%s): %s", name, n.errString(r))
	}
	return cubin, nil
}

func (n *nvrtc) programLog(prog uintptr) string {
	var size uintptr
	purego.SyscallN(n.logSize, prog, uintptr(unsafe.Pointer(&size)))
	if size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	purego.SyscallN(n.getLog, prog, uintptr(unsafe.Pointer(&buf[0])))
	return strings.TrimRight(string(buf), "\x00\n")
}
