package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/roseinfer/roseinfer/harness/offline"
	"github.com/roseinfer/roseinfer/harness/online"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/servers"
)

// The whole picture: what bench online does after its replay, so that one
// command leaves everything a reader needs in one run directory — the
// offline benchmark (--offline), the figures and report.html (unless
// --no-report) — and the console ends with the summary tables and the
// paths.

const pictureHelp = `

At the end of every run: figures/ (the latency figures of bench plot, PNG and
SVG) and report.html (tables, figures inline, replay fidelity, metadata; one file
that opens with no network); --no-report skips both ("bench report RUN_DIR"
writes them later). --offline then runs bench offline's defaults (roseinfer
in-process and behind its server, same --device and --model) into the same run
directory first, so the report has an offline section. The console ends with the
summary tables (stderr) and the paths written (stdout, one per line, the results
file first).`

// pictureOptions are the flags of the steps after the replay.
type pictureOptions struct {
	offline  bool // --offline
	noReport bool // --no-report
	// cpus is the process's CPU affinity before the replay pinned it to the
	// client's half (servers.ApplyCPUSplit): the offline engine runs in this
	// process and must get every CPU back, as in a plain bench offline.
	cpus servers.Affinity
}

func registerPictureFlags(f *pflag.FlagSet, p *pictureOptions) {
	f.BoolVar(&p.offline, "offline", false, "after the replay, run bench offline's defaults (roseinfer in-process and behind its server, same --device and --model) into the same run directory")
	f.BoolVar(&p.noReport, "no-report", false, "do not write figures/ and report.html at the end of the run")
}

// prepare rejects what --offline cannot do before the replay starts, and
// saves the CPU affinity the replay will change.
func (p *pictureOptions) prepare(o *online.OnlineOptions, profileOnly bool) error {
	if !p.offline {
		return nil
	}
	switch {
	case profileOnly:
		return errors.New("--offline: --profile-only runs no benchmark")
	case o.Servers.BaseURL != "":
		return errors.New("--offline measures roseinfer on this machine, not the server at --base-url; run bench offline where that server runs")
	case !onlyRoseinfer(o.Servers.Backends):
		return fmt.Errorf("--offline measures roseinfer only, not --backends %s; run bench offline --backends for the others", strings.Join(o.Servers.Backends, ","))
	}
	var err error
	p.cpus, err = servers.SaveAffinity()
	return err
}

// after runs the offline benchmark and the report into rep's run
// directory, then prints the tables and the paths. Failures (and an
// interrupt) are added to rep, whose exit status finish decides.
func (p *pictureOptions) after(cmd *cobra.Command, o online.OnlineOptions, rep *online.Report) {
	log, out := cmd.ErrOrStderr(), cmd.OutOrStdout()
	var off *offline.Report
	if p.offline && !rep.Interrupted {
		off = p.runOffline(o, rep, log)
	}
	reportPath := ""
	if !p.noReport {
		if _, err := report.Write(rep.RunDir, ""); err != nil {
			rep.Failures = append(rep.Failures, "report: "+err.Error())
			fmt.Fprintf(log, "report FAILED: %v\n", err)
		} else {
			reportPath = filepath.Join(rep.RunDir, report.ReportFile)
		}
	}

	paths := []string{rep.ResultsPath, rep.SummaryPath}
	if rep.TimelinePath != "" {
		paths = append(paths, rep.TimelinePath)
	}
	tables := []string{rep.SummaryPath}
	if off != nil {
		paths = append(paths, off.ResultsPath, off.SummaryPath)
		tables = append(tables, off.SummaryPath)
	}
	if reportPath != "" {
		paths = append(paths, filepath.Join(rep.RunDir, report.FiguresDir)+string(filepath.Separator), reportPath)
	}
	for _, t := range tables {
		if data, err := os.ReadFile(t); err == nil {
			fmt.Fprintf(log, "\n%s", data)
		}
	}
	fmt.Fprintln(log)
	for _, p := range paths {
		fmt.Fprintln(out, p)
	}
}

// runOffline runs bench offline with its defaults for this run's device
// and model (the CPU-sized ones on the CPU, as the command's) into the run
// directory. It returns nil when the offline run could not start.
func (p *pictureOptions) runOffline(o online.OnlineOptions, rep *online.Report, log io.Writer) *offline.Report {
	if err := p.cpus.Restore(); err != nil {
		fmt.Fprintf(log, "offline: %v (measuring on the client's CPUs)\n", err)
	}
	off := offline.Default()
	off.Device, off.Model, off.RoseinferBin = o.Servers.Device, o.Servers.Model, o.Servers.RoseinferBin
	off.Host, off.PortBase, off.APIKey = o.Servers.Host, o.Servers.PortBase, o.Servers.APIKey
	off.SimStep = time.Millisecond // bench offline's --sim-step-us
	if off.Device == "cpu" {
		off.NumPrompts, off.OutputLen = cpuDefaultNumPrompts, cpuDefaultOutputLen
	}
	off.RunDir, off.Log = rep.RunDir, log
	offRep, err := offline.Run(sig.stop, off)
	if err != nil {
		rep.Failures = append(rep.Failures, "offline: "+err.Error())
		fmt.Fprintf(log, "offline FAILED: %v\n", err)
		return nil
	}
	for _, f := range offRep.Failures {
		rep.Failures = append(rep.Failures, "offline "+f)
	}
	rep.Interrupted = rep.Interrupted || offRep.Interrupted
	return offRep
}
