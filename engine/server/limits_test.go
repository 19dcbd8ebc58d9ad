package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Slow-client tests: raw TCP clients on loopback that trickle, stall or
// overrun, against the real server. Every client has its own deadline, so a
// server that never cuts a client off fails the test in seconds instead of
// hanging it.

// rawRequest opens a connection and sends a POST's headers, declaring
// contentLength, followed by the first bytes of its body.
func rawRequest(t *testing.T, s *Server, contentLength int, bodyStart string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\n\r\n", contentLength)
	if _, err := io.WriteString(conn, head+bodyStart); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readAnswer waits up to timeout for the server to answer on conn or close
// it. It returns the response (nil if the server closed without one) and,
// for an error status, whether the connection then ended (EOF or reset).
func readAnswer(conn net.Conn, timeout time.Duration) (resp *http.Response, body string, isClosed bool, err error) {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	br := bufio.NewReader(conn)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		if isTimeout(err) {
			return nil, "", false, err
		}
		return nil, "", true, nil // closed without an answer
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil && isTimeout(err) {
		return resp, string(b), false, err
	}
	if resp.StatusCode < 400 {
		return resp, string(b), false, nil // kept alive
	}
	_, err = br.ReadByte() // the server must close after refusing or cutting a request off
	return resp, string(b), err != nil && !isTimeout(err), nil
}

// TestSlowClientsAreCutOff: a client that trickles its body, one that stalls
// after its headers and one that stalls inside them are all cut off soon
// after the request read deadline (408 or a closed connection), not held
// open. Before the deadline existed, 130 such connections were still open
// after 20 s.
func TestSlowClientsAreCutOff(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	s := startServer(t, newFakeEngine(t, script), func(c *Config) { c.RequestReadTimeout = readTimeout })
	const numEach = 10
	body := `{"prompt":"Hello","max_tokens":1}` + strings.Repeat(" ", 1000)
	type client struct {
		kind string
		conn net.Conn
	}
	var clients []client
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range numEach {
		// Trickles one byte every 20 ms: the whole body would take 20 s.
		trickler := rawRequest(t, s, len(body), body[:1])
		wg.Go(func() {
			for i := 1; i < len(body); i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := io.WriteString(trickler, body[i:i+1]); err != nil {
					return // cut off
				}
			}
		})
		clients = append(clients, client{"trickle", trickler}, client{"stalled body", rawRequest(t, s, len(body), body[:10])})
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_, _ = io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: te")
		clients = append(clients, client{"stalled headers", conn})
	}
	defer wg.Wait()
	defer close(stop)
	start := time.Now()
	for _, c := range clients {
		resp, b, isClosed, err := readAnswer(c.conn, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: still open after %v: %v", c.kind, time.Since(start).Round(time.Millisecond), err)
		}
		// Headers that never end are net/http's to cut (it closes); a body
		// that misses the deadline is ours, and gets 408.
		if c.kind != "stalled headers" && (resp == nil || resp.StatusCode != http.StatusRequestTimeout) {
			t.Errorf("%s: %v, want 408: %s", c.kind, resp, b)
		}
		if resp != nil && !strings.Contains(b, `"request_timeout"`) {
			t.Errorf("%s: 408 body %s", c.kind, b)
		}
		if !isClosed {
			t.Errorf("%s: connection left open after the answer", c.kind)
		}
	}
	if took := time.Since(start); took > readTimeout+2*time.Second {
		t.Errorf("cutting %d slow clients off took %v (read timeout %v)", len(clients), took, readTimeout)
	}
}

// TestGenerationOutlivesReadTimeout: the read deadline bounds receiving a
// request, not answering it. A stream longer than the deadline runs to the
// end, and the keep-alive connection serves a second request after idling
// past it.
func TestGenerationOutlivesReadTimeout(t *testing.T) {
	eng := newFakeEngine(t, script)
	eng.tokenDelay = 40 * time.Millisecond // 12 tokens: ~0.5 s, over twice the deadline
	s := startServer(t, eng, func(c *Config) { c.RequestReadTimeout = 200 * time.Millisecond })
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for i := range 2 {
		resp, err := client.Post(s.URL()+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"Hello","max_tokens":12,"ignore_eos":true,"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %v", i, resp.StatusCode, err)
		}
		if _, tokens, finish := streamTotals(parseSSE(t, b)); len(tokens[0]) != 12 || finish[0] != "length" {
			t.Fatalf("request %d: %d tokens, finish %q", i, len(tokens[0]), finish[0])
		}
		time.Sleep(300 * time.Millisecond) // idle past the read deadline before the next request
	}
}

// TestBodyBudget: with the server-wide cap on bodies being read below two
// bodies, one large body is read and the concurrent others wait, then get
// 503 with Retry-After; a body over the per-request limit is refused at once
// without being read; the bytes in use return to 0.
func TestBodyBudget(t *testing.T) {
	const numBodyBytes = 600_000
	s := startServer(t, newFakeEngine(t, script), func(c *Config) {
		c.MaxBodyBytes, c.MaxBodyBytesInflight = 1<<20, 1<<20 // room for one body of numBodyBytes
		c.BodyBudgetWait = 200 * time.Millisecond
		c.RequestReadTimeout = 10 * time.Second
	})
	body := `{"prompt":"Hello","max_tokens":1}` + strings.Repeat(" ", numBodyBytes-34)
	const numClients = 5
	conns := make([]net.Conn, numClients)
	for i := range conns {
		conns[i] = rawRequest(t, s, len(body), body[:1000])
	}
	type answer struct {
		i        int
		status   int
		retry    string
		body     string
		isClosed bool
		err      error
	}
	answers := make(chan answer, numClients)
	for i, conn := range conns {
		go func() {
			resp, b, isClosed, err := readAnswer(conn, 5*time.Second)
			a := answer{i: i, body: b, isClosed: isClosed, err: err}
			if resp != nil {
				a.status, a.retry = resp.StatusCode, resp.Header.Get("Retry-After")
			}
			answers <- a
		}()
	}
	// All but one are turned away while that one is still sending.
	for range numClients - 1 {
		a := <-answers
		if a.err != nil || a.status != http.StatusServiceUnavailable || a.retry != "1" ||
			!strings.Contains(a.body, `"server_busy"`) || !a.isClosed {
			t.Fatalf("client %d: %d Retry-After %q %v: %s", a.i, a.status, a.retry, a.err, a.body)
		}
		conns[a.i] = nil
	}
	if n := s.bodies.inUse(); n != int64(len(body)) {
		t.Errorf("%d bytes in use while one body is read, want %d", n, len(body))
	}
	for _, conn := range conns {
		if conn != nil {
			if _, err := io.WriteString(conn, body[1000:]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a := <-answers; a.err != nil || a.status != 200 {
		t.Fatalf("the admitted client: %d %v: %s", a.status, a.err, a.body)
	}
	if n := s.bodies.inUse(); n != 0 {
		t.Errorf("%d bytes in use after every body was read, want 0", n)
	}
	// Over the per-request limit: 413 without sending a byte of the body.
	resp, b, _, err := readAnswer(rawRequest(t, s, 2<<20, ""), 5*time.Second)
	if err != nil || resp == nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB body: %v %v %s", resp, err, b)
	}
	if n := s.bodies.inUse(); n != 0 {
		t.Errorf("%d bytes in use at the end, want 0", n)
	}
}

// TestByteBudget: reservations, a wait that ends when bytes are released,
// and one that gives up.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	ctx := context.Background()
	if !b.acquire(ctx, 60) || !b.acquire(ctx, 40) || b.inUse() != 100 {
		t.Fatalf("in use %d, want 100", b.inUse())
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if b.acquire(short, 1) {
		t.Fatal("acquired past the cap")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		b.release(60)
	}()
	long, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if !b.acquire(long, 50) || b.inUse() != 90 {
		t.Fatalf("in use %d after a wait, want 90", b.inUse())
	}
	b.release(50)
	b.release(40)
	if b.inUse() != 0 {
		t.Fatalf("in use %d, want 0", b.inUse())
	}
	if newByteBudget(0) != nil || newByteBudget(-1) != nil {
		t.Error("a cap of 0 or less is no budget")
	}
	if _, err := New(Config{MaxModelLen: 1, VocabSize: 1, Tokenizer: testTokenizer(t), MaxBodyBytes: 2 << 20,
		MaxBodyBytesInflight: 1 << 20}); err == nil {
		t.Error("a cap below the per-request limit was accepted")
	}
}
