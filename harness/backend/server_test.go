package backend

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a fake server: with BACKEND_TEST_MODE set it
// serves /health and /v1/models on the --port it is given and behaves as
// the mode says.
func TestMain(m *testing.M) {
	if mode := os.Getenv("BACKEND_TEST_MODE"); mode != "" {
		fakeServer(mode, os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

func fakeServer(mode string, args []string) {
	port, key := "", ""
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			port = args[i+1]
		}
		if a == "--api-key" && i+1 < len(args) {
			key = args[i+1]
		}
	}
	fmt.Println("fake server starting, mode", mode)
	switch mode {
	case "exit":
		fmt.Println("fatal: cannot load model")
		os.Exit(3)
	case "never-ready":
		// Block without a deadlock: a bare select{} with no other goroutine
		// makes the runtime abort the process ("all goroutines are asleep").
		time.Sleep(time.Hour)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
	case "spawn-child":
		// A grandchild in the same process group, like a worker process.
		child := exec.Command("sleep", "300")
		child.Start()
		fmt.Println("child pid", child.Process.Pid)
		os.WriteFile(os.Getenv("BACKEND_TEST_CHILD_PID"), []byte(strconv.Itoa(child.Process.Pid)), 0o644)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"object":"list","data":[{"id":"tiny-gpt2","object":"model"}]}`))
	})
	if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}

func fakeSpec(t *testing.T, mode string) Spec {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Label:     "fake+" + mode,
		Command:   func(host string, port int) []string { return []string{exe, "--port", strconv.Itoa(port)} },
		Env:       map[string]string{"BACKEND_TEST_MODE": mode},
		Ready:     ReadyRule{Paths: []string{"/health", "/v1/models"}, Interval: 20 * time.Millisecond, ProbeTimeout: time.Second},
		StopGrace: 300 * time.Millisecond,
	}
}

func processAlive(pid int) bool {
	// Signal 0 checks existence; a zombie (exited, not reaped) counts as
	// gone, so also look at /proc state.
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] != "Z"
}

func TestLaunchReadyAndStop(t *testing.T) {
	dir := t.TempDir()
	childPidFile := filepath.Join(dir, "child.pid")
	for _, mode := range []string{"ok", "ignore-term", "spawn-child"} {
		t.Run(mode, func(t *testing.T) {
			spec := fakeSpec(t, mode)
			spec.Env["BACKEND_TEST_CHILD_PID"] = childPidFile
			srv, err := Launch(context.Background(), spec, LaunchOptions{RunDir: dir, PortBase: 20000, ReadyTimeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			pid := srv.cmd.Process.Pid
			if srv.ModelID != "tiny-gpt2" {
				t.Errorf("model id %q, want tiny-gpt2", srv.ModelID)
			}
			if died, _ := srv.Died(); died {
				t.Error("server reported dead while running")
			}
			log, _ := os.ReadFile(srv.LogPath)
			if !strings.Contains(string(log), "fake server starting") || filepath.Base(srv.LogPath) != spec.Label+".server.log" {
				t.Errorf("log %s holds %q", srv.LogPath, log)
			}
			srv.Stop()
			srv.Stop() // idempotent
			if processAlive(pid) {
				t.Errorf("server pid %d still alive after Stop", pid)
			}
			if died, _ := srv.Died(); died {
				t.Error("a stopped server must not count as died")
			}
			if mode == "spawn-child" {
				data, err := os.ReadFile(childPidFile)
				if err != nil {
					t.Fatal(err)
				}
				child, _ := strconv.Atoi(string(data))
				deadline := time.Now().Add(5 * time.Second)
				for processAlive(child) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if processAlive(child) {
					syscall.Kill(child, syscall.SIGKILL)
					t.Errorf("grandchild %d survived Stop", child)
				}
			}
		})
	}
}

func TestLaunchFailures(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		mode    string
		timeout time.Duration
		want    string
	}{
		// Exits while starting: reported at once, with the log's last lines.
		{"exit", 20 * time.Second, "cannot load model"},
		// Never listens: reported after the timeout, process stopped.
		{"never-ready", 300 * time.Millisecond, "not ready after"},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			start := time.Now()
			_, err := Launch(context.Background(), fakeSpec(t, tc.mode), LaunchOptions{RunDir: dir, PortBase: 20100, ReadyTimeout: tc.timeout})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fake+"+tc.mode) {
				t.Fatalf("error %v, want one naming the backend and containing %q", err, tc.want)
			}
			if time.Since(start) > 15*time.Second {
				t.Errorf("failure took %v", time.Since(start))
			}
			live.Lock()
			n := len(live.servers)
			live.Unlock()
			if n != 0 {
				t.Errorf("%d servers still registered after a failed launch", n)
			}
		})
	}
}

func TestDiedMidRun(t *testing.T) {
	srv, err := Launch(context.Background(), fakeSpec(t, "ok"), LaunchOptions{RunDir: t.TempDir(), PortBase: 20200})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	syscall.Kill(srv.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-srv.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("exit not noticed")
	}
	died, why := srv.Died()
	if !died || !strings.Contains(why, "killed") {
		t.Errorf("Died() = %v, %q; want true and the signal", died, why)
	}
}

func TestNotLaunchedServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"data":[{"id":"remote"}]}`))
	})}
	go hs.Serve(ln)
	defer hs.Close()
	srv, err := Launch(context.Background(), OpenAI("openai", "http://"+ln.Addr().String()+"/", ""), LaunchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if srv.ModelID != "remote" || srv.BaseURL != "http://"+ln.Addr().String() {
		t.Errorf("model %q base %q", srv.ModelID, srv.BaseURL)
	}
}

func TestFreePortSkipsUsedAndBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	got, err := FreePort("127.0.0.1", busy, map[int]bool{busy + 1: true})
	if err != nil {
		t.Fatal(err)
	}
	if got == busy || got == busy+1 || got < busy {
		t.Errorf("FreePort = %d with %d bound and %d used", got, busy, busy+1)
	}
}

func TestParseVariant(t *testing.T) {
	tests := []struct {
		in        string
		wantLabel string
		wantFlags []string
		wantErr   bool
	}{
		{"nocache=--no-prefix-cache", "roseinfer+nocache", []string{"--no-prefix-cache"}, false},
		{"b16= --max-num-seqs 16  --name 'a b' ", "roseinfer+b16", []string{"--max-num-seqs", "16", "--name", "a b"}, false},
		{`q=--x "say \"hi\""`, "roseinfer+q", []string{"--x", `say "hi"`}, false},
		{"plain=", "roseinfer+plain", nil, false},
		{"--no-prefix-cache", "", nil, true}, // no label
		{"a+b=--x", "", nil, true},           // '+' would break the label grammar
		{"u=--x 'open", "", nil, true},       // unterminated quote
		{"=--x", "", nil, true},              // empty label
	}
	for _, tc := range tests {
		label, flags, err := ParseVariant(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if label != tc.wantLabel || strings.Join(flags, "|") != strings.Join(tc.wantFlags, "|") {
			t.Errorf("%q: got %q %q, want %q %q", tc.in, label, flags, tc.wantLabel, tc.wantFlags)
		}
	}
}

// TestLaunchWithAPIKey: a server launched with --api-key is probed with the
// key (its /v1/models answers 401 without it), and the key is *** in the
// recorded argv and the log; without the key on the spec the probe fails.
func TestLaunchWithAPIKey(t *testing.T) {
	const key = "sk-test-7f3a"
	dir := t.TempDir()
	spec := fakeSpec(t, "ok")
	command := spec.Command
	spec.Command = func(host string, port int) []string { return append(command(host, port), "--api-key", key) }
	spec.APIKey = key
	srv, err := Launch(context.Background(), spec, LaunchOptions{RunDir: dir, PortBase: 20000, ReadyTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if got := strings.Join(srv.Argv, " "); strings.Contains(got, key) || !strings.HasSuffix(got, "--api-key ***") {
		t.Errorf("recorded argv %q: want the key as ***", got)
	}
	if log, _ := os.ReadFile(srv.LogPath); strings.Contains(string(log), key) || !strings.Contains(string(log), "--api-key ***") {
		t.Errorf("log %s shows the key or no ***:\n%s", srv.LogPath, log)
	}

	spec.Label, spec.APIKey = "fake+nokey", ""
	if _, err := Launch(context.Background(), spec, LaunchOptions{RunDir: dir, PortBase: 20000, ReadyTimeout: 300 * time.Millisecond}); err == nil ||
		!strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("probe without the key: err %v, want HTTP 401", err)
	}
}

func TestRoseinferCommand(t *testing.T) {
	spec := Roseinfer(RoseinferOptions{Binary: "/b/roseinfer", Label: "roseinfer+x", Device: "sim", Flags: []string{"--sim-step-us", "1000"}})
	got := strings.Join(spec.Command("127.0.0.1", 18001), " ")
	want := "/b/roseinfer serve --host 127.0.0.1 --port 18001 --device sim --sim-step-us 1000"
	if got != want {
		t.Errorf("argv %q, want %q", got, want)
	}
	spec = Roseinfer(RoseinferOptions{Binary: "/b/roseinfer", Device: "cpu", Flags: []string{"--max-num-seqs", "8"}, APIKey: "k1"})
	got = strings.Join(RedactArgv(spec.Command("127.0.0.1", 18001), spec.APIKey), " ")
	want = "/b/roseinfer serve --host 127.0.0.1 --port 18001 --device cpu --api-key *** --max-num-seqs 8"
	if got != want || spec.APIKey != "k1" {
		t.Errorf("argv %q (key %q), want %q", got, spec.APIKey, want)
	}
}
