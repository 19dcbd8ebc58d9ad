// Package reporttest opens a report page in headless Chromium, for the
// tests of the packages that write report.html (harness/report, and
// cmd/bench, whose online runs write one at their end). A test skips where
// no Chromium is installed.
package reporttest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// Chromium finds a Chromium to open pages with: $CHROMIUM, else the first
// of chromium, chromium-browser, google-chrome on $PATH; "" if none.
func Chromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// RequireChromium returns Chromium's path or skips the test.
func RequireChromium(t testing.TB) string {
	t.Helper()
	bin := Chromium()
	if bin == "" {
		t.Skip("chromium not installed (apt-get install -y chromium); skipping the browser check of report.html")
	}
	return bin
}

var consoleLine = regexp.MustCompile(`(?m)^.*:CONSOLE[:(].*$`)

// Open loads a page headless and returns its DOM and every console message
// Chromium logged (it logs console.error and uncaught exceptions as
// "INFO:CONSOLE" lines on stderr).
func Open(t testing.TB, bin, page string) (dom string, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000",
		"--dump-dom", "file://"+page)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return stdout.String(), consoleLine.FindAllString(stderr.String(), -1)
}
