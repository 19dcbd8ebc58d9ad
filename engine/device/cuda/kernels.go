package cuda

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The kernels are CUDA C, one concern per file, embedded in the binary and
// compiled by NVRTC for the GPU at hand the first time they are needed.
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// labKernelFiles are kernel files of the cudalab build (name -> source;
// lab_ceilings.go), compiled beside the product's.
var labKernelFiles = map[string]string{}

// labKernelDir, set by the cudalab build (lab_env.go), is a directory whose
// .cu and .cuh files replace the embedded ones of the same name.
var labKernelDir string

// kernelSources returns the .cu files (name -> source) and the headers they
// may #include.
func kernelSources() (files, headers map[string]string, err error) {
	files, headers = map[string]string{}, map[string]string{}
	if err := readKernelDir(kernelFS, "kernels", files, headers); err != nil {
		return nil, nil, err
	}
	for name, src := range labKernelFiles {
		files[name] = src
	}
	if labKernelDir != "" {
		if err := readKernelDir(os.DirFS(labKernelDir), ".", files, headers); err != nil {
			return nil, nil, fmt.Errorf("cuda: kernel override directory %s: %w", labKernelDir, err)
		}
	}
	return files, headers, nil
}

// readKernelDir adds dir's .cu files to files and its .cuh files to
// headers, replacing entries of the same name.
func readKernelDir(fsys fs.FS, dir string, files, headers map[string]string) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		switch filepath.Ext(e.Name()) {
		case ".cu":
			files[e.Name()] = string(b)
		case ".cuh":
			headers[e.Name()] = string(b)
		}
	}
	return nil
}

// cacheDir is where compiled cubins live between runs:
// $ROSEINFER_CUDA_CACHE, else the user cache dir. Empty = no disk cache.
func cacheDir() string {
	if d := os.Getenv("ROSEINFER_CUDA_CACHE"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "roseinfer", "cuda-kernels")
}

// cacheKey hashes everything that changes the cubin: the source and all
// headers, the target architecture, and the compiler and driver versions.
func cacheKey(name, src string, headers map[string]string, arch string, nvrtcVer string, driverVer int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\x00", name, src, arch, nvrtcVer, driverVer)
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", k, headers[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// compileKernels returns one cubin per .cu file, from the disk cache when the
// key matches, compiling the rest in parallel (NVRTC programs are independent).
func compileKernels(nv *nvrtc, arch string, driverVer int) (map[string][]byte, error) {
	files, headers, err := kernelSources()
	if err != nil {
		return nil, err
	}
	dir := cacheDir()
	nvVer := fmt.Sprintf("%d.%d", nv.major, nv.minor)
	out := make(map[string][]byte, len(files))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []string
	for name, src := range files {
		arch := kernelArch(name, arch, nv.major)
		if arch == "" {
			continue // not for this GPU or compiler: its kernels stay unloaded
		}
		wg.Add(1)
		go func(name, src string) {
			defer wg.Done()
			key := cacheKey(name, src, headers, arch, nvVer, driverVer)
			path := ""
			if dir != "" {
				path = filepath.Join(dir, strings.TrimSuffix(name, ".cu")+"-"+arch+"-"+key+".cubin")
				if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
					mu.Lock()
					out[name] = b
					mu.Unlock()
					return
				}
			}
			cubin, err := nv.compileCubin(name, src, headers, arch, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			out[name] = cubin
			if path != "" {
				writeCacheFile(path, cubin) // best effort: a read-only home only costs a recompile
			}
		}(name, src)
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

func writeCacheFile(path string, data []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cubin-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}

// kernel is one __global__ function, ready to launch.
type kernel struct {
	name string
	fn   uintptr
}

// loadModules loads each cubin and looks up every extern "C" kernel by name.
func (g *gpu) loadModules(cubins map[string][]byte, names []string) error {
	for file, cubin := range cubins {
		var mod uintptr
		if err := g.drv.call("cuModuleLoadData("+file+")", g.drv.cuModuleLoadData, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&cubin[0]))); err != nil {
			return err
		}
		g.modules = append(g.modules, mod)
	}
	g.kernels = map[string]kernel{}
	for _, name := range names {
		if !g.findKernel(name) {
			return fmt.Errorf("cuda: kernel %s not found in any compiled module", name)
		}
	}
	for _, name := range append(append(append(wgKernelNames(), q3WGKernelNames()...), q3AttnWGKernel), q3GemmWSKernels...) { // only where kernelArch built the sm_90a files
		g.findKernel(name)
	}
	return nil
}

// findKernel looks name up in the loaded modules and records it.
func (g *gpu) findKernel(name string) bool {
	for _, mod := range g.modules {
		var fn uintptr
		cName := append([]byte(name), 0)
		r, _, _ := purego.SyscallN(g.drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&fn)), mod, uintptr(unsafe.Pointer(&cName[0])))
		if r == cuSuccess {
			g.kernels[name] = kernel{name: name, fn: fn}
			return true
		}
	}
	return false
}

// launch enqueues k on the GPU's stream. Each argument is an 8-byte slot in
// C memory (see argPtr/argInt/argF32); the driver copies them at launch, so
// the slots are reused by the next launch.
func (g *gpu) launch(k kernel, gridX, gridY, gridZ, block, smem int, args ...uint64) error {
	return g.launchOn(g.stream, g.pdl, k, gridX, gridY, gridZ, block, smem, args...)
}

// launchOn is launch on stream, with programmatic dependent launch where pdl
// (a side stream's kernels, off the step's chain, launch without it).
func (g *gpu) launchOn(stream uintptr, pdl bool, k kernel, gridX, gridY, gridZ, block, smem int, args ...uint64) error {
	if gridX <= 0 || gridY <= 0 || gridZ <= 0 {
		return nil // nothing to do: an empty batch part
	}
	if len(args) > maxKernelArgs {
		return fmt.Errorf("cuda: %s: %d arguments, at most %d", k.name, len(args), maxKernelArgs)
	}
	for i, a := range args {
		g.argSlots[i] = a
		g.argPtrs[i] = g.argSlotsAddr + uintptr(8*i)
	}
	var r uintptr
	if pdl && g.drv.cuLaunchKernelEx != 0 {
		*g.launchCfg = launchConfig{gridX: uint32(gridX), gridY: uint32(gridY), gridZ: uint32(gridZ), blockX: uint32(block), blockY: 1, blockZ: 1,
			sharedMem: uint32(smem), stream: stream, attrs: g.attrAddr, numAttrs: 1}
		r, _, _ = purego.SyscallN(g.drv.cuLaunchKernelEx, uintptr(unsafe.Pointer(g.launchCfg)), k.fn, g.argPtrsAddr, 0)
	} else {
		r, _, _ = purego.SyscallN(g.drv.cuLaunchKernel, k.fn, uintptr(gridX), uintptr(gridY), uintptr(gridZ),
			uintptr(block), 1, 1, uintptr(smem), stream, g.argPtrsAddr, 0)
	}
	if r != cuSuccess {
		return fmt.Errorf("launch %s (grid %d,%d,%d block %d smem %d): %w", k.name, gridX, gridY, gridZ, block, smem, g.drv.check("cuLaunchKernel", r))
	}
	return nil
}

// launchCluster launches k on a grid of gridX x gridY x gridZ blocks grouped in
// thread-block clusters of 1 x clusterY (Hopper), with programmatic
// dependent launch when it is on, and smem bytes of dynamic shared memory
// (setMaxDynamicSmem must have allowed that much).
func (g *gpu) launchCluster(k kernel, gridX, gridY, gridZ, clusterY, block, smem int, args ...uint64) error {
	return g.launchClusterRefs(k, gridX, gridY, gridZ, clusterY, block, smem, nil, args...)
}

// launchClusterRefs is launchCluster for a kernel whose first len(refs)
// parameters are larger than a slot (a CUtensorMap): refs holds the C
// addresses of their bytes, which the driver copies at launch.
func (g *gpu) launchClusterRefs(k kernel, gridX, gridY, gridZ, clusterY, block, smem int, refs []uintptr, args ...uint64) error {
	if g.drv.cuLaunchKernelEx == 0 {
		return fmt.Errorf("cuda: %s needs cuLaunchKernelEx (driver too old for clusters)", k.name)
	}
	if len(refs)+len(args) > maxKernelArgs {
		return fmt.Errorf("cuda: %s: %d arguments, at most %d", k.name, len(refs)+len(args), maxKernelArgs)
	}
	copy(g.argPtrs, refs)
	for i, a := range args {
		g.argSlots[i] = a
		g.argPtrs[len(refs)+i] = g.argSlotsAddr + uintptr(8*i)
	}
	*g.clusterDims = [3]uint32{1, uint32(clusterY), 1}
	attrs, n := g.attrAddr, uint32(2)
	if !g.pdl {
		attrs, n = g.attrAddr+launchAttrBytes, 1 // the cluster attribute alone
	}
	*g.launchCfg = launchConfig{gridX: uint32(gridX), gridY: uint32(gridY), gridZ: uint32(gridZ), blockX: uint32(block), blockY: 1, blockZ: 1,
		sharedMem: uint32(smem), stream: g.stream, attrs: attrs, numAttrs: n}
	r, _, _ := purego.SyscallN(g.drv.cuLaunchKernelEx, uintptr(unsafe.Pointer(g.launchCfg)), k.fn, g.argPtrsAddr, 0)
	if r != cuSuccess {
		return fmt.Errorf("launch %s (grid %d,%d,%d cluster 1,%d block %d smem %d): %w", k.name, gridX, gridY, gridZ, clusterY, block, smem, g.drv.check("cuLaunchKernelEx", r))
	}
	return nil
}

// setMaxDynamicSmem lets k ask for up to bytes of dynamic shared memory
// (above 48 KiB a kernel must opt in).
func (g *gpu) setMaxDynamicSmem(k kernel, bytes int) error {
	if bytes > g.smemOptIn {
		return fmt.Errorf("cuda: %s needs %d bytes of shared memory per block, the GPU allows %d", k.name, bytes, g.smemOptIn)
	}
	return g.drv.call("cuFuncSetAttribute", g.drv.cuFuncSetAttribute, k.fn, funcAttrMaxDynamicShared, uintptr(bytes))
}

const maxKernelArgs = 32
