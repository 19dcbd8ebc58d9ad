package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// closingServer is a raw HTTP/1.1 server whose idle keep-alive connections
// close the way a real server's can race a client: after a response it waits
// up to idle for the next request; when none came, it stops reading, and the
// close reaches the client only window later (as a FIN does over a network).
// A request the client writes inside that window is never read: the close
// (with unread data, a reset) is all it gets. It counts the requests it read.
type closingServer struct {
	ln           net.Listener
	idle, window time.Duration
	wg           sync.WaitGroup
	mu           sync.Mutex
	numRead      int
}

func newClosingServer(t *testing.T, idle, window time.Duration) *closingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &closingServer{ln: ln, idle: idle, window: window}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *closingServer) URL() string { return "http://" + s.ln.Addr().String() }

func (s *closingServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.serve(conn.(*net.TCPConn)) }()
	}
}

func (s *closingServer) serve(conn *net.TCPConn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for first := true; ; first = false {
		if !first {
			conn.SetReadDeadline(time.Now().Add(s.idle))
			if _, err := br.Peek(1); err != nil {
				// Idle: decided to close. Whatever arrives from now on is
				// never read; the client learns of the close window later.
				time.Sleep(s.window)
				conn.SetLinger(0)
				return
			}
			conn.SetReadDeadline(time.Time{})
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		s.mu.Lock()
		s.numRead++
		s.mu.Unlock()
		body := "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

// sendAcrossIdleCloses sends n requests one after another, alternating a
// short pause (the connection is reused while the server still waits) with
// one that lands in the server's close window (the pooled connection is
// stale), and returns the results.
func sendAcrossIdleCloses(c *Client, n int, short, stale time.Duration) []*Result {
	var out []*Result
	for i := 0; i < n; i++ {
		if i > 0 {
			if i%2 == 1 {
				time.Sleep(short)
			} else {
				time.Sleep(stale)
			}
		}
		out = append(out, c.Do(context.Background(), Completions, []byte(`{"prompt":[1]}`)))
	}
	return out
}

// TestRetryOnServerClosedIdleConnection: a server that closes idle keep-alive
// connections loses no request of the client, which re-sends on a new
// connection each request that met a closing connection (counted in
// Retries, timed from its first send); with the retry off, the same
// schedule loses requests, as Go's transport does not retry a POST.
func TestRetryOnServerClosedIdleConnection(t *testing.T) {
	const n = 12
	const idle, window = 40 * time.Millisecond, 80 * time.Millisecond
	const short, stale = 5 * time.Millisecond, 80 * time.Millisecond // stale: inside [idle, idle+window]

	for _, retry := range []bool{true, false} {
		srv := newClosingServer(t, idle, window)
		c := New(Options{BaseURL: srv.URL(), MaxConcurrency: 1, Timeout: 5 * time.Second})
		c.noRetry = !retry
		start := time.Now()
		res := sendAcrossIdleCloses(c, n, short, stale)
		c.Close()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("retry=%v: took %v", retry, d)
		}
		lost, retries := 0, 0
		for i, r := range res {
			retries += r.Retries
			if r.Err != nil {
				lost++
				if lost == 1 {
					t.Logf("retry=%v: first lost request: %s: %v", retry, r.ErrKind, r.Err)
				}
				if r.Retries != 0 {
					t.Errorf("retry=%v: request %d failed after a retry: %v", retry, i, r.Err)
				}
				continue
			}
			if r.Sent.Before(r.Called) || r.Sent.After(r.Chunks[0].At) {
				t.Errorf("retry=%v: request %d: called %v, sent %v, first chunk %v out of order", retry, i, r.Called, r.Sent, r.Chunks[0].At)
			}
		}
		t.Logf("retry=%v: %d of %d lost, %d retried, server read %d", retry, lost, n, retries, srv.numRead)
		if retry && (lost != 0 || retries == 0) {
			t.Errorf("with retry: %d of %d lost, %d retries; want 0 lost and some retries", lost, n, retries)
		}
		if !retry && lost == 0 {
			t.Errorf("retry off: no request lost; the server's close window was never met (test does not exercise the race)")
		}
		if retry && srv.numRead != n {
			t.Errorf("server read %d requests, want %d: a retried request must be one the server never read", srv.numRead, n)
		}
	}
}

// TestNoRetryAfterResponseStarted: a connection lost after the response
// headers (or on a fresh connection) is a failure as before, never re-sent.
func TestNoRetryAfterResponseStarted(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	// The handler is set before the server starts: swapping it after is a
	// data race with the server's goroutines.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	c := New(Options{BaseURL: srv.URL, Timeout: 5 * time.Second})
	defer c.Close()
	for i := 0; i < 2; i++ {
		res := c.Do(context.Background(), Completions, []byte(`{}`))
		if res.Err == nil || res.ErrKind != ErrStreamBroken || res.Retries != 0 {
			t.Errorf("request %d: err %v kind %q retries %d; want stream_broken, no retry", i, res.Err, res.ErrKind, res.Retries)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Errorf("server saw %d requests, want 2", calls)
	}
}

// TestRetryableRule: only a reused connection with no response byte, found
// closed, is retried.
func TestRetryableRule(t *testing.T) {
	closedIdle := errors.New(`Post "http://h/v1/completions": http: server closed idle connection`)
	reset := &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	pipe := &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		name              string
		reused, firstByte bool
		err               error
		want              bool
	}{
		{"server closed idle connection", true, false, closedIdle, true},
		{"reset on a reused connection", true, false, reset, true},
		{"broken pipe on write", true, false, pipe, true},
		{"EOF before any response byte", true, false, fmt.Errorf("Post: %w", io.EOF), true},
		{"fresh connection: the server may have read it", false, false, reset, false},
		{"after the first response byte", true, true, io.ErrUnexpectedEOF, false},
		{"dial refused", false, false, refused, false},
		{"deadline", true, false, context.DeadlineExceeded, false},
	}
	for _, c := range cases {
		a := &attempt{}
		a.reused.Store(c.reused)
		a.gotFirstByte.Store(c.firstByte)
		if got := a.retryable(c.err); got != c.want {
			t.Errorf("%s: retryable = %v, want %v", c.name, got, c.want)
		}
	}
}
