package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// gpu is one CUDA device made ready: libraries loaded, the primary context
// retained, a stream, the kernels compiled and loaded, a cuBLASLt handle.
// Calls into it must come from a goroutine locked to its OS thread with the
// context current (see bind), since a CUDA context is per OS thread.
type gpu struct {
	drv    *driver
	nv     *nvrtc
	blas   *blasLt
	dev    int32
	ctx    uintptr
	stream uintptr
	// copyStream carries each step's inputs up while the step before it
	// still runs on stream (Device.uploadInputs).
	copyStream uintptr

	name          string
	arch          string // "sm_90"
	ccMajor       int
	smCount       int
	driverVersion int

	modules []uintptr
	kernels map[string]kernel

	argArena     *cArena
	argSlots     []uint64  // C memory: kernel argument values
	argPtrs      []uintptr // C memory: void** kernelParams
	argSlotsAddr uintptr
	argPtrsAddr  uintptr

	// pdl: launch with programmatic stream serialization (Hopper's
	// programmatic dependent launch), so a kernel is scheduled while the
	// previous one finishes and waits inside (grid_dep_wait in common.cuh).
	pdl       bool
	launchCfg *launchConfig // C memory: CUlaunchConfig
	attrAddr  uintptr       // C memory: two CUlaunchAttributes, PDL then cluster dimension
	// clusterDims is the cluster attribute's value (x, y, z), in attrAddr's memory.
	clusterDims *[3]uint32
	// smemOptIn is the most dynamic shared memory a block may ask for.
	smemOptIn int
}

// launchConfig is CUlaunchConfig (cuda.h), 56 bytes.
type launchConfig struct {
	gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMem uint32
	_                                                      uint32
	stream, attrs                                          uintptr
	numAttrs                                               uint32
	_                                                      uint32
}

const (
	launchAttrClusterDimension          = 4  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
	launchAttrProgrammaticSerialization = 6  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
	launchAttrBytes                     = 72 // CUlaunchAttribute: id, pad to 8, 64-byte value union
)

var (
	probeOnce sync.Once
	probeErr  error
)

// Available reports whether this machine can run the CUDA device: the
// driver, a GPU, NVRTC and cuBLASLt. A nil error means New can be tried;
// the error names what is missing otherwise. The answer is cached.
func Available() error {
	probeOnce.Do(func() {
		drv, err := loadDriver()
		if err != nil {
			probeErr = err
			return
		}
		if err := drv.call("cuInit", drv.cuInit, 0); err != nil {
			probeErr = fmt.Errorf("cuda: driver present but no usable GPU: %w", err)
			return
		}
		var dev int32
		if err := drv.call("cuDeviceGet", drv.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(deviceOrdinal())); err != nil {
			probeErr = fmt.Errorf("cuda: no GPU %d: %w", deviceOrdinal(), err)
			return
		}
		if _, err := loadNVRTC(); err != nil {
			probeErr = err
			return
		}
		if _, err := openLibrary("libcublasLt (cuBLASLt)",
			[]string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"}, false); err != nil {
			probeErr = err
		}
	})
	return probeErr
}

// deviceOrdinal is ROSEINFER_CUDA_DEVICE (default 0); CUDA_VISIBLE_DEVICES
// is honoured by the driver itself.
func deviceOrdinal() int {
	if v, err := strconv.Atoi(os.Getenv("ROSEINFER_CUDA_DEVICE")); err == nil && v >= 0 {
		return v
	}
	return 0
}

// kernelNames lists every extern "C" kernel the device launches; loading
// fails early and by name if one is missing.
var kernelNames = []string{
	"encoder_forward", "layernorm_forward", "residual_add", "gather_rows_f16", "kv_write",
	"attention_decode_32", "attention_decode_64", "attention_decode_128", "attention_decode_combine",
	"attention_prefill_32", "attention_prefill_64", "attention_prefill_128", "attention_prefill_mma_64",
	"sample_rows", "sample_rows_h", "attention_decode_warp_64", "attention_decode_warp_splits_64", "attention_decode_warp_splits_r4_64",
}

// labKernelNames are the kernels of labKernelFiles.
var labKernelNames []string

// openGPU initialises the device on the calling goroutine's OS thread, which
// the caller must have locked.
func openGPU() (*gpu, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	g := &gpu{}
	var err error
	if g.drv, err = loadDriver(); err != nil {
		return nil, err
	}
	d := g.drv
	if err := d.call("cuInit", d.cuInit, 0); err != nil {
		return nil, err
	}
	if err := d.call("cuDeviceGet", d.cuDeviceGet, uintptr(unsafe.Pointer(&g.dev)), uintptr(deviceOrdinal())); err != nil {
		return nil, err
	}
	if err := d.call("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&g.ctx)), uintptr(g.dev)); err != nil {
		return nil, err
	}
	if err := g.bind(); err != nil {
		return nil, err
	}
	g.name = d.deviceName(g.dev)
	major, err := d.deviceAttr(g.dev, attrComputeCapMajor)
	if err != nil {
		return nil, err
	}
	minor, _ := d.deviceAttr(g.dev, attrComputeCapMinor)
	g.ccMajor = major
	g.arch = fmt.Sprintf("sm_%d%d", major, minor)
	g.smCount, _ = d.deviceAttr(g.dev, attrMultiprocessorCount)
	g.driverVersion, _ = d.version()
	for _, s := range []*uintptr{&g.stream, &g.copyStream} {
		if err := d.call("cuStreamCreate", d.cuStreamCreate, uintptr(unsafe.Pointer(s)), streamNonBlocking); err != nil {
			return nil, err
		}
	}
	if g.argArena, err = newCArena(4096); err != nil {
		return nil, err
	}
	slots, _ := g.argArena.alloc(8 * maxKernelArgs)
	ptrs, _ := g.argArena.alloc(8 * maxKernelArgs)
	g.argSlots = unsafe.Slice((*uint64)(slots), maxKernelArgs)
	g.argPtrs = unsafe.Slice((*uintptr)(ptrs), maxKernelArgs)
	g.argSlotsAddr, g.argPtrsAddr = uintptr(slots), uintptr(ptrs)
	cfg, _ := g.argArena.alloc(int(unsafe.Sizeof(launchConfig{})))
	attr, _ := g.argArena.alloc(2 * launchAttrBytes)
	g.launchCfg, g.attrAddr = (*launchConfig)(cfg), uintptr(attr)
	*(*uint32)(attr) = launchAttrProgrammaticSerialization
	*(*int32)(unsafe.Add(attr, 8)) = 1 // programmaticStreamSerializationAllowed
	*(*uint32)(unsafe.Add(attr, launchAttrBytes)) = launchAttrClusterDimension
	g.clusterDims = (*[3]uint32)(unsafe.Add(attr, launchAttrBytes+8)) // set per launch
	g.smemOptIn, _ = d.deviceAttr(g.dev, attrMaxSharedPerBlockOpt)

	if g.nv, err = loadNVRTC(); err != nil {
		return nil, err
	}
	cubins, err := compileKernels(g.nv, g.arch, g.driverVersion)
	if err != nil {
		return nil, err
	}
	if err := g.loadModules(cubins, append(append(append(append(append(append([]string{}, kernelNames...), rotaryKernelNames...), labKernelNames...), gemvKernelNames()...), lmheadKernelNames()...), skinnyKernelNames()...)); err != nil {
		return nil, err
	}
	if g.blas, err = loadBlasLt(d); err != nil {
		return nil, err
	}
	return g, nil
}

// bind makes the context current on this OS thread. The caller has locked
// the goroutine (runtime.LockOSThread) for as long as it talks to the GPU.
func (g *gpu) bind() error {
	return g.drv.call("cuCtxSetCurrent", g.drv.cuCtxSetCurrent, g.ctx)
}

// sync waits for all work queued on the stream.
func (g *gpu) sync() error { return g.drv.streamSync(g.stream) }

func (g *gpu) kernel(name string) kernel { return g.kernels[name] }

func (g *gpu) close() {
	if g == nil || g.drv == nil {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = g.bind()
	_ = g.sync()
	if g.copyStream != 0 {
		_ = g.drv.streamSync(g.copyStream)
	}
	if g.blas != nil {
		g.blas.close()
		g.blas = nil
	}
	for _, m := range g.modules {
		purego.SyscallN(g.drv.cuModuleUnload, m)
	}
	g.modules = nil
	for _, s := range []*uintptr{&g.stream, &g.copyStream} {
		if *s != 0 {
			purego.SyscallN(g.drv.cuStreamDestroy, *s)
			*s = 0
		}
	}
	if g.argArena != nil {
		g.argArena.free()
		g.argArena = nil
	}
	// The primary context stays retained for the life of the process, as
	// the CUDA runtime keeps it: releasing the last reference would reset
	// the device under any other user in this process (another Device, a
	// test's handle), invalidating its streams.
	g.ctx = 0
}
