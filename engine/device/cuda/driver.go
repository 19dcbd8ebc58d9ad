package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// devPtr is a CUdeviceptr: an address in GPU memory.
type devPtr uintptr

// driver holds the CUDA driver API entry points we use. Every call goes
// through purego.SyscallN with integer/pointer arguments only: no struct is
// passed by value and no float crosses the boundary (the few float outputs,
// like cuEventElapsedTime's, come back through pointers).
type driver struct {
	lib *library

	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString                      uintptr
	cuDeviceGet, cuDeviceGetAttribute, cuDeviceGetName, cuDeviceTotalMem              uintptr
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent              uintptr
	cuCtxSynchronize, cuMemGetInfo                                                    uintptr
	cuMemAlloc, cuMemFree, cuMemHostAlloc, cuMemFreeHost, cuMemHostGetDevicePointer   uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync                  uintptr
	cuMemcpyDtoDAsync, cuMemsetD8Async, cuMemsetD32Async, cuMemsetD8, cuCtxGetCurrent uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize, cuStreamWaitEvent           uintptr
	cuEventCreate, cuEventDestroy, cuEventRecord, cuEventSynchronize, cuEventQuery    uintptr
	cuEventElapsedTime, cuEventRecordWithFlags                                        uintptr
	cuModuleLoadData, cuModuleUnload, cuModuleGetFunction, cuFuncSetAttribute         uintptr
	cuLaunchKernel                                                                    uintptr
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiate, cuGraphLaunch       uintptr
	cuGraphDestroy, cuGraphExecDestroy                                                uintptr
	cuProfilerStart, cuProfilerStop                                                   uintptr // optional: 0 when absent
	cuLaunchKernelEx                                                                  uintptr // optional (CUDA 12+): programmatic dependent launch
	cuTensorMapEncodeTiled                                                            uintptr // optional (CUDA 12+): gemm_wg.cu's TMA descriptors
	// optional: the sampler's span inside decode graphs (spans.go)
	cuGraphGetNodes, cuGraphNodeGetType, cuGraphEventRecordNodeGetEvent, cuGraphExecEventRecordNodeSetEvent uintptr
}

const (
	cuSuccess       = 0
	cuErrorNotReady = 600

	attrMultiprocessorCount  = 16
	attrComputeCapMajor      = 75
	attrComputeCapMinor      = 76
	attrMaxSharedPerBlockOpt = 97

	funcAttrMaxDynamicShared  = 8
	funcAttrPreferredCarveout = 9

	streamNonBlocking     = 1
	eventDisableTiming    = 2
	captureModeThreadLoc  = 1
	memHostAllocPortable  = 1
	memHostAllocDeviceMap = 2
	graphInstantiateFlags = 0
)

func loadDriver() (*driver, error) {
	lib, err := openLibrary("libcuda (the NVIDIA driver)", []string{"libcuda.so.1", "libcuda.so"}, true)
	if err != nil {
		return nil, err
	}
	d := &driver{lib: lib}
	err = lib.symbols(map[*uintptr][]string{
		&d.cuInit:                    {"cuInit"},
		&d.cuDriverGetVersion:        {"cuDriverGetVersion"},
		&d.cuGetErrorName:            {"cuGetErrorName"},
		&d.cuGetErrorString:          {"cuGetErrorString"},
		&d.cuDeviceGet:               {"cuDeviceGet"},
		&d.cuDeviceGetAttribute:      {"cuDeviceGetAttribute"},
		&d.cuDeviceGetName:           {"cuDeviceGetName"},
		&d.cuDeviceTotalMem:          {"cuDeviceTotalMem_v2"},
		&d.cuDevicePrimaryCtxRetain:  {"cuDevicePrimaryCtxRetain"},
		&d.cuDevicePrimaryCtxRelease: {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
		&d.cuCtxSetCurrent:           {"cuCtxSetCurrent"},
		&d.cuCtxSynchronize:          {"cuCtxSynchronize"},
		&d.cuMemGetInfo:              {"cuMemGetInfo_v2"},
		&d.cuMemAlloc:                {"cuMemAlloc_v2"},
		&d.cuMemFree:                 {"cuMemFree_v2"},
		&d.cuMemHostAlloc:            {"cuMemHostAlloc"},
		&d.cuMemFreeHost:             {"cuMemFreeHost"},
		&d.cuMemHostGetDevicePointer: {"cuMemHostGetDevicePointer_v2"},
		&d.cuMemcpyHtoD:              {"cuMemcpyHtoD_v2"},
		&d.cuMemcpyDtoH:              {"cuMemcpyDtoH_v2"},
		&d.cuMemcpyHtoDAsync:         {"cuMemcpyHtoDAsync_v2"},
		&d.cuMemcpyDtoHAsync:         {"cuMemcpyDtoHAsync_v2"},
		&d.cuMemcpyDtoDAsync:         {"cuMemcpyDtoDAsync_v2"},
		&d.cuMemsetD8Async:           {"cuMemsetD8Async"},
		&d.cuMemsetD32Async:          {"cuMemsetD32Async"},
		&d.cuMemsetD8:                {"cuMemsetD8_v2"},
		&d.cuCtxGetCurrent:           {"cuCtxGetCurrent"},
		&d.cuStreamCreate:            {"cuStreamCreate"},
		&d.cuStreamDestroy:           {"cuStreamDestroy_v2"},
		&d.cuStreamSynchronize:       {"cuStreamSynchronize"},
		&d.cuStreamWaitEvent:         {"cuStreamWaitEvent"},
		&d.cuEventCreate:             {"cuEventCreate"},
		&d.cuEventDestroy:            {"cuEventDestroy_v2"},
		&d.cuEventRecord:             {"cuEventRecord"},
		&d.cuEventSynchronize:        {"cuEventSynchronize"},
		&d.cuEventQuery:              {"cuEventQuery"},
		&d.cuEventElapsedTime:        {"cuEventElapsedTime_v2", "cuEventElapsedTime"},
		&d.cuEventRecordWithFlags:    {"cuEventRecordWithFlags"},
		&d.cuModuleLoadData:          {"cuModuleLoadData"},
		&d.cuModuleUnload:            {"cuModuleUnload"},
		&d.cuModuleGetFunction:       {"cuModuleGetFunction"},
		&d.cuFuncSetAttribute:        {"cuFuncSetAttribute"},
		&d.cuLaunchKernel:            {"cuLaunchKernel"},
		&d.cuStreamBeginCapture:      {"cuStreamBeginCapture_v2"},
		&d.cuStreamEndCapture:        {"cuStreamEndCapture"},
		&d.cuGraphInstantiate:        {"cuGraphInstantiateWithFlags"},
		&d.cuGraphLaunch:             {"cuGraphLaunch"},
		&d.cuGraphDestroy:            {"cuGraphDestroy"},
		&d.cuGraphExecDestroy:        {"cuGraphExecDestroy"},
	})
	if err != nil {
		return nil, err
	}
	d.cuProfilerStart, _ = lib.sym("cuProfilerStart")
	d.cuProfilerStop, _ = lib.sym("cuProfilerStop")
	d.cuLaunchKernelEx, _ = lib.sym("cuLaunchKernelEx")
	d.cuTensorMapEncodeTiled, _ = lib.sym("cuTensorMapEncodeTiled")
	d.cuGraphGetNodes, _ = lib.sym("cuGraphGetNodes")
	d.cuGraphNodeGetType, _ = lib.sym("cuGraphNodeGetType")
	d.cuGraphEventRecordNodeGetEvent, _ = lib.sym("cuGraphEventRecordNodeGetEvent")
	d.cuGraphExecEventRecordNodeSetEvent, _ = lib.sym("cuGraphExecEventRecordNodeSetEvent")
	return d, nil
}

// cuError is a failed driver call: which function, and the driver's own name
// and description of the code.
type cuError struct {
	fn   string
	code int
	name string
	desc string
}

func (e *cuError) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.fn, e.name, e.code, e.desc)
}

// check turns a CUresult into an error naming the call.
func (d *driver) check(fn string, r uintptr) error {
	code := int(int32(r))
	if code == cuSuccess {
		return nil
	}
	var name, desc uintptr
	purego.SyscallN(d.cuGetErrorName, uintptr(code), uintptr(unsafe.Pointer(&name)))
	purego.SyscallN(d.cuGetErrorString, uintptr(code), uintptr(unsafe.Pointer(&desc)))
	return &cuError{fn: fn, code: code, name: goString(name), desc: goString(desc)}
}

// call invokes fn and checks its CUresult. Callers pass pointers converted
// to uintptr in the argument list; go:uintptrescapes moves what they point to
// onto the heap and keeps it alive for the call, as purego.SyscallN does: a
// stack variable could otherwise move (stack growth) between the conversion
// and the C write, and the write would be lost.
//
//go:uintptrescapes
func (d *driver) call(name string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	return d.check(name, r)
}

func (d *driver) version() (int, error) {
	var v int32
	err := d.call("cuDriverGetVersion", d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	return int(v), err
}

func (d *driver) deviceAttr(dev int32, attr int) (int, error) {
	var v int32
	err := d.call("cuDeviceGetAttribute", d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(dev))
	return int(v), err
}

func (d *driver) deviceName(dev int32) string {
	buf := make([]byte, 256)
	if d.call("cuDeviceGetName", d.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev)) != nil {
		return "unknown"
	}
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	return string(buf[:n])
}

func (d *driver) memAlloc(bytes int) (devPtr, error) {
	if bytes <= 0 {
		bytes = 256
	}
	var p devPtr
	err := d.call("cuMemAlloc_v2", d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes))
	if err != nil {
		return 0, fmt.Errorf("%w (asked for %d bytes)", err, bytes)
	}
	return p, nil
}

func (d *driver) memFree(p devPtr) {
	if p != 0 {
		purego.SyscallN(d.cuMemFree, uintptr(p))
	}
}

// hostAlloc returns page-locked host memory, so async copies from it are
// real DMA transfers that a CUDA graph or the overlap path can rely on.
func (d *driver) hostAlloc(bytes int) (unsafe.Pointer, error) {
	var p uintptr
	if err := d.call("cuMemHostAlloc", d.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes), memHostAllocPortable); err != nil {
		return nil, err
	}
	return cptr(p), nil
}

// hostAllocMapped returns page-locked host memory that kernels can also
// write directly, and its device address: results a kernel stores there need
// no device-to-host copy after it.
func (d *driver) hostAllocMapped(bytes int) (unsafe.Pointer, devPtr, error) {
	var p uintptr
	if err := d.call("cuMemHostAlloc", d.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes), memHostAllocPortable|memHostAllocDeviceMap); err != nil {
		return nil, 0, err
	}
	var dp devPtr
	if err := d.call("cuMemHostGetDevicePointer_v2", d.cuMemHostGetDevicePointer, uintptr(unsafe.Pointer(&dp)), p, 0); err != nil {
		purego.SyscallN(d.cuMemFreeHost, p)
		return nil, 0, err
	}
	return cptr(p), dp, nil
}

func (d *driver) hostFree(p unsafe.Pointer) {
	if p != nil {
		purego.SyscallN(d.cuMemFreeHost, uintptr(p))
	}
}

func (d *driver) htod(dst devPtr, src unsafe.Pointer, bytes int) error {
	if bytes == 0 {
		return nil
	}
	return d.call("cuMemcpyHtoD_v2", d.cuMemcpyHtoD, uintptr(dst), uintptr(src), uintptr(bytes))
}

func (d *driver) dtoh(dst unsafe.Pointer, src devPtr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	return d.call("cuMemcpyDtoH_v2", d.cuMemcpyDtoH, uintptr(dst), uintptr(src), uintptr(bytes))
}

func (d *driver) htodAsync(dst devPtr, src unsafe.Pointer, bytes int, s uintptr) error {
	if bytes == 0 {
		return nil
	}
	r, _, _ := purego.SyscallN(d.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), s)
	return d.check("cuMemcpyHtoDAsync_v2", r)
}

func (d *driver) dtohAsync(dst unsafe.Pointer, src devPtr, bytes int, s uintptr) error {
	if bytes == 0 {
		return nil
	}
	r, _, _ := purego.SyscallN(d.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(bytes), s)
	return d.check("cuMemcpyDtoHAsync_v2", r)
}

func (d *driver) dtodAsync(dst, src devPtr, bytes int, s uintptr) error {
	if bytes == 0 {
		return nil
	}
	r, _, _ := purego.SyscallN(d.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), s)
	return d.check("cuMemcpyDtoDAsync_v2", r)
}

func (d *driver) memsetD32Async(dst devPtr, value uint32, count int, s uintptr) error {
	r, _, _ := purego.SyscallN(d.cuMemsetD32Async, uintptr(dst), uintptr(value), uintptr(count), s)
	return d.check("cuMemsetD32Async", r)
}

func (d *driver) memsetD8Async(dst devPtr, value byte, count int, s uintptr) error {
	r, _, _ := purego.SyscallN(d.cuMemsetD8Async, uintptr(dst), uintptr(value), uintptr(count), s)
	return d.check("cuMemsetD8Async", r)
}

func (d *driver) streamSync(s uintptr) error {
	r, _, _ := purego.SyscallN(d.cuStreamSynchronize, s)
	return d.check("cuStreamSynchronize", r)
}

// streamWaitEvent makes work queued on s after this call wait for e's
// last record, without blocking the host.
func (d *driver) streamWaitEvent(s, e uintptr) error {
	r, _, _ := purego.SyscallN(d.cuStreamWaitEvent, s, e, 0)
	return d.check("cuStreamWaitEvent", r)
}

func (d *driver) eventCreate(flags int) (uintptr, error) {
	var e uintptr
	err := d.call("cuEventCreate", d.cuEventCreate, uintptr(unsafe.Pointer(&e)), uintptr(flags))
	return e, err
}

func (d *driver) eventRecord(e, s uintptr) error {
	r, _, _ := purego.SyscallN(d.cuEventRecord, e, s)
	return d.check("cuEventRecord", r)
}

func (d *driver) eventSync(e uintptr) error {
	r, _, _ := purego.SyscallN(d.cuEventSynchronize, e)
	return d.check("cuEventSynchronize", r)
}

// eventElapsedMs is the time between two recorded events, in milliseconds.
func (d *driver) eventElapsedMs(start, end uintptr) (float32, error) {
	var ms float32
	err := d.call("cuEventElapsedTime", d.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start, end)
	return ms, err
}

func (d *driver) memInfo() (free, total int, err error) {
	var f, t uintptr
	err = d.call("cuMemGetInfo_v2", d.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return int(f), int(t), err
}
