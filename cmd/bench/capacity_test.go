package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input is refused by flag name before any server starts, and no run
// directory is left behind.
func TestCapacityCommandRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{nil, "--slo is required"},
		{[]string{"--slo", "ttft=fast"}, "--slo"},
		{[]string{"--slo", "itl=5ms"}, "unknown metric"},
		{[]string{"--slo", "ttft=1s", "--goodput", "95"}, "--goodput"},
		{[]string{"--slo", "ttft=1s", "--tolerance", "0"}, "--tolerance"},
		{[]string{"--slo", "ttft=1s", "--start-rate", "-3"}, "--start-rate"},
		{[]string{"--slo", "ttft=1s", "--max-probes", "0"}, "--max-probes"},
		{[]string{"--slo", "ttft=1s", "--confirm", "-1"}, "--confirm"},
		{[]string{"--slo", "ttft=1s", "--trace", filepath.Join(dir, "missing.csv")}, "missing.csv"},
	}
	for _, c := range cases {
		args := append([]string{"capacity", "--output-dir", dir, "--base-url", "http://127.0.0.1:1"}, c.args...)
		out, code := execBench(t, args...)
		if code != exitFailed || !strings.Contains(out, c.want) {
			t.Errorf("bench %s: exit %d, output %q; want exit 1 naming %q", strings.Join(args, " "), code, out, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused runs left %d entries in the output dir", len(entries))
	}
}
