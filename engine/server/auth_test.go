package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

const testKey = "sk-test-0123456789"

// send makes one request with the Authorization header auth ("" = none).
func send(t *testing.T, s *Server, method, path, body, auth string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// okHandler stands in for the profiler: what matters here is whether a
// request reaches it.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
})

// protectedRoutes are every route that needs the key, with a request each
// that succeeds once the key is right.
var protectedRoutes = []struct{ method, path, body string }{
	{"POST", "/v1/completions", `{"prompt":"Hello","max_tokens":2}`},
	{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`},
	{"GET", "/v1/models", ""},
	{"POST", "/start_profile", `{"tool":"torch","output_dir":"x"}`},
	{"POST", "/stop_profile", ""},
	{"GET", "/debug/pprof/", ""},
	{"GET", "/debug/pprof/cmdline", ""}, // would show a key given as a flag
	{"GET", "/metrics", ""},             // with MetricsAuth only
}

func withKey(metricsAuth bool) func(*Config) {
	return func(c *Config) {
		c.APIKey, c.MetricsAuth, c.EnablePprof, c.ProfileHandler = testKey, metricsAuth, true, okHandler
	}
}

// TestAPIKey: every protected route answers 401 with an OpenAI-style error
// to a missing or wrong key, and 200 to the right one.
func TestAPIKey(t *testing.T) {
	s := startServer(t, newFakeEngine(t, script), withKey(true))
	auths := []struct{ name, header string }{
		{"no header", ""},
		{"wrong key", "Bearer sk-wrong"},
		{"key as a prefix", "Bearer " + testKey + "x"},
		{"prefix of the key", "Bearer " + testKey[:len(testKey)-1]},
		{"empty bearer", "Bearer "},
		{"basic scheme", "Basic " + testKey},
		{"no scheme", testKey},
	}
	for _, rt := range protectedRoutes {
		for _, a := range auths {
			resp, body := send(t, s, rt.method, rt.path, rt.body, a.header)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s, %s: status %d, want 401: %s", rt.method, rt.path, a.name, resp.StatusCode, body)
				continue
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer" {
				t.Errorf("%s %s, %s: WWW-Authenticate %q", rt.method, rt.path, a.name, got)
			}
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    string  `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "invalid_request_error" ||
				e.Error.Code != "invalid_api_key" || e.Error.Message == "" || e.Error.Param != nil {
				t.Errorf("%s %s, %s: body %s (%v)", rt.method, rt.path, a.name, body, err)
			}
			if strings.Contains(string(body), testKey[3:]) {
				t.Errorf("%s %s, %s: the answer echoes the key: %s", rt.method, rt.path, a.name, body)
			}
		}
	}
	for _, auth := range []string{"Bearer " + testKey, "bearer " + testKey, "Bearer  " + testKey} {
		for _, rt := range protectedRoutes {
			resp, body := send(t, s, rt.method, rt.path, rt.body, auth)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s with %q: status %d: %s", rt.method, rt.path, auth, resp.StatusCode, body)
			}
		}
	}
}

// TestAPIKeyOpenRoutes: /health is always open, /metrics unless
// MetricsAuth, an unknown route is a 404 either way, and a path that cleans
// to a protected one is protected.
func TestAPIKeyOpenRoutes(t *testing.T) {
	cases := []struct {
		name        string
		metricsAuth bool
		path        string
		want        int
	}{
		{"health", false, "/health", 200},
		{"health with metrics auth", true, "/health", 200},
		{"metrics", false, "/metrics", 200},
		{"metrics with metrics auth", true, "/metrics", 401},
		{"unknown route", false, "/nope", 404},
		{"path that cleans to /v1", false, "/x/../v1/models", 401},
	}
	for _, tc := range cases {
		s := startServer(t, newFakeEngine(t, script), withKey(tc.metricsAuth))
		resp, body := send(t, s, "GET", tc.path, "", "")
		if resp.StatusCode != tc.want {
			t.Errorf("%s: GET %s without a key: %d, want %d: %s", tc.name, tc.path, resp.StatusCode, tc.want, body)
		}
	}
}
