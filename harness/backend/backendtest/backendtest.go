// Package backendtest holds what tests of packages that launch servers
// share, as net/http/httptest does for handlers.
package backendtest

import (
	"net"
	"testing"
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
