package backend

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The exact TensorRT-LLM argv + environment (testdata/trtllm_launch.golden),
// LD_LIBRARY_PATH from the venv included, and the original's command.
func TestTRTLLMLaunchGolden(t *testing.T) {
	root := t.TempDir()
	python := fakeVenv(t, root, "trtllm", probeTRTLLM)
	sp := filepath.Join(root, ".venvs", "trtllm", "lib", "python3.12", "site-packages")
	for _, d := range []string{"tensorrt_libs", "nvidia/cublas/lib", "nvidia/cudnn/lib"} {
		if err := os.MkdirAll(filepath.Join(sp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	harnessEnv := map[string]string{"LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "TLLM_WORKER_USE_SINGLE_PROCESS": "1"}
	cases := []struct {
		title string
		mod   func(*ThirdPartyOptions)
		run   ThirdPartyRun
	}{
		{"original defaults (--backend tensorrt; the harness's TLLM_WORKER_USE_SINGLE_PROCESS removed)", nil, testRun(root, harnessEnv)},
		{"pytorch backend, single-process worker, batch 64, YAML options, GPU 0, pinned to 2 CPUs",
			func(o *ThirdPartyOptions) {
				o.TRTLLMBackend, o.TRTLLMWorkerSingleProcess, o.TRTLLMMaxBatchSize = "pytorch", true, 64
				o.TRTLLMExtraLLMAPIOptions = "/cfg/trt.yaml"
			}, ThirdPartyRun{Root: root, GPU: "0", ServerCPUs: "0,1", Getenv: func(string) string { return "" }}},
		{"--api-key: trtllm-serve has no such option, so it runs open; requests still send the key",
			nil, withKey(testRun(root, nil))},
	}
	var out strings.Builder
	for _, c := range cases {
		o := DefaultThirdParty()
		if c.mod != nil {
			c.mod(&o)
		}
		s, err := TRTLLM(context.Background(), &o, c.run)
		if err != nil {
			t.Fatalf("%s: %v", c.title, err)
		}
		out.WriteString(describeLaunch(c.title, s, nil, "127.0.0.1", 18003, root))
	}
	compareGolden(t, "trtllm_launch.golden", []byte(out.String()))

	o := DefaultThirdParty()
	s, _ := TRTLLM(context.Background(), &o, testRun(root, nil))
	original := python + " -m tensorrt_llm.commands.serve gpt2 --host 127.0.0.1 --port 18003 --backend tensorrt" +
		" --max_seq_len 1024 --log_level error"
	if got := strings.Join(s.Command("127.0.0.1", 18003), " "); got != original {
		t.Errorf("argv\n got %s\nwant %s", got, original)
	}
	if s.AfterStop == nil {
		t.Error("TensorRT-LLM must be stopped by port too")
	}
}

// startOwn starts a process of this test in a new session (outside any
// group the harness would signal), as trtllm-serve's detached server is.
func startOwn(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return cmd
}

func freeTestPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitListening(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %d", port)
}

func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i >= 0 && i+2 < len(data) && data[i+2] != 'Z'
}

// StopByPort finds a detached server by the port it listens on, and a
// process by its trtllm-serve command line and port, and ends both with
// their children; an unrelated process on another port is left alone.
func TestStopByPort(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("needs Linux /proc")
	}
	port := freeTestPort(t)
	listener := exec.Command(os.Args[0], "--port", strconv.Itoa(port))
	listener.Env = append(os.Environ(), "BACKEND_TEST_MODE=detached-listener")
	startOwn(t, listener)
	waitListening(t, port)

	other := freeTestPort(t)
	marked := startOwn(t, exec.Command("sh", "-c", "sleep 300; :", "sh", trtllmServeMarker, "--port", strconv.Itoa(port)))
	unrelated := startOwn(t, exec.Command("sh", "-c", "sleep 300; :", "sh", trtllmServeMarker, "--port", strconv.Itoa(other)))
	time.Sleep(100 * time.Millisecond) // let sh start its sleep child

	pids := StopByPort(port, trtllmServeMarker, 5*time.Second)
	has := map[int]bool{}
	for _, p := range pids {
		has[p] = true
	}
	if !has[listener.Process.Pid] || !has[marked.Process.Pid] || has[unrelated.Process.Pid] || has[os.Getpid()] {
		t.Errorf("signalled %v; listener %d, marked %d, unrelated %d", pids, listener.Process.Pid, marked.Process.Pid, unrelated.Process.Pid)
	}
	if len(pids) < 3 {
		t.Errorf("signalled %v: the marked shell's sleep child is missing", pids)
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d still alive", p)
		}
	}
	if !alive(unrelated.Process.Pid) {
		t.Error("unrelated process was killed")
	}
	if got := StopByPort(port, trtllmServeMarker, time.Second); len(got) != 0 {
		t.Errorf("second stop signalled %v", got)
	}
}

// Server.Stop calls the spec's AfterStop with the port it launched on, once
// the process group is gone (how TensorRT-LLM's stop by port is reached).
func TestAfterStopGetsThePort(t *testing.T) {
	t.Setenv("BACKEND_TEST_MODE", "after-stop")
	type call struct {
		host string
		port int
	}
	calls := make(chan call, 2)
	s := Spec{Label: "trtllm", Ready: DefaultReady,
		Command:   func(host string, port int) []string { return []string{os.Args[0], "--port", strconv.Itoa(port)} },
		AfterStop: func(host string, port int) { calls <- call{host, port} }}
	srv, err := Launch(context.Background(), s, LaunchOptions{RunDir: t.TempDir(), ReadyTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.Stop()
	select {
	case c := <-calls:
		if c.host != "127.0.0.1" || strconv.Itoa(c.port) != srv.Argv[2] {
			t.Errorf("AfterStop(%s, %d), server argv %v", c.host, c.port, srv.Argv)
		}
	default:
		t.Fatal("AfterStop was not called")
	}
	if len(calls) != 0 {
		t.Error("AfterStop called twice")
	}
}
