package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/envs"
	"github.com/roseinfer/roseinfer/harness/backend"
)

func init() { addCommand(newEnvsCmd) }

// envsFlags are shared by the envs subcommands.
type envsFlags struct {
	root    string
	pythons map[string]*string // backend -> --<backend>-python
}

func (f *envsFlags) layout() envs.Layout {
	root := f.root
	if root == "" {
		if r, err := backend.ModuleRoot(); err == nil {
			root = r
		} else if wd, err := os.Getwd(); err == nil {
			root = wd
		}
	}
	return envs.Layout{Root: root}
}

func (f *envsFlags) flagValues() map[string]string {
	out := map[string]string{}
	for name, v := range f.pythons {
		out[name] = *v
	}
	return out
}

// stopContext is the first-Ctrl-C context, or Background when the command
// runs outside main (tests).
func stopContext() context.Context {
	if sig.stop != nil {
		return sig.stop
	}
	return context.Background()
}

func newEnvsCmd() *cobra.Command {
	f := &envsFlags{pythons: map[string]*string{}}
	cmd := &cobra.Command{
		Use:   "envs",
		Short: "Create and check the isolated Python environments of vLLM, SGLang and TensorRT-LLM",
		Long: `vLLM 0.13.0 (Python 3.10), SGLang 0.5.7 (Python 3.10) and TensorRT-LLM 1.1.0
(Python 3.12) pin conflicting packages, so each runs from its own environment
under .venvs/<backend>/ in the repository (pins in envs/requirements/).

A run finds each backend's interpreter in this order: --<backend>-python, then
$ROSELLM_<BACKEND>_PYTHON, then $<BACKEND>_PYTHON, then .venvs/<backend>/bin/python.
A backend without one is skipped with the setup command in the message; the
other backends still run.

Real runs of these backends need a machine with the packages installed and an
NVIDIA GPU.`,
		Example: `  bench envs setup vllm --dry-run
  bench envs setup vllm sglang
  bench envs check
  bench envs check --require=vllm
  bench envs versions --json`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.root, "root", "", "directory holding .venvs/ (default: the repository root, else the working directory)")
	for _, b := range envs.Backends {
		f.pythons[b.Name] = pf.String(b.Name+"-python", "", b.Display+" interpreter (overrides the environment variables and .venvs/)")
	}
	cmd.AddCommand(newEnvsSetupCmd(f), newEnvsCheckCmd(f), newEnvsVersionsCmd(f))
	return cmd
}

func newEnvsSetupCmd(f *envsFlags) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "setup BACKEND...",
		Short: "Create a backend's environment with its pinned packages (uv if present, else python -m venv + pip)",
		Long: `Create .venvs/<backend>/ and install the pins of envs/requirements/<backend>.txt:
with uv when it is on PATH ("uv venv --python X.Y", which fetches that Python if
needed, then "uv pip install"), else with pythonX.Y -m venv and pip. An existing
environment is reused. --dry-run prints the exact commands instead.`,
		Example: `  bench envs setup vllm --dry-run
  bench envs setup all`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			backends, err := envs.Select(args)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for i, b := range backends {
				if i > 0 {
					fmt.Fprintln(out)
				}
				plan := envs.PlanSetup(b, f.layout(), envs.FindTools(b))
				plan.Print(out)
				if dryRun {
					continue
				}
				if err := plan.Run(stopContext(), out); err != nil {
					return fmt.Errorf("setup %s: %w", b.Name, err)
				}
				fmt.Fprintf(out, "%s: done; check it with: bench envs check %s\n", b.Name, b.Name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the commands, run nothing")
	return cmd
}

func newEnvsCheckCmd(f *envsFlags) *cobra.Command {
	var require []string
	var timeoutS float64
	cmd := &cobra.Command{
		Use:   "check [BACKEND...]",
		Short: "Per backend: interpreter, import, version, torch, CUDA, or the command that fixes it",
		Long: `Probe every environment (or the ones named): which interpreter a run would use
and where it came from, whether the package imports (this takes up to a minute
per backend), its version, torch's version and whether torch sees a CUDA device.
Exit status 0 once checked, whatever was found; with --require, 1 unless every
required backend (all by default) is ready.`,
		Example: `  bench envs check
  bench envs check --require
  bench envs check sglang --sglang-python /opt/sglang/bin/python`,
		RunE: func(cmd *cobra.Command, args []string) error {
			backends, err := envs.Select(args)
			if err != nil {
				return err
			}
			rows := envs.Check(stopContext(), backends, envs.CheckOptions{Flags: f.flagValues(), Layout: f.layout(),
				Timeout: seconds(timeoutS)})
			envs.WriteCheckTable(cmd.OutOrStdout(), rows)
			if !cmd.Flags().Changed("require") {
				return nil
			}
			required, err := envs.Select(require)
			if err != nil {
				return fmt.Errorf("--require: %w", err)
			}
			var missing []string
			for _, want := range required {
				ready := false
				for _, r := range rows {
					ready = ready || (r.Backend.Name == want.Name && r.Ready())
				}
				if !ready {
					missing = append(missing, want.Name)
				}
			}
			if len(missing) > 0 {
				return &exitError{code: exitFailed, msg: fmt.Sprintf("not ready: %v", missing)}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&require, "require", nil, "exit 1 unless these backends are ready (no value: all)")
	fl.Lookup("require").NoOptDefVal = "all"
	fl.Float64Var(&timeoutS, "timeout-s", 180, "per-environment probe timeout in seconds (imports included)")
	return cmd
}

func newEnvsVersionsCmd(f *envsFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "versions",
		Short: "The versions probed in each environment, as a run records them in meta.versions",
		Long: `Read each environment's installed versions (package metadata only, no import;
15 s timeout per environment) under the keys a run writes into meta.versions:
vllm, vllm_python, vllm_python_version, vllm_torch, ... A backend with no
environment is listed as "not set up".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			versions := map[string]string{}
			for _, b := range envs.Backends {
				in := envs.Resolve(b, f.flagValues()[b.Name], f.layout(), nil)
				if !in.Found() {
					versions[b.Dist] = "not set up (" + envs.SetupCommand(b) + ")"
					continue
				}
				p, err := envs.RunProbe(stopContext(), b, in.Path, envs.ProbeOptions{Timeout: 15 * time.Second,
					Env: envs.ProcessEnv(b, in.Path, os.Getenv("LD_LIBRARY_PATH"))})
				if err != nil {
					versions[b.Dist] = "probe failed: " + err.Error()
					versions[b.Name+"_python"] = in.Path
					continue
				}
				for k, v := range envs.Versions(b, in.Path, p) {
					versions[k] = v
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(versions)
			}
			keys := make([]string, 0, len(versions))
			for k := range versions {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(out, "%s: %s\n", k, versions[k])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
