package timeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	engineprofile "github.com/roseinfer/roseinfer/engine/profile"
	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/results"
)

// Dir is where a run directory keeps the servers' traces: Dir/<label>/.
const Dir = "timeline"

// controlTimeout bounds one start or stop request: writing a long round's
// trace takes a while.
const controlTimeout = 2 * time.Minute

// Server captures one backend's engine steps around each round through
// roseinfer's profile endpoints (POST /start_profile, /stop_profile with
// the "torch" tool: the phase trace only, no Go profiles). A nil *Server
// records nothing.
type Server struct {
	label, runDir string
	outDir        string // output_dir root sent to the server
	isSameHost    bool   // launched here: shares this host's clocks and files
	baseURL       string
	apiKey        string
	note          string // set: no server trace, and why
	client        *http.Client
}

// ForBackend prepares the timeline of one backend. A launched roseinfer
// gets --profile-dir <runDir>/timeline/<label>, so its traces land in the
// run directory; a server at --base-url is asked too (it may be roseinfer,
// and its traces are read if its paths are readable here); any other
// launched server is timed by the client only.
func ForBackend(spec backend.Spec, runDir string) (backend.Spec, *Server) {
	s := &Server{label: spec.Label, runDir: runDir, apiKey: spec.APIKey,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	base, _, _ := strings.Cut(spec.Label, "+")
	switch {
	case spec.Command == nil:
		s.outDir = filepath.Join("bench-timeline", filepath.Base(runDir), spec.Label)
	case base == "roseinfer":
		s.isSameHost = true
		s.outDir = filepath.Join(runDir, Dir, spec.Label)
		if abs, err := filepath.Abs(s.outDir); err == nil {
			s.outDir = abs // the server resolves paths from its own directory
		}
		command := spec.Command
		dir := s.outDir
		spec.Command = func(host string, port int) []string {
			return append(command(host, port), "--profile-dir", dir)
		}
	default:
		s.note = base + " exposes no engine step trace (roseinfer does)"
	}
	return spec, s
}

// Attach sets the server's root URL once it is up.
func (s *Server) Attach(baseURL string) {
	if s != nil {
		s.baseURL = strings.TrimRight(baseURL, "/")
	}
}

// Close releases idle connections.
func (s *Server) Close() {
	if s != nil {
		s.client.CloseIdleConnections()
	}
}

// Capture is one round's capture in progress.
type Capture struct {
	s              *Server
	name           string
	sent, answered time.Time
	err            error
}

// Begin starts a capture named name (a directory under the backend's) just
// before a round. Failures are kept for End, which reports them as the
// round's server note: the round runs either way.
func (s *Server) Begin(ctx context.Context, name string) *Capture {
	if s == nil {
		return nil
	}
	c := &Capture{s: s, name: name}
	if s.note != "" {
		return c
	}
	zero := 0
	c.sent = time.Now()
	_, c.err = s.post(ctx, engineprofile.StartPath, engineprofile.StartRequest{Tool: engineprofile.ToolTorch,
		OutputDir: filepath.Join(s.outDir, name), DelaySteps: &zero, NumSteps: &zero})
	c.answered = time.Now()
	return c
}

// End stops the capture after the round, reads the server's trace, puts
// it on the round's clock (roundStart is the origin of the requests'
// start_s) and attributes the round's ITL outliers (itl is the round's ITL
// summary). It returns the round's timeline record and outlier counts.
func (c *Capture) End(ctx context.Context, roundStart time.Time, reqs []results.Request, itl results.Stats) (*results.RoundTimeline, *results.ITLOutliers) {
	if c == nil {
		return nil, nil
	}
	rt := &results.RoundTimeline{StartUnixNs: roundStart.UnixNano()}
	steps, err := c.stop(ctx, roundStart, rt)
	if err != nil {
		rt.ServerNote = err.Error()
	}
	return rt, Count(Attribute(reqs, itl, steps), itl.P99)
}

// stop ends the capture and reads its trace into rt and the steps.
func (c *Capture) stop(ctx context.Context, roundStart time.Time, rt *results.RoundTimeline) (*Steps, error) {
	s := c.s
	switch {
	case s.note != "":
		return nil, fmt.Errorf("%s", s.note)
	case c.err != nil:
		return nil, c.err
	}
	sent := time.Now()
	// Stop even after a Ctrl-C: the round is over, and a capture left
	// running would record (and hold) every later step.
	ans, err := s.post(context.WithoutCancel(ctx), engineprofile.StopPath, nil)
	answered := time.Now()
	if err != nil {
		return nil, err
	}
	var res engineprofile.Result
	if err := json.Unmarshal(ans, &res); err != nil {
		return nil, fmt.Errorf("stop_profile answer: %w", err)
	}
	path := ""
	for _, f := range res.Files {
		if f.Kind == engineprofile.KindChromeTrace {
			path = f.Path
		}
	}
	if path == "" {
		return nil, fmt.Errorf("stop_profile wrote no %s", engineprofile.KindChromeTrace)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the server's trace %s is not readable here: %w", path, err)
	}
	rt.ServerTrace = path
	if rel, err := filepath.Rel(s.runDir, path); err == nil && !strings.HasPrefix(rel, "..") {
		rt.ServerTrace = rel
	}
	tr, err := ReadServerTrace(path)
	if err != nil {
		return nil, err
	}
	clock := Align(s.isSameHost, roundStart, tr.Origin, ProbeOf(roundStart, c.sent, c.answered),
		ProbeOf(roundStart, sent, answered), tr.DurationS)
	rt.ServerOriginS, rt.Clock, rt.ClockErrorS = &clock.OriginS, clock.Method, &clock.ErrorS
	return OnClock(tr, clock), nil
}

// post sends one profile request (body nil: none) and returns the answer;
// anything but 200 is an error quoting the server.
func (s *Server) post(ctx context.Context, path string, body any) ([]byte, error) {
	what := strings.TrimPrefix(path, "/")
	ans, status, err := client.Control(ctx, s.client, s.baseURL+path, s.apiKey, body, controlTimeout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", what, status, strings.TrimSpace(string(ans)))
	}
	return ans, nil
}
