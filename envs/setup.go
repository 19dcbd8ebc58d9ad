package envs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Tools are the programs setup can use, found on PATH.
type Tools struct {
	UV     string // "uv" when on PATH, else ""
	Python string // "python3.10" (the backend's version) when on PATH, else ""
}

// FindTools looks for uv and for python<version> on PATH. The names, not
// the resolved paths, go into the commands so that printed and executed
// commands are the same text.
func FindTools(b Backend) Tools {
	var t Tools
	if _, err := exec.LookPath("uv"); err == nil {
		t.UV = "uv"
	}
	// A name on PATH is not enough: pyenv puts a shim for every version on
	// PATH that fails when that version is not installed.
	py := "python" + b.Python
	if _, err := exec.LookPath(py); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if exec.CommandContext(ctx, py, "--version").Run() == nil {
			t.Python = py
		}
	}
	return t
}

// Plan is how `bench envs setup` creates one environment: commands run in
// Dir, in order.
type Plan struct {
	Backend Backend
	Dir     string     // the repository root; paths in Steps are relative to it
	Steps   [][]string // argv of each command
	// WriteRequirements, when set, is a file setup writes (the embedded
	// pins) before running Steps: outside a checkout there is no
	// envs/requirements/ to point pip at.
	WriteRequirements string
	Notes             []string // printed as comments
	// Missing is set when the plan cannot run on this machine (no uv and no
	// python<version>); a dry run still prints the commands.
	Missing string
}

// PlanSetup builds the commands that create b's environment under l:
// with uv, `uv venv --python X.Y` (uv fetches that Python if needed) and
// `uv pip install -r`; without it, `pythonX.Y -m venv` and pip. An existing
// environment is reused (packages installed into it), not deleted.
func PlanSetup(b Backend, l Layout, t Tools) Plan {
	p := Plan{Backend: b, Dir: l.Root}
	venv := filepath.Join(".venvs", b.Name)
	python := filepath.Join(venv, "bin", "python")
	req := filepath.Join("envs", b.Requirements)
	if !isFile(filepath.Join(l.Root, req)) {
		req = filepath.Join(".venvs", b.Name+".requirements.txt")
		p.WriteRequirements = req
	}
	exists := isExecutable(filepath.Join(l.Root, python))
	if exists {
		p.Notes = append(p.Notes, venv+" exists: installing into it (delete the directory to start over)")
	}
	var index []string
	for _, u := range b.ExtraIndexURLs {
		index = append(index, "--extra-index-url", u)
	}
	switch {
	case t.UV != "":
		if !exists {
			p.Steps = append(p.Steps, []string{t.UV, "venv", "--python", b.Python, venv})
		}
		install := []string{t.UV, "pip", "install", "--python", python}
		if len(index) > 0 {
			// uv's default takes a package only from the first index that
			// has it; pip's behaviour (best version across indexes) is what
			// the pins were made with.
			install = append(install, "--index-strategy", "unsafe-best-match")
		}
		p.Steps = append(p.Steps, append(append(install, index...), "-r", req))
	default:
		py := t.Python
		if py == "" {
			py = "python" + b.Python
			if !exists {
				p.Missing = fmt.Sprintf("neither uv nor a working %s is on PATH: install uv (it fetches Python %s itself) or Python %s",
					py, b.Python, b.Python)
			}
		}
		if !exists {
			p.Steps = append(p.Steps, []string{py, "-m", "venv", venv})
		}
		p.Steps = append(p.Steps,
			[]string{python, "-m", "pip", "install", "--upgrade", "pip"},
			append(append([]string{python, "-m", "pip", "install"}, index...), "-r", req))
	}
	if len(b.SystemPackages) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%s also needs the OS package(s) %s (not installed by setup)",
			b.Display, strings.Join(b.SystemPackages, ", ")))
	}
	return p
}

// Print writes the plan as a shell script: what a dry run shows and what a
// real run executes.
func (p Plan) Print(w io.Writer) {
	tool := "python -m venv + pip"
	if len(p.Steps) > 0 && strings.HasSuffix(p.Steps[0][0], "uv") {
		tool = "uv"
	}
	fmt.Fprintf(w, "# %s: Python %s, pins in envs/%s (%s)\n", p.Backend.Display, p.Backend.Python, p.Backend.Requirements, tool)
	for _, n := range p.Notes {
		fmt.Fprintf(w, "# %s\n", n)
	}
	if p.Missing != "" {
		fmt.Fprintf(w, "# cannot run here: %s\n", p.Missing)
	}
	fmt.Fprintf(w, "cd %s\n", shellQuote(p.Dir))
	if p.WriteRequirements != "" {
		fmt.Fprintf(w, "# write the embedded pins to %s\n", p.WriteRequirements)
	}
	for _, argv := range p.Steps {
		fmt.Fprintln(w, shellJoin(argv))
	}
	fmt.Fprintf(w, "# then: bench envs check %s\n", p.Backend.Name)
}

// Run executes the plan, streaming the commands' output to out.
func (p Plan) Run(ctx context.Context, out io.Writer) error {
	if p.Missing != "" {
		return errors.New(p.Missing)
	}
	if err := os.MkdirAll(filepath.Join(p.Dir, ".venvs"), 0o755); err != nil {
		return err
	}
	if p.WriteRequirements != "" {
		data, err := files.ReadFile(p.Backend.Requirements)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(p.Dir, p.WriteRequirements), data, 0o644); err != nil {
			return fmt.Errorf("write pins: %w", err)
		}
	}
	for _, argv := range p.Steps {
		fmt.Fprintf(out, "+ %s\n", shellJoin(argv))
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = p.Dir
		cmd.Stdout, cmd.Stderr = out, out
		// A PYTHONPATH meant for another interpreter must not leak into
		// the new environment's pip.
		cmd.Env = append(os.Environ(), "PYTHONPATH=")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", shellJoin(argv), err)
		}
	}
	return nil
}

// shellJoin quotes argv for a POSIX shell.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
