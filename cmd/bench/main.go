// Command bench is the LLM-serving benchmark harness: it launches inference
// servers, replays request traces open-loop (online), runs fixed-length
// throughput (offline), and writes results JSON and Markdown summaries that
// the plot, report and compare commands read back.
//
// Each subcommand lives in its own file, parses its flags into an options
// struct and hands it to one function in harness/, results/ or plots/.
// Files register their command with addCommand in an init function, so a
// new subcommand is one new file.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/backend"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1   // a backend or scale failed, or bad usage
	exitInterrupted = 130 // stopped by Ctrl-C (partial results written)
)

// exitError carries an exit code through cobra's error return.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

var commands []func() *cobra.Command

// addCommand registers a subcommand constructor (called from init).
func addCommand(newCmd func() *cobra.Command) { commands = append(commands, newCmd) }

// interrupts are the two contexts every long-running command honours: stop
// ends on the first Ctrl-C (finish what is in flight, write partial
// results), abort on the second (end requests now).
type interrupts struct {
	stop  context.Context
	abort context.Context
}

var sig interrupts

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark LLM inference servers: trace replay, offline throughput, results and reports",
		Long: `bench measures LLM serving engines the way their users see them.

  bench online    replay a real request trace open-loop at several load scales
                  against each backend and record TTFT, TPOT, per-token ITL and E2E
  bench offline   fixed-length generation throughput (req/s, tok/s)
  bench capacity  the highest load at which a server keeps requests within an SLO
  bench merge     merge results files of several runs

With no flags, "bench online" launches roseinfer (CPU, built-in tiny model) and
replays the bundled Azure 2023 conversation trace; results go to
results/runs/online_<YYYYmmdd_HHMMSS>/. Times are seconds in JSON and
milliseconds in tables; "bench online --help" says what each figure means.

First Ctrl-C: stop sending, let requests in flight finish, stop the servers and
write partial results. Second Ctrl-C: abort requests in flight and exit.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, newCmd := range commands {
		root.AddCommand(newCmd())
	}
	return root
}

func main() {
	os.Exit(runMain())
}

func runMain() int {
	// The client allocates little per chunk, but on a 2-core machine every
	// GC cycle competes with the dispatcher and the stream readers; a
	// larger heap target makes cycles rare. GOGC still wins when set.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	stop, stopFn := context.WithCancel(context.Background())
	abort, abortFn := context.WithCancel(context.Background())
	sig = interrupts{stop: stop, abort: abort}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		fmt.Fprintln(os.Stderr, "\ninterrupted: finishing requests in flight, stopping servers, writing partial results (Ctrl-C again to quit now)")
		stopFn()
		<-signals
		fmt.Fprintln(os.Stderr, "\ninterrupted again: aborting requests and killing servers")
		abortFn()
		backend.KillAll()
		// The run writes what it has once its requests are cancelled; if it
		// cannot within a few seconds, leave anyway (no child survives:
		// every server's group was just killed).
		time.AfterFunc(5*time.Second, func() {
			backend.KillAll()
			os.Exit(exitInterrupted)
		})
	}()

	err := newRootCmd().Execute()
	backend.KillAll() // no server outlives the command, whatever happened
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "bench:", ee.msg)
		}
		return ee.code
	default:
		fmt.Fprintln(os.Stderr, "bench:", err)
		return exitFailed
	}
}
