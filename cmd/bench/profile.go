package main

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/roseinfer/roseinfer/harness/offline"
	"github.com/roseinfer/roseinfer/harness/online"
	"github.com/roseinfer/roseinfer/harness/profile"
)

// The profile stage (harness/profile) runs after the benchmark stage of
// bench online and bench offline, or alone with --profile-only. These
// helpers are the commands' only contact with it.

const profileHelp = `

Profile stage (--profile torch|nsys|pprof|both|all): after the benchmark, each
(tool, backend) gets a fresh server that replays a short workload under the
profiler; the benchmark's results are not touched. Writes profile_manifest.json
(every file, pprof top functions, trace phase totals, profile_error per run),
profile_summary.md, profiles/<tool>/<label>/ and <label>.profile_<tool>.server.log.
For roseinfer, torch means its own phase trace (trace.json: schedule,
forward/prefill|decode|mixed, wait, emit, with GPU spans when the device reports
them; open it in ui.perfetto.dev) and pprof adds Go CPU, goroutine, block and
mutex profiles (go tool pprof). A failed capture is recorded and the stage goes
on; the exit status is then 1.`

// profileOnline runs bench online's profile stage after rep's benchmark (nil
// with --profile-only) and turns both into the exit status.
func profileOnline(p profile.Options, o online.OnlineOptions, rep *online.Report) error {
	var benchErr error
	runDir, resultsPath := "", ""
	if rep != nil {
		benchErr, runDir, resultsPath = finish(rep), rep.RunDir, rep.ResultsPath
		if rep.Interrupted {
			return benchErr
		}
	}
	prep, err := profile.Online(sig.stop, p, profile.OnlineInput{Servers: o.Servers, Workload: o.Workload,
		StartOffsetS: o.Load.StartOffsetS, RequestTimeout: o.Load.RequestTimeout,
		RunDir: cmp.Or(runDir, o.Output.RunDir), OutputDir: o.Output.OutputDir, ResultsPath: resultsPath, Log: os.Stderr})
	if err != nil {
		return err
	}
	return finishProfile(prep, benchErr)
}

// profileOffline is the same for bench offline; benchErr is the
// throughput run's exit error (nil if it passed or did not run).
func profileOffline(p profile.Options, o offline.Options, rep *offline.Report, benchErr error) error {
	runDir := ""
	if rep != nil {
		runDir = rep.RunDir
	}
	prep, err := profile.Offline(sig.stop, p, profile.OfflineInput{Bench: o, RunDir: runDir, Log: os.Stderr})
	if err != nil {
		return err
	}
	return finishProfile(prep, benchErr)
}

// finishProfile prints the manifest's path and picks the exit status: the
// benchmark's failure first, then an interrupt, then failed captures.
func finishProfile(rep *profile.Report, benchErr error) error {
	fmt.Println(rep.ManifestPath)
	fmt.Println(rep.SummaryPath)
	switch {
	case benchErr != nil:
		return benchErr
	case rep.Interrupted:
		return &exitError{code: exitInterrupted, msg: "interrupted; partial profile manifest written to " + rep.ManifestPath}
	case len(rep.Failures) > 0:
		return &exitError{code: exitFailed, msg: "profile failed:\n  " + strings.Join(rep.Failures, "\n  ")}
	}
	return nil
}
