// Package backendtest holds what tests of packages that launch servers
// share, as net/http/httptest does for handlers. (The backend package's own
// tests cannot use it: it imports backend.)
package backendtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
)

// PortBase returns a port the kernel just handed out (and took back): a
// --port-base unlikely to collide with servers other test processes start.
func PortBase(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Roseinfer returns the roseinfer binary a test runs: $ROSEINFER_BIN when
// set (a prebuilt one), else cmd/roseinfer built into a test directory. It
// skips the test while the module has no cmd/roseinfer sources.
func Roseinfer(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ROSEINFER_BIN"); p != "" {
		return p
	}
	root, err := backend.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(root, "cmd", "roseinfer", "*.go")); len(m) == 0 {
		t.Skip("cmd/roseinfer has no sources yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := backend.BuildRoseinfer(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// shared is the roseinfer binary RoseinferOnce built for this test process.
var shared struct {
	once sync.Once
	dir  string
	bin  string
	err  error
	skip bool
}

// RoseinferOnce is Roseinfer built once per test process, for packages
// whose tests launch many servers. The package's TestMain calls Main, which
// removes the build when the tests are done.
func RoseinferOnce(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		if p := os.Getenv("ROSEINFER_BIN"); p != "" {
			shared.bin = p
			return
		}
		root, err := backend.ModuleRoot()
		if err != nil {
			shared.err = err
			return
		}
		if m, _ := filepath.Glob(filepath.Join(root, "cmd", "roseinfer", "*.go")); len(m) == 0 {
			shared.skip = true
			return
		}
		if shared.dir, err = os.MkdirTemp("", "roseinfer-test-bin-"); err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.bin, shared.err = backend.BuildRoseinfer(ctx, root, shared.dir)
	})
	switch {
	case shared.skip:
		t.Skip("cmd/roseinfer has no sources yet")
	case shared.err != nil:
		t.Fatal(shared.err)
	}
	return shared.bin
}

// Main runs a package's tests (m.Run) and then removes what RoseinferOnce
// built; a package that uses RoseinferOnce calls it from its TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// BurstTrace writes a BurstGPT-format trace of n requests into a temporary
// file and returns its path: row i is sent at at(i) seconds with in prompt
// and out generated tokens.
func BurstTrace(t testing.TB, n int, row func(i int) (at float64, in, out int)) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for i := range n {
		at, in, out := row(i)
		fmt.Fprintf(&b, "%.6f,ChatGPT,%d,%d,%d,Conversation log\n", at, in, out, in+out)
	}
	path := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// EvenBurstTrace is BurstTrace of n requests 1/rate s apart, each of in
// prompt and out generated tokens.
func EvenBurstTrace(t testing.TB, n int, rate float64, in, out int) string {
	t.Helper()
	return BurstTrace(t, n, func(i int) (float64, int, int) { return float64(i) / rate, in, out })
}
