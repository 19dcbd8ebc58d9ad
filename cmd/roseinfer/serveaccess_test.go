package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestPprofDefault: /debug/pprof is on by default only on a loopback host;
// --pprof and --pprof=false override the rule either way.
func TestPprofDefault(t *testing.T) {
	cases := []struct {
		host                 string
		isGiven, value, want bool
	}{
		{"127.0.0.1", false, false, true},
		{"127.3.2.1", false, false, true}, // all of 127.0.0.0/8
		{"::1", false, false, true},
		{"[::1]", false, false, true},
		{"::ffff:127.0.0.1", false, false, true},
		{"localhost", false, false, true},
		{"LocalHost.", false, false, true},
		{"", false, false, false},        // every interface
		{"0.0.0.0", false, false, false}, // every interface
		{"::", false, false, false},
		{"10.1.2.3", false, false, false},
		{"128.0.0.1", false, false, false},
		{"myhost", false, false, false}, // a name is not looked up
		{"localhost.example.com", false, false, false},
		{"0.0.0.0", true, true, true},     // --pprof
		{"127.0.0.1", true, false, false}, // --pprof=false
		{"0.0.0.0", true, false, false},
	}
	for _, tc := range cases {
		if got := pprofEnabled(tc.host, tc.isGiven, tc.value); got != tc.want {
			t.Errorf("host %q, flag given %v value %v: pprof %v, want %v", tc.host, tc.isGiven, tc.value, got, tc.want)
		}
	}
	// The flag's own default no longer turns pprof on.
	if v, _ := newServeCommand().Flags().GetBool("pprof"); v {
		t.Error("--pprof defaults to true")
	}
}

func TestAPIKeySource(t *testing.T) {
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == envAPIKey {
				return v
			}
			return ""
		}
	}
	cases := []struct{ flag, env, want string }{
		{"", "", ""},
		{"", "from-env", "from-env"},
		{"from-flag", "", "from-flag"},
		{"from-flag", "from-env", "from-flag"}, // the flag wins
	}
	for _, tc := range cases {
		if got := apiKey(tc.flag, env(tc.env)); got != tc.want {
			t.Errorf("--api-key %q, $%s %q: key %q, want %q", tc.flag, envAPIKey, tc.env, got, tc.want)
		}
	}
	t.Setenv(envAPIKey, "")
	if _, _, err := run(t, context.Background(), "serve", "--metrics-auth"); err == nil ||
		!strings.Contains(err.Error(), "--metrics-auth needs an API key") {
		t.Errorf("--metrics-auth without a key: %v", err)
	}
}

// syncBuffer is a log sink the server's goroutines write while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServe runs runServe with o in the background until the test ends.
func startServe(t *testing.T, o serveOptions, logOut io.Writer) (url string, stop func()) {
	t.Helper()
	o.engineOptions = defaultEngineOptions()
	o.Device, o.simStepMicros = "sim", 200
	return startServeWith(t, o, logOut)
}

// startServeOn serves o's model on device ("cpu", "sim") with its own
// engine options, logging nowhere.
func startServeOn(t *testing.T, o serveOptions, device string) (url string, stop func()) {
	t.Helper()
	o.Device = device
	return startServeWith(t, o, io.Discard)
}

func startServeWith(t *testing.T, o serveOptions, logOut io.Writer) (url string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o.host, o.streamInterval, o.logLevel = "127.0.0.1", 1, "info"
	urls := make(chan string, 1)
	o.ready = func(url string) { urls <- url }
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o, logOut) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case url = <-urls:
	case err := <-done:
		stopped = true
		t.Fatalf("serve ended: %v", err)
	}
	waitHealthy(t, url)
	return url, stop
}

// call sends one request with key as its bearer token ("" = none).
func call(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeAccess runs `serve` with a key from the environment, --metrics-auth
// and --profile-dir, and checks who gets in and where profiles may go.
func TestServeAccess(t *testing.T) {
	const key = "sk-serve-test"
	t.Setenv(envAPIKey, key)
	base := t.TempDir()
	profileDir := filepath.Join(base, "profiles") // made by serve
	url, stop := startServe(t, serveOptions{metricsAuth: true, profileDir: profileDir}, io.Discard)

	steps := []struct {
		name, method, path, key, body string
		want                          int
	}{
		{"models without a key", "GET", "/v1/models", "", "", 401},
		{"models with a wrong key", "GET", "/v1/models", "sk-other", "", 401},
		{"models", "GET", "/v1/models", key, "", 200},
		{"completion without a key", "POST", "/v1/completions", "", `{"prompt":"Hi","max_tokens":2}`, 401},
		{"completion", "POST", "/v1/completions", key, `{"prompt":"Hi","max_tokens":2}`, 200},
		{"health", "GET", "/health", "", "", 200},
		{"metrics without a key", "GET", "/metrics", "", "", 401},
		{"metrics", "GET", "/metrics", key, "", 200},
		{"pprof without a key", "GET", "/debug/pprof/", "", "", 401},
		{"pprof on loopback", "GET", "/debug/pprof/", key, "", 200},
		{"start_profile without a key", "POST", "/start_profile", "", `{"tool":"torch","output_dir":"run"}`, 401},
		{"stop_profile without a key", "POST", "/stop_profile", "", "", 401},
		{"start_profile outside", "POST", "/start_profile", key,
			`{"tool":"torch","output_dir":` + quote(filepath.Join(base, "elsewhere")) + `}`, 400},
		{"start_profile inside", "POST", "/start_profile", key, `{"tool":"torch","output_dir":"run"}`, 200},
		{"stop_profile", "POST", "/stop_profile", key, "", 200},
	}
	for _, st := range steps {
		code, body := call(t, st.method, url+st.path, st.key, st.body)
		if code != st.want {
			t.Errorf("%s: %s %s: %d, want %d: %.300s", st.name, st.method, st.path, code, st.want, body)
		}
		if st.name == "start_profile outside" && !strings.Contains(body, profileDir) {
			t.Errorf("the 400 does not name the profile dir %s: %s", profileDir, body)
		}
	}
	stop()
	if _, err := os.Stat(filepath.Join(base, "elsewhere")); err == nil {
		t.Error("a rejected output_dir was created")
	}
	if _, err := os.Stat(filepath.Join(profileDir, "run", "trace.json")); err != nil {
		t.Errorf("the capture inside the profile dir: %v", err)
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestServeDefaultProfileDir: without --profile-dir, serve makes a temp dir,
// logs it, confines captures to it, and removes it at exit when empty.
func TestServeDefaultProfileDir(t *testing.T) {
	t.Setenv(envAPIKey, "")
	var log syncBuffer
	url, stop := startServe(t, serveOptions{}, &log)
	m := regexp.MustCompile(`msg="profile dir" path=(\S+)`).FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no profile dir in the log:\n%s", log.String())
	}
	dir := m[1]
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("profile dir %s: %v", dir, err)
	}
	outside := filepath.Join(t.TempDir(), "x")
	code, body := call(t, "POST", url+"/start_profile", "", `{"tool":"torch","output_dir":`+quote(outside)+`}`)
	if code != 400 || !strings.Contains(body, dir) {
		t.Errorf("start_profile outside the temp dir: %d %s", code, body)
	}
	stop()
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the empty temp profile dir %s is still there", dir)
		os.Remove(dir)
	}
}
