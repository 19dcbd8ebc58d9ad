package envs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Interpreter is the outcome of finding a backend's Python.
type Interpreter struct {
	Backend Backend
	// Path is the interpreter to run; "" when none was found.
	Path string
	// Source says where Path came from: "--vllm-python",
	// "$ROSELLM_VLLM_PYTHON", ".venvs/vllm".
	Source string
	// Problem says why there is none (or why the named one is unusable).
	Problem string
}

// Found reports whether an interpreter was resolved.
func (in Interpreter) Found() bool { return in.Path != "" && in.Problem == "" }

// Fix is the one command that gets the backend going.
func (in Interpreter) Fix() string { return SetupCommand(in.Backend) }

// Resolve finds b's interpreter as the original did (B.1), with our layout
// and without its last fallback: the flag value, then the environment
// variables in order, then <root>/.venvs/<name>/bin/python. The original fell
// back to the harness's own interpreter; we have none (the harness is Go),
// so the answer is "none" and the backend is skipped with the setup command
// in the message. A path named explicitly (flag or variable) that is not an
// executable file is reported, not silently passed over.
func Resolve(b Backend, flagValue string, l Layout, getenv func(string) string) Interpreter {
	if getenv == nil {
		getenv = os.Getenv
	}
	in := Interpreter{Backend: b}
	candidates := []struct{ path, source string }{{flagValue, "--" + b.Name + "-python"}}
	for _, v := range b.EnvVars {
		candidates = append(candidates, struct{ path, source string }{getenv(v), "$" + v})
	}
	for _, c := range candidates {
		if c.path == "" {
			continue
		}
		in.Path, in.Source = c.path, c.source
		if !isExecutable(c.path) {
			in.Problem = fmt.Sprintf("%s=%s is not an executable file", c.source, c.path)
		}
		return in
	}
	venv := l.VenvPython(b)
	if isExecutable(venv) {
		in.Path, in.Source = venv, filepath.Join(".venvs", b.Name)
		return in
	}
	in.Problem = fmt.Sprintf("no %s environment: no --%s-python, no $%s, no %s",
		b.Display, b.Name, strings.Join(b.EnvVars, " or $"), venv)
	return in
}

// VenvRoot is the environment directory an interpreter belongs to: the
// parent of its bin/ directory, not symlink-resolved (a venv's python is
// usually a link to the system interpreter, whose parent is not the venv).
func VenvRoot(python string) string {
	return filepath.Dir(filepath.Dir(python))
}

// TRTLLMLibraryDirs are the directories the original put in front of
// LD_LIBRARY_PATH for a TensorRT-LLM venv interpreter (B.1): every
// <venv>/lib/python*/site-packages/tensorrt_libs and every
// <site-packages>/nvidia/*/lib that exists, sorted for a stable order.
// TensorRT-LLM's native libraries find the pip-installed CUDA, cuDNN and
// TensorRT libraries only through that variable.
func TRTLLMLibraryDirs(python string) []string {
	root := VenvRoot(python)
	sitePackages, _ := filepath.Glob(filepath.Join(root, "lib", "python*", "site-packages"))
	sort.Strings(sitePackages)
	var dirs []string
	for _, sp := range sitePackages {
		if isDir(filepath.Join(sp, "tensorrt_libs")) {
			dirs = append(dirs, filepath.Join(sp, "tensorrt_libs"))
		}
		libs, _ := filepath.Glob(filepath.Join(sp, "nvidia", "*", "lib"))
		sort.Strings(libs)
		for _, d := range libs {
			if isDir(d) {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// ProcessEnv is the environment overrides every process run with b's
// interpreter gets (servers, offline drivers, probes): PYTHONPATH emptied
// (the harness's PYTHONPATH belongs to another interpreter; CPython treats
// an empty PYTHONPATH as unset) and, for TensorRT-LLM, LD_LIBRARY_PATH
// prefixed with the venv's library directories. currentLD is the
// harness's LD_LIBRARY_PATH, kept after them.
func ProcessEnv(b Backend, python, currentLD string) map[string]string {
	env := map[string]string{"PYTHONPATH": ""}
	if b.Name == "trtllm" {
		dirs := TRTLLMLibraryDirs(python)
		if currentLD != "" {
			dirs = append(dirs, currentLD)
		}
		if len(dirs) > 0 {
			env["LD_LIBRARY_PATH"] = strings.Join(dirs, ":")
		}
	}
	return env
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
