package client

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const okStream = "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"

// rawServer accepts connections and hands each to serve; it returns the
// base URL.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer conn.Close(); serve(conn) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return "http://" + ln.Addr().String()
}

// Start writes the whole request, head and body, before it returns, in one
// write: the server's first read holds all of it. Result.Sent lies between
// the call and the return, and Finish reads the answer later.
func TestStartWritesBeforeReturning(t *testing.T) {
	got := make(chan string, 1)
	answer := make(chan struct{})
	url := rawServer(t, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		for {
			buf := make([]byte, 64<<10)
			n, err := br.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
			<-answer
			fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(okStream), okStream)
		}
	})
	c := New(Options{BaseURL: url, APIKey: "k3y"})
	defer c.Close()
	body := []byte(`{"prompt":[1,2,3],"stream":true}`)
	// The first request dials in Finish: Start found no idle connection.
	go func() { <-got; answer <- struct{}{} }()
	if res := c.Do(context.Background(), Completions, body); res.Err != nil {
		t.Fatal(res.Err)
	}
	called := time.Now()
	p := c.Start(context.Background(), ChatCompletions, body)
	returned := time.Now()
	var req string
	select {
	case req = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not receive the request Start sent")
	}
	close(answer)
	res := p.Finish()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Sent.Before(called) || res.Sent.After(returned) {
		t.Errorf("Sent %v not within Start's call [%v, %v]", res.Sent, called, returned)
	}
	head, gotBody, ok := strings.Cut(req, "\r\n\r\n")
	if !ok || gotBody != string(body) {
		t.Fatalf("first read %q: want the whole request", req)
	}
	for _, want := range []string{"POST /v1/chat/completions HTTP/1.1\r\n", "\r\nHost: " + strings.TrimPrefix(url, "http://") + "\r\n",
		"\r\nContent-Type: application/json\r\n", "\r\nAccept: text/event-stream\r\n", "\r\nAuthorization: Bearer k3y\r\n",
		fmt.Sprintf("\r\nContent-Length: %d", len(body))} {
		if !strings.Contains(head, want) {
			t.Errorf("request head lacks %q:\n%s", want, head)
		}
	}
	if strings.Contains(strings.ToLower(head), "accept-encoding") {
		t.Errorf("request asks for compression:\n%s", head)
	}
	if d := c.NumDialled(); d != 1 {
		t.Errorf("%d connections dialled for two requests in turn, want 1", d)
	}
}

// A Start with no idle connection dials nothing on the caller: Finish
// dials and sends, and Sent is taken there.
func TestStartLeavesTheDialToFinish(t *testing.T) {
	srv, _ := streamServer(t, http.StatusOK, []write{{data: okStream}})
	c := New(Options{BaseURL: srv.URL})
	defer c.Close()
	p := c.Start(context.Background(), Completions, []byte(`{}`))
	if d := c.NumDialled(); d != 0 {
		t.Fatalf("Start dialled %d connections", d)
	}
	res := p.Finish()
	if res.Err != nil || c.NumDialled() != 1 || c.NumOpen() != 1 {
		t.Fatalf("Finish: %v, %d dialled, %d open; want one connection, idle", res.Err, c.NumDialled(), c.NumOpen())
	}
	if res.Sent.Before(res.Called) || !res.Sent.Before(res.Chunks[0].At) {
		t.Errorf("called %v, sent %v, first chunk %v out of order", res.Called, res.Sent, res.Chunks[0].At)
	}
}

// An idle connection the server closed is found before the send and
// dropped: the request goes out on a new connection without a retry.
func TestClosedIdleConnectionIsNotUsed(t *testing.T) {
	var mu sync.Mutex
	served := 0
	url := rawServer(t, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		mu.Lock()
		served++
		mu.Unlock()
		// Keep-alive promised, then the connection is closed once idle.
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(okStream), okStream)
	})
	c := New(Options{BaseURL: url, Timeout: 5 * time.Second})
	defer c.Close()
	for i := range 3 {
		res := c.Do(context.Background(), Completions, []byte(`{}`))
		if res.Err != nil || res.Retries != 0 {
			t.Fatalf("request %d: %v, %d retries", i, res.Err, res.Retries)
		}
		time.Sleep(20 * time.Millisecond) // the server's close arrives
	}
	if d := c.NumDialled(); d != 3 || served != 3 {
		t.Errorf("%d dialled, %d served; want 3 each", d, served)
	}
	if n := c.NumOpen(); n != 1 {
		t.Errorf("%d open, want the last one only (until its close is found)", n)
	}
}

// An answer that does not keep the connection (Connection: close), or whose
// stream ends early, leaves its connection closed, never pooled.
func TestConnectionReuseNeedsACleanKeepAliveEnd(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		stream       string
		wantReuse    bool
	}{
		{"keep-alive", "", okStream, true},
		{"connection close", "Connection: close\r\n", okStream, false},
		{"bad chunk ends the read early", "", "data: {not json\n\n" + okStream, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := rawServer(t, func(conn net.Conn) {
				br := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s", tc.header, len(tc.stream), tc.stream)
					if tc.header != "" {
						return
					}
				}
			})
			c := New(Options{BaseURL: url, Timeout: 5 * time.Second})
			defer c.Close()
			for range 2 {
				c.Do(context.Background(), Completions, []byte(`{}`))
			}
			want := int64(2)
			if tc.wantReuse {
				want = 1
			}
			if d := c.NumDialled(); d != want {
				t.Errorf("%d dialled for 2 requests, want %d", d, want)
			}
		})
	}
}

// Cancelling the context aborts a read blocked on a silent server.
func TestCancelAbortsABlockedRead(t *testing.T) {
	url := rawServer(t, func(conn net.Conn) { io.Copy(io.Discard, conn) }) // reads, never answers
	c := New(Options{BaseURL: url})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan *Result, 1)
	go func() { done <- c.Do(ctx, Completions, []byte(`{}`)) }()
	select {
	case res := <-done:
		if res.ErrKind != ErrCanceled {
			t.Errorf("kind %q (%v), want %q", res.ErrKind, res.Err, ErrCanceled)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not abort the read")
	}
	if n := c.NumOpen(); n != 0 {
		t.Errorf("%d connections open after the aborted request, want 0", n)
	}
}

// A bad base URL or API key is an error result, never a panic or a
// malformed request.
func TestBadConfigIsAnErrorResult(t *testing.T) {
	for _, o := range []Options{
		{BaseURL: "ftp://127.0.0.1:1"},
		{BaseURL: "http://"},
		{BaseURL: "http://127.0.0.1:1", APIKey: "a\r\nX-Evil: 1"},
		{BaseURL: "://"},
	} {
		c := New(o)
		res := c.Do(context.Background(), Completions, []byte(`{}`))
		if res.Err == nil {
			t.Errorf("%+v: no error", o)
		}
		if _, err := c.Prewarm(context.Background(), 1); err == nil {
			t.Errorf("%+v: Prewarm: no error", o)
		}
	}
}

// An https base URL is served over TLS, keep-alive included.
func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, okStream)
	}))
	defer srv.Close()
	c := New(Options{BaseURL: srv.URL})
	defer c.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c.target.tls.RootCAs = roots
	for i := range 2 {
		if res := c.Do(context.Background(), Completions, []byte(`{}`)); res.Err != nil || res.NumTokens() != 1 {
			t.Fatalf("request %d: %v, %d tokens", i, res.Err, res.NumTokens())
		}
	}
	if d := c.NumDialled(); d != 1 {
		t.Errorf("%d dialled, want 1 (kept alive)", d)
	}
}

// Prewarm opens distinct idle connections that the next requests take:
// requests in flight together dial nothing more.
func TestPrewarmFillsThePool(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == modelsPath {
			io.WriteString(w, `{"data":[]}`)
			return
		}
		<-release
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, okStream)
	}))
	defer srv.Close()
	const n = 8
	c := New(Options{BaseURL: srv.URL, MaxConcurrency: n})
	defer c.Close()
	if d, err := c.Prewarm(context.Background(), n+5); err != nil || d != n || c.NumOpen() != n {
		t.Fatalf("Prewarm: %d dialled, %d open, %v; want %d (capped at MaxConcurrency)", d, c.NumOpen(), err, n)
	}
	if d, err := c.Prewarm(context.Background(), n); err != nil || d != 0 {
		t.Fatalf("Prewarm of a full pool: %d dialled, %v", d, err)
	}
	pending := make([]*Pending, n)
	for i := range pending {
		pending[i] = c.Start(context.Background(), Completions, []byte(`{}`))
	}
	close(release)
	for i, p := range pending {
		if res := p.Finish(); res.Err != nil {
			t.Fatalf("request %d: %v", i, res.Err)
		}
	}
	if d := c.NumDialled(); d != n {
		t.Errorf("%d dialled in all, want the %d prewarmed", d, n)
	}
}
