package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ebitengine/purego"
)

// library is one shared object opened at run time. The process never links
// against CUDA: a CGO_ENABLED=0 binary finds the libraries where a CUDA
// install, a driver package or a Python wheel put them.
type library struct {
	name   string // what we asked for ("libnvrtc"), for errors
	path   string // what dlopen accepted
	handle uintptr
}

// sym returns the first of names that the library exports. Several names
// cover symbol versions (cuEventElapsedTime_v2 vs cuEventElapsedTime).
func (l *library) sym(names ...string) (uintptr, error) {
	for _, n := range names {
		if p, err := purego.Dlsym(l.handle, n); err == nil && p != 0 {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%s (%s): symbol %s not found", l.name, l.path, strings.Join(names, " / "))
}

// symbols fills each *uintptr in table with the named symbol, stopping at the
// first missing one.
func (l *library) symbols(table map[*uintptr][]string) error {
	for dst, names := range table {
		p, err := l.sym(names...)
		if err != nil {
			return err
		}
		*dst = p
	}
	return nil
}

// openLibrary tries each soname in each search directory, then the bare
// soname (the loader's own path: ldconfig, LD_LIBRARY_PATH, RUNPATH).
func openLibrary(name string, sonames []string, bareFirst bool) (*library, error) {
	var tried []string
	try := func(path string) *library {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			tried = append(tried, path)
			return nil
		}
		return &library{name: name, path: path, handle: h}
	}
	if bareFirst {
		for _, so := range sonames {
			if l := try(so); l != nil {
				return l, nil
			}
		}
	}
	for _, dir := range librarySearchDirs() {
		for _, so := range sonames {
			p := filepath.Join(dir, so)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if l := try(p); l != nil {
				return l, nil
			}
		}
	}
	if !bareFirst {
		for _, so := range sonames {
			if l := try(so); l != nil {
				return l, nil
			}
		}
	}
	return nil, &notFoundError{name: name, sonames: sonames, dirs: librarySearchDirs()}
}

// notFoundError names the library, the file names and the folders searched,
// so "CUDA is absent" is a one-line diagnosis rather than a guess.
type notFoundError struct {
	name    string
	sonames []string
	dirs    []string
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("cuda: %s not found (tried %s in CUDA_HOME, CUDA_PATH, LD_LIBRARY_PATH, the loader path, %s); "+
		"install the CUDA toolkit or driver, or point CUDA_HOME / LD_LIBRARY_PATH at it",
		e.name, strings.Join(e.sonames, ", "), strings.Join(e.dirs, ", "))
}

// errNotFound is matched with errors.As by callers that only ask "is CUDA here?".
var errNotFound = errors.New("cuda: library not found")

func (e *notFoundError) Is(target error) bool { return target == errNotFound }

// librarySearchDirs lists, in order: CUDA_HOME and CUDA_PATH (lib64 and
// targets/x86_64-linux/lib), LD_LIBRARY_PATH, /usr/local/cuda*, and the
// nvidia-* wheels' lib folders of the Python installs we can see.
func librarySearchDirs() []string {
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if d == "" || seen[d] {
			return
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return
		}
		seen[d] = true
		dirs = append(dirs, d)
	}
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := os.Getenv(env); root != "" {
			add(filepath.Join(root, "lib64"))
			add(filepath.Join(root, "targets", "x86_64-linux", "lib"))
			add(filepath.Join(root, "lib"))
		}
	}
	for _, d := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
		add(d)
	}
	roots, _ := filepath.Glob("/usr/local/cuda*")
	sort.Sort(sort.Reverse(sort.StringSlice(roots))) // newest version first; /usr/local/cuda itself sorts before cuda-12.x
	for _, r := range append([]string{"/usr/local/cuda"}, roots...) {
		add(filepath.Join(r, "lib64"))
		add(filepath.Join(r, "targets", "x86_64-linux", "lib"))
	}
	add("/usr/local/nvidia/lib64")
	add("/usr/lib/x86_64-linux-gnu")
	for _, pattern := range wheelPatterns() {
		matches, _ := filepath.Glob(pattern)
		sort.Strings(matches)
		for _, m := range matches {
			add(m)
		}
	}
	return dirs
}

// wheelPatterns are where pip puts nvidia-cublas / nvidia-cuda-nvrtc:
// site-packages/nvidia/<pkg>/lib (and nvidia/cu13/lib for CUDA 13 wheels).
func wheelPatterns() []string {
	var sites []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		sites = append(sites, filepath.Join(v, "lib", "python3*", "site-packages"))
	}
	home, _ := os.UserHomeDir()
	sites = append(sites,
		filepath.Join(home, ".local", "lib", "python3*", "site-packages"),
		"/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages",
		"/opt/*/.venv/lib/python3*/site-packages",
		"/opt/conda/lib/python3*/site-packages",
	)
	var pats []string
	for _, s := range sites {
		pats = append(pats, filepath.Join(s, "nvidia", "*", "lib"), filepath.Join(s, "nvidia", "*", "lib64"))
	}
	return pats
}
