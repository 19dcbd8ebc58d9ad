//go:build unix

package client

import "syscall"

// alive reports whether an idle connection can still carry a request: a
// non-blocking peek finds nothing to read. The server's close (EOF), a
// reset, or bytes nobody asked for all mean it cannot. net/http learns the
// same from the reader goroutine it keeps on every idle connection; one
// system call per send is cheaper than a goroutine per connection. A close
// that races the send is left to the retry (Client.Do).
func (cn *conn) alive() bool {
	if cn.raw == nil {
		return true
	}
	var buf [1]byte
	ok := false
	err := cn.raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: open and quiet. EINTR: no answer; assume open, the
		// retry covers the rare miss.
		ok = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR
		return true // never wait for readability
	})
	return err == nil && ok
}
