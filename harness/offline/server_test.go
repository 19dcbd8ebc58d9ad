package offline

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/results"
)

// Both labels against the real roseinfer on the CPU default: token totals
// equal prompts × lengths exactly, through the engine API and over HTTP.
func TestBothBackendsCPUInputLen256(t *testing.T) {
	bin := backendtest.Roseinfer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := Default()
	o.RoseinferBin = bin
	o.NumPrompts, o.InputLen, o.OutputLen = 3, 256, 4
	o.WarmupPrompts = 1
	o.PortBase = backendtest.PortBase(t)
	o.RunDir = t.TempDir()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) != 0 {
		log, _ := os.ReadFile(filepath.Join(rep.RunDir, LabelServer+".server.log"))
		t.Fatalf("failures %v\n%s", rep.Failures, log)
	}
	off, err := results.LoadOffline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(off.Results) != 2 {
		t.Fatalf("%d results, want both labels", len(off.Results))
	}
	for _, r := range off.Results {
		if r.TotalInputTokens != 3*256 || r.TotalOutputTokens != 3*4 {
			t.Errorf("%s: totals %d in, %d out; want 768 and 12", r.Backend, r.TotalInputTokens, r.TotalOutputTokens)
		}
		if !(r.OutputThroughputTPS > 0) {
			t.Errorf("%s: output tok/s %v", r.Backend, r.OutputThroughputTPS)
		}
	}
	if len(backend.Running()) != 0 {
		t.Error("server still running after the run")
	}
}
