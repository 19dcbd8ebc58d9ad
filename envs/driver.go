package envs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DriverRun is one offline driver run inside a backend's environment.
type DriverRun struct {
	Backend Backend
	Python  string
	Prefix  []string          // e.g. taskset -c 0-3
	Env     map[string]string // overrides of the harness's environment
	Dir     string            // run directory: drivers/ and <label>.offline_* files go here
	Label   string
	Job     any           // encoded as the job file
	Timeout time.Duration // 0: none (the original had none)
}

// DriverOutcome is what happened; failures are data, never panics.
type DriverOutcome struct {
	Argv       []string
	LogPath    string // stdout and stderr, interleaved
	JobPath    string
	ResultPath string
	// Result is the driver's JSON result: the --out file, else the last
	// stdout line that is a JSON object (the original's rule); nil if none.
	Result   json.RawMessage
	ExitCode int   // -1 when it did not start or was killed
	Err      error // could not start, timed out, cancelled, non-zero exit
	Tail     string
	WallS    float64
}

// tailLines is how much output a failure keeps (the original kept 80 lines).
const tailLines = 80

// RunDriver writes the drivers and the job into Dir and runs
// `[prefix] python Dir/drivers/<name>_offline.py --job J --out R` in its own
// process group (killed with the group if ctx ends or the timeout passes).
func RunDriver(ctx context.Context, d DriverRun) DriverOutcome {
	name := strings.NewReplacer("/", "_", "+", "_").Replace(d.Label)
	out := DriverOutcome{ExitCode: -1,
		LogPath:    filepath.Join(d.Dir, name+".offline.log"),
		JobPath:    filepath.Join(d.Dir, name+".offline_job.json"),
		ResultPath: filepath.Join(d.Dir, name+".offline_result.json")}
	driverDir := filepath.Join(d.Dir, "drivers")
	if err := WriteDrivers(driverDir); err != nil {
		out.Err = err
		return out
	}
	job, err := json.Marshal(d.Job)
	if err != nil {
		out.Err = fmt.Errorf("encode job: %w", err)
		return out
	}
	if err := os.WriteFile(out.JobPath, job, 0o644); err != nil {
		out.Err = fmt.Errorf("write job: %w", err)
		return out
	}
	os.Remove(out.ResultPath) // a stale result must not pass for this run's
	out.Argv = append(append(append([]string{}, d.Prefix...), d.Python),
		filepath.Join(driverDir, DriverFile(d.Backend)), "--job", out.JobPath, "--out", out.ResultPath)

	logFile, err := os.Create(out.LogPath)
	if err != nil {
		out.Err = fmt.Errorf("driver log: %w", err)
		return out
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "# %s\n", strings.Join(out.Argv, " "))
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	var stdout tailBuffer
	var mu sync.Mutex // both streams write the log
	cmd := exec.CommandContext(ctx, out.Argv[0], out.Argv[1:]...)
	cmd.Stdout = io.MultiWriter(lockedWriter{&mu, logFile}, &stdout)
	cmd.Stderr = lockedWriter{&mu, logFile}
	cmd.Env = MergeEnv(os.Environ(), d.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Engines start worker processes; end the whole group, not just python.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	runErr := cmd.Run()
	out.WallS = time.Since(start).Seconds()
	if cmd.ProcessState != nil {
		out.ExitCode = cmd.ProcessState.ExitCode()
	}
	logFile.Sync()
	out.Tail = fileTail(out.LogPath, tailLines)
	out.Result = readResult(out.ResultPath, stdout.Bytes())
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.Err = fmt.Errorf("driver timed out after %v", d.Timeout)
	case ctx.Err() != nil:
		out.Err = fmt.Errorf("driver interrupted: %w", ctx.Err())
	case runErr != nil:
		out.Err = fmt.Errorf("driver %s: %w", filepath.Base(out.Argv[len(d.Prefix)+1]), runErr)
	}
	return out
}

// readResult takes the --out file when the driver wrote one, else the last
// stdout line that parses as a JSON object.
func readResult(path string, stdout []byte) json.RawMessage {
	if data, err := os.ReadFile(path); err == nil && json.Valid(bytes.TrimSpace(data)) {
		return json.RawMessage(bytes.TrimSpace(data))
	}
	lines := bytes.Split(stdout, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) > 0 && l[0] == '{' && json.Valid(l) {
			return json.RawMessage(l)
		}
	}
	return nil
}

func fileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(tail(string(data), n), "\n")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tailBuffer keeps the last 1 MiB written (the result line is last).
type tailBuffer struct{ b []byte }

const tailBufferMax = 1 << 20

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailBufferMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailBufferMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte { return t.b }
