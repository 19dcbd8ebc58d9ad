package profile

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
)

// The test binary doubles as a fake OpenAI server: `<test binary>
// fake-server HOST PORT [flags...]`. It appends one JSON line per event to
// $FAKE_CALLS: first its flags and profiling environment, then every HTTP
// request. /start_profile and /stop_profile answer 200 unless
// $FAKE_PROFILE_STATUS says otherwise; the vLLM-style torch run writes a
// trace into $VLLM_TORCH_PROFILER_DIR on stop, a TensorRT-LLM-style one its
// $TLLM_TORCH_PROFILE_TRACE at the first completion.
func TestMain(m *testing.M) {
	if len(os.Args) > 3 && os.Args[1] == "fake-server" {
		if err := runFakeServer(os.Args[2], os.Args[3], os.Args[4:]); err != nil {
			fmt.Fprintln(os.Stderr, "fake server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeEvent is one line of $FAKE_CALLS.
type fakeEvent struct {
	Event  string            `json:"event"` // start or request
	Args   []string          `json:"args,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	Method string            `json:"method,omitempty"`
	Path   string            `json:"path,omitempty"`
	Body   string            `json:"body,omitempty"`
	PID    int               `json:"pid"`
	Host   string            `json:"host,omitempty"`
}

func runFakeServer(host, port string, args []string) error {
	var mu sync.Mutex
	logf, err := os.OpenFile(os.Getenv("FAKE_CALLS"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	record := func(ev fakeEvent) {
		mu.Lock()
		defer mu.Unlock()
		ev.PID = os.Getpid()
		data, _ := json.Marshal(ev)
		logf.Write(append(data, '\n'))
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		for _, p := range []string{"VLLM_", "TLLM_", "ROSEINFER_", "SGLANG_"} {
			if strings.HasPrefix(k, p) {
				env[k] = v
			}
		}
	}
	record(fakeEvent{Event: "start", Args: args, Env: env, Host: net.JoinHostPort(host, port)})
	status := http.StatusOK
	if s := os.Getenv("FAKE_PROFILE_STATUS"); s != "" {
		fmt.Sscan(s, &status)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		record(fakeEvent{Event: "request", Method: r.Method, Path: r.URL.Path, Body: string(body), Host: r.Host})
		switch r.URL.Path {
		case "/health":
			w.Write([]byte(`{"status":"ok"}`))
		case "/v1/models":
			w.Write([]byte(`{"object":"list","data":[{"id":"fake-model"}]}`))
		case "/v1/completions":
			if p := os.Getenv("TLLM_TORCH_PROFILE_TRACE"); p != "" {
				os.WriteFile(p, []byte(`{"traceEvents":[]}`), 0o644)
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for _, tok := range []string{"a", "b"} {
				fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":%q,\"finish_reason\":null}]}\n\n", tok)
			}
			fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
		case "/start_profile", "/stop_profile":
			if r.URL.Path == "/stop_profile" && status == http.StatusOK {
				if dir := os.Getenv("VLLM_TORCH_PROFILER_DIR"); dir != "" {
					os.WriteFile(filepath.Join(dir, "fake.pt.trace.json.gz"), []byte("gz"), 0o644)
				}
			}
			w.WriteHeader(status)
			w.Write([]byte(`{"status":"whatever"}`))
		default:
			http.NotFound(w, r)
		}
	})
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// fakeSpec is a launched backend run by the fake server.
func fakeSpec(t *testing.T, label, callsPath string, env map[string]string) backend.Spec {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{"FAKE_CALLS": callsPath}
	for k, v := range env {
		e[k] = v
	}
	return backend.Spec{
		Label:   label,
		Command: func(host string, port int) []string { return []string{exe, "fake-server", host, fmt.Sprint(port)} },
		Env:     e,
		Ready:   backend.DefaultReady,
		Quirks:  client.Quirks{PromptAsTokenIDs: true, ExtraSampling: true},
	}
}

// readCalls parses a $FAKE_CALLS file.
func readCalls(t *testing.T, path string) []fakeEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []fakeEvent
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev fakeEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// fixedWorkload is one warmup request and n requests a few ms apart.
type fixedWorkload struct{ n int }

func (w fixedWorkload) quirks(q client.Quirks) client.Quirks { return q }

func (w fixedWorkload) body(model string, q client.Quirks) ([]byte, error) {
	return client.BuildBody(client.Params{Model: model, PromptTokens: []int32{1, 2, 3}, MaxTokens: 2}, q)
}

func (w fixedWorkload) warmupBodies(model string, q client.Quirks) ([][]byte, error) {
	b, err := w.body(model, q)
	return [][]byte{b}, err
}

func (w fixedWorkload) items(model string, q client.Quirks) ([]replay.Item, error) {
	b, err := w.body(model, q)
	items := make([]replay.Item, w.n)
	for i := range items {
		items[i] = replay.Item{Index: i, AtS: 0.002 * float64(i), InputLen: 3, OutputLen: 2, Body: b}
	}
	return items, err
}

// newTestStage is a stage over the fixed workload writing into a temp run dir.
func newTestStage(t *testing.T, o *Options, log io.Writer) *stage {
	runDir := t.TempDir()
	st := newStage(o, runDir, log, map[string]any{"profile": o.Profile})
	st.work = fixedWorkload{n: 3}
	// A random port base: other tests on the machine launch servers from
	// the usual bases, and a client of theirs that outlives its server
	// would otherwise talk to ours.
	st.launch = backend.LaunchOptions{Host: "127.0.0.1", PortBase: 30000 + rand.IntN(20000), UsedPorts: map[int]bool{}, RunDir: runDir}
	return st
}
