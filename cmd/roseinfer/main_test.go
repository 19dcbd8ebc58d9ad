package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// run executes the root command in this process, as main does.
func run(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestServeInProcess starts `serve --device sim --port 0` through the same
// code path as the binary and talks to it over loopback.
func TestServeInProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := serveOptions{engineOptions: defaultEngineOptions(), host: "127.0.0.1", modelName: "gpt2",
		streamInterval: 1, logLevel: "warn"}
	o.Device, o.simStepMicros = "sim", 200
	urls := make(chan string, 1)
	o.ready = func(url string) { urls <- url }
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o, io.Discard) }()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	}
	waitHealthy(t, url)
	checkStream(t, url, 12)
	// The profiler's routes are mounted: stopping with no capture running is
	// its 400 with a detail, not the server's 404.
	resp, err := http.Post(url+"/stop_profile", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"detail"`) {
		t.Errorf("/stop_profile: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func waitHealthy(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/health not 200 after 30 s (last error %v)", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkStream streams n tokens with ignore_eos and checks they all arrive.
func checkStream(t *testing.T, url string, n int) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"gpt2","prompt":"Hello","max_tokens":%d,"ignore_eos":true,"stream":true}`, n)
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	numTokens, sawDone := 0, false
	for sc.Scan() {
		payload, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if payload == "[DONE]" {
			sawDone = true
			continue
		}
		var chunk struct {
			Choices []struct {
				TokenIDs []int `json:"token_ids"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(payload), &chunk); err != nil {
			t.Fatalf("%v: %s", err, payload)
		}
		for _, c := range chunk.Choices {
			numTokens += len(c.TokenIDs)
		}
	}
	if resp.StatusCode != 200 || numTokens != n || !sawDone {
		t.Fatalf("status %d, %d tokens (want %d), [DONE] %v", resp.StatusCode, numTokens, n, sawDone)
	}
}

// TestServeBinary builds the real binary, runs `roseinfer serve` as a child
// process, streams from it, and stops it with SIGTERM: it must exit 0.
func TestServeBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "roseinfer")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--device", "sim", "--sim-step-us", "200", "--port", "0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // no-op once it has exited
		<-exited
	})
	urlRE := regexp.MustCompile(`url=(http://\S+)`)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		exited <- cmd.Wait() // after stderr is drained, as Wait requires
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("serve printed no URL in 30 s")
	}
	waitHealthy(t, url)
	checkStream(t, url, 20)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit within 30 s of SIGTERM")
	}
}

// TestInitModelRoundTrip: init-model writes a checkpoint that loads back as
// the very model serve and generate run without --model.
func TestInitModelRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if _, errOut, err := run(t, ctx, "init-model", "--preset", "tiny", "--seed", "3", "--out", dir); err != nil {
		t.Fatalf("init-model: %v %s", err, errOut)
	}
	for _, name := range []string{"config.json", "model.safetensors", "vocab.json", "merges.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("init-model did not write %s: %v", name, err)
		}
	}
	gen := []string{"generate", "--device", "cpu", "--prompt", "Hello, my name is", "--max-tokens", "12",
		"--temperature", "0", "--ignore-eos"}
	fromDisk, _, err := run(t, ctx, append(gen, "--model", dir)...)
	if err != nil {
		t.Fatal(err)
	}
	builtin, _, err := run(t, ctx, append(gen, "--model-seed", "3")...)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := run(t, ctx, append(gen, "--model-seed", "4")...)
	if err != nil {
		t.Fatal(err)
	}
	if fromDisk == "" || fromDisk != builtin {
		t.Errorf("checkpoint generated %q, built-in model %q", fromDisk, builtin)
	}
	if other == builtin {
		t.Errorf("seeds 3 and 4 generate the same text %q", other)
	}
}

func TestFlagErrors(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"serve", "--device", "tpu"},
		{"serve", "--max-num-seqs", "0"},
		{"serve", "--device", "sim", "--sim-step-us", "-1"},
		{"serve", "--gpu-memory-utilization", "0"},
		{"serve", "--stream-interval", "0"},
		{"serve", "--port", "70000"},
		{"serve", "--model", filepath.Join(t.TempDir(), "missing")},
		{"serve", "--dtype", "int8"},
		{"serve", "--device", "cpu", "--dtype", "bfloat16"}, // cpu computes in fp32
		{"generate", "--prompt", "x", "--device", "sim", "--dtype", "half"},
		{"generate", "--prompt", "x", "--top-p", "0"},
		{"init-model", "--preset", "gpt5", "--out", t.TempDir()},
		{"init-model", "--dtype", "int8", "--out", t.TempDir()},
	} {
		if _, _, err := run(t, ctx, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	// vLLM's name for fp32, on the device that computes in it.
	if _, _, err := run(t, ctx, "generate", "--prompt", "x", "--max-tokens", "2", "--device", "cpu", "--dtype", "float"); err != nil {
		t.Errorf("generate --device cpu --dtype float: %v", err)
	}
	// --no-X turns X off; --max-batch-size is --max-num-seqs.
	cmd := newServeCommand()
	if err := cmd.ParseFlags([]string{"--no-prefix-cache", "--max-batch-size", "8", "--no-chunked-prefill"}); err != nil {
		t.Fatal(err)
	}
	fs := cmd.Flags()
	if v, _ := fs.GetInt("max-num-seqs"); v != 8 {
		t.Errorf("--max-batch-size 8 gave max-num-seqs %d", v)
	}
	if v, _ := fs.GetBool("prefix-cache"); v {
		t.Error("--no-prefix-cache left prefix-cache on")
	}
}
