package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidwall/gjson"
)

// LaunchOptions say where and how to start a backend.
type LaunchOptions struct {
	Host         string        // bind host and client target (default 127.0.0.1)
	Port         int           // 0: first free port from PortBase
	PortBase     int           // default 18000
	UsedPorts    map[int]bool  // ports already handed out in this invocation
	RunDir       string        // <label>.server.log goes here
	ReadyTimeout time.Duration // default 120 s
	// Prefix is prepended to the argv, e.g. taskset -c 0-3.
	Prefix []string
}

// Server is a started (or reached) backend.
type Server struct {
	Spec    Spec
	BaseURL string
	Argv    []string // what was executed (API key as ***), nil when not launched
	LogPath string
	// ModelID is the first id the server lists on /v1/models ("" if none).
	ModelID string
	ReadyAt time.Duration // from launch to ready

	argv     []string // Argv with the key: what is executed
	cmd      *exec.Cmd
	logFile  *os.File
	exited   chan struct{}
	waitErr  error
	stopOnce sync.Once
	stopped  chan struct{}
}

// RequestModel is the model id requests to the server carry, given --model:
// a server whose spec says so (roseinfer serves whatever --model pointed it
// at under its own id) gets the id it lists, as does one when --model is
// empty; otherwise --model; "gpt2" when neither is known.
func (s *Server) RequestModel(model string) string {
	if s.ModelID != "" && (model == "" || s.Spec.ModelFromServer) {
		model = s.ModelID
	}
	if model == "" {
		model = "gpt2"
	}
	return model
}

// Launch starts spec's server (or, for one not launched, just probes it)
// and waits until it is ready. On any failure the process group is stopped
// before returning, and the error includes the end of the server's log.
func Launch(ctx context.Context, spec Spec, opts LaunchOptions) (*Server, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 120 * time.Second
	}
	s := &Server{Spec: spec, exited: make(chan struct{}), stopped: make(chan struct{})}
	start := time.Now()
	if !spec.Launched() {
		if spec.BaseURL == "" {
			return nil, fmt.Errorf("%s: neither a command nor a base URL", spec.Label)
		}
		s.BaseURL = strings.TrimRight(spec.BaseURL, "/")
	} else {
		port := opts.Port
		if port == 0 {
			var err error
			if port, err = FreePort(opts.Host, opts.PortBase, opts.UsedPorts); err != nil {
				return nil, fmt.Errorf("%s: %w", spec.Label, err)
			}
		}
		if opts.UsedPorts != nil {
			opts.UsedPorts[port] = true
		}
		s.BaseURL = "http://" + net.JoinHostPort(opts.Host, strconv.Itoa(port))
		s.argv = append(append([]string{}, opts.Prefix...), spec.Command(opts.Host, port)...)
		s.Argv = RedactArgv(s.argv, spec.APIKey)
		if err := s.start(opts.RunDir); err != nil {
			return nil, err
		}
	}
	if err := s.waitReady(ctx, opts.ReadyTimeout); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s: %w%s", spec.Label, err, s.logTail())
	}
	s.ReadyAt = time.Since(start)
	return s, nil
}

// start execs the argv in a new process group with output to the log file.
func (s *Server) start(runDir string) error {
	if runDir == "" {
		runDir = os.TempDir()
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", s.Spec.Label, err)
	}
	s.LogPath = filepath.Join(runDir, logName(s.Spec.Label))
	f, err := os.Create(s.LogPath)
	if err != nil {
		return fmt.Errorf("%s: server log: %w", s.Spec.Label, err)
	}
	fmt.Fprintf(f, "# %s\n", strings.Join(s.Argv, " "))
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = mergeEnv(os.Environ(), s.Spec.Env)
	// Own process group: a terminal's Ctrl-C does not reach the server
	// directly, and Stop can signal the server and every child it spawned.
	// Pdeathsig is the backstop if the harness itself is killed with SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: start %s: %w", s.Spec.Label, s.Argv[0], err)
	}
	s.cmd, s.logFile = cmd, f
	register(s)
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	return nil
}

// logName is the server log's file name: <label>.server.log, with path
// separators replaced.
func logName(label string) string {
	return strings.NewReplacer("/", "_", string(os.PathSeparator), "_").Replace(label) + ".server.log"
}

func mergeEnv(base []string, overrides map[string]string) []string {
	if len(overrides) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(overrides))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := overrides[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range overrides {
		out = append(out, k+"="+v)
	}
	return out
}

// waitReady polls the readiness paths until all answer 200, the process
// exits, the timeout passes or ctx ends.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	rule := s.Spec.Ready
	if len(rule.Paths) == 0 {
		rule = DefaultReady
	}
	if rule.Interval <= 0 {
		rule.Interval = DefaultReady.Interval
	}
	if rule.ProbeTimeout <= 0 {
		rule.ProbeTimeout = DefaultReady.ProbeTimeout
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		lastErr = s.probe(ctx, hc, rule)
		if lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.exited:
			return fmt.Errorf("server exited while starting: %v", s.exitError())
		case <-time.After(rule.Interval):
		}
	}
}

func (s *Server) probe(ctx context.Context, hc *http.Client, rule ReadyRule) error {
	for _, path := range rule.Paths {
		pctx, cancel := context.WithTimeout(ctx, rule.ProbeTimeout)
		req, err := http.NewRequestWithContext(pctx, http.MethodGet, s.BaseURL+path, nil)
		if err != nil {
			cancel()
			return err
		}
		if s.Spec.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+s.Spec.APIKey)
		}
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
		}
		if path == "/v1/models" {
			s.ModelID = gjson.GetBytes(body, "data.0.id").String()
		}
	}
	return nil
}

// Exited is closed when a launched server's process has exited; it is never
// closed for a server that was not launched.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Died reports whether a launched server exited without being stopped, and
// how.
func (s *Server) Died() (bool, string) {
	select {
	case <-s.exited:
	default:
		return false, ""
	}
	select {
	case <-s.stopped:
		return false, ""
	default:
	}
	return true, fmt.Sprintf("server process exited during the run: %v", s.exitError())
}

func (s *Server) exitError() error {
	if s.waitErr == nil {
		return errors.New("exit status 0")
	}
	return s.waitErr
}

// Stop ends the server's process group: SIGTERM, up to the spec's grace
// period, then SIGKILL. It is idempotent and safe to call concurrently.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopped)
		if s.cmd == nil {
			return
		}
		pgid := s.cmd.Process.Pid // Setpgid: the group id is the leader's pid
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(s.Spec.stopGrace()):
		}
		// The leader may be gone while children of the group live on.
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.exited
		if s.Spec.AfterStop != nil {
			if u, err := url.Parse(s.BaseURL); err == nil {
				port, _ := strconv.Atoi(u.Port())
				s.Spec.AfterStop(u.Hostname(), port)
			}
		}
		s.logFile.Close()
		unregister(s)
	})
}

// kill is the fast path for the harness's own exit: SIGKILL the group now.
func (s *Server) kill() {
	if s.cmd != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// logTail returns the last lines of the server log, for error messages.
func (s *Server) logTail() string {
	if s.LogPath == "" {
		return ""
	}
	data, err := os.ReadFile(s.LogPath)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "\n--- last lines of " + s.LogPath + " ---\n" + strings.Join(lines, "\n")
}

// live holds the launched servers not yet stopped, so KillAll can reach
// them from a signal handler on the way out.
var live struct {
	sync.Mutex
	servers map[*Server]bool
}

func register(s *Server) {
	live.Lock()
	defer live.Unlock()
	if live.servers == nil {
		live.servers = map[*Server]bool{}
	}
	live.servers[s] = true
}

func unregister(s *Server) {
	live.Lock()
	defer live.Unlock()
	delete(live.servers, s)
}

// Running returns the launched servers not yet stopped.
func Running() []*Server {
	live.Lock()
	defer live.Unlock()
	out := make([]*Server, 0, len(live.servers))
	for s := range live.servers {
		out = append(out, s)
	}
	return out
}

// PID is the launched server's process id (its process group id); 0 for a
// server that was not launched.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// KillAll SIGKILLs the process group of every launched server that has not
// been stopped. It is for the harness's last exit path (a second Ctrl-C);
// normal paths call Stop.
func KillAll() {
	live.Lock()
	defer live.Unlock()
	for s := range live.servers {
		s.kill()
	}
}

// FreePort returns the first port >= base (default 18000) that is not in
// used and can be bound on host, trying 256 ports, as the original did.
func FreePort(host string, base int, used map[int]bool) (int, error) {
	if base <= 0 {
		base = 18000
	}
	for port := base; port < base+256 && port < 65536; port++ {
		if used[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port in [%d, %d) on %s", base, base+256, host)
}
