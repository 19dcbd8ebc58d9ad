package cuda

import (
	"errors"
	"testing"
)

// TestKernelsCompile compiles every kernel file with NVRTC for Hopper (they
// compiled for sm_80 too when last checked). NVRTC needs no GPU, so this runs wherever libnvrtc is installed and
// catches CUDA C errors before a GPU machine is involved; it skips otherwise.
func TestKernelsCompile(t *testing.T) {
	nv, files, headers := testNVRTC(t)
	for _, gpuArch := range []string{"sm_90"} {
		for name, src := range files {
			arch := kernelArch(name, gpuArch, nv.major)
			if arch == "" {
				arch = gpuArch // what a build without the file's features would see: it must still compile
			}
			cubin, err := nv.compileCubin(name, src, headers, arch, nil)
			if err != nil {
				t.Errorf("%s for %s (NVRTC %d.%d): %v", name, arch, nv.major, nv.minor, err)
				continue
			}
			if len(cubin) < 100 {
				t.Errorf("%s for %s: cubin of %d bytes", name, arch, len(cubin))
			}
		}
	}
}

// testNVRTC loads NVRTC and the embedded kernel sources for the tests that
// compile kernels without a GPU; it skips the test where NVRTC is absent.
func testNVRTC(t *testing.T) (nv *nvrtc, files, headers map[string]string) {
	t.Helper()
	nv, err := loadNVRTC()
	if errors.Is(err, errNotFound) {
		t.Skipf("no NVRTC here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if files, headers, err = kernelSources(); err != nil {
		t.Fatal(err)
	}
	return nv, files, headers
}
