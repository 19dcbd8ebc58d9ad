package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The client's own HTTP/1.1 connections. net/http's transport writes a
// request on the connection's writer goroutine and reads the answer on its
// reader goroutine, two hand-offs between the caller and the socket; with
// 2,000 streams on 2 cores those goroutines wait in run queues behind the
// stream readers, and sends ran up to 6 ms late. Here the goroutine that
// decides to send writes the request itself, on a connection it takes from
// an idle list, and the goroutine that reads the answer is the one that
// parses it. net/http still parses the answer (http.ReadResponse: status,
// headers, chunked decoding).

// idleTimeout is how long an idle connection is kept (net/http's
// IdleConnTimeout was 90 s as well); an older one is closed when met.
const idleTimeout = 90 * time.Second

// connReadBuffer is the read buffer of a connection, net/http's default:
// the stream reader's own 64 KiB buffer reads past it for long answers.
const connReadBuffer = 4 << 10

// conn is one keep-alive connection to the server.
type conn struct {
	nc        net.Conn        // what requests are written to and answers read from (TLS or TCP)
	plain     *net.TCPConn    // nc when it is plain TCP (requests go out with writev); else nil
	raw       syscall.RawConn // the TCP socket under nc, for the liveness peek; nil if none
	br        *bufio.Reader
	cc        *connCounter
	closed    atomic.Bool
	idleSince time.Time
}

// close closes the connection, counting it closed once.
func (cn *conn) close() {
	if cn.closed.CompareAndSwap(false, true) {
		cn.cc.open.Add(-1)
		cn.nc.Close()
	}
}

// aLongTimeAgo is a deadline that has passed: setting it wakes a blocked
// read or write with an error (net/http does the same on cancellation).
var aLongTimeAgo = time.Unix(1, 0)

// watch makes ctx's end abort a read or write blocked on cn. stop ends the
// watch; it returns false when ctx already ended, and cn must then be
// closed (its deadline is spent).
func (cn *conn) watch(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { cn.nc.SetDeadline(aLongTimeAgo) })
}

// write sends head and body in one system call: a TCP connection writes
// them together (writev), a TLS one as one buffer.
func (cn *conn) write(head, body []byte) error {
	if cn.plain != nil {
		bufs := net.Buffers{head, body}
		_, err := bufs.WriteTo(cn.plain)
		return err
	}
	_, err := cn.nc.Write(append(head[:len(head):len(head)], body...))
	return err
}

// target is where a client's requests go: how to dial it and the request
// heads, rendered once.
type target struct {
	network, addr string
	tls           *tls.Config // nil: plain HTTP
	// heads[e] is the request head for endpoint e up to the value of
	// Content-Length; models is the whole head of GET /v1/models.
	heads  [2][]byte
	models []byte
	urls   [2]string // for error messages
}

// userAgent is what net/http sent; servers and their logs see no change.
const userAgent = "Go-http-client/1.1"

// newTarget parses baseURL and renders the request heads.
func newTarget(baseURL, apiKey string) (*target, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL %q: %w", baseURL, err)
	}
	t := &target{network: "tcp"}
	port := u.Port()
	switch u.Scheme {
	case "http":
		port = orDefault(port, "80")
	case "https":
		port = orDefault(port, "443")
		t.tls = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	default:
		return nil, fmt.Errorf("base URL %q: unsupported protocol scheme %q", baseURL, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("base URL %q: no host", baseURL)
	}
	if strings.ContainsAny(apiKey, "\r\n\x00") {
		return nil, fmt.Errorf("API key: invalid character in a header value")
	}
	t.addr = net.JoinHostPort(u.Hostname(), port)
	common := "Host: " + u.Host + "\r\nUser-Agent: " + userAgent + "\r\n"
	if apiKey != "" {
		common += "Authorization: Bearer " + apiKey + "\r\n"
	}
	for _, e := range []Endpoint{Completions, ChatCompletions} {
		ref, err := url.Parse(baseURL + e.Path())
		if err != nil {
			return nil, fmt.Errorf("base URL %q: %w", baseURL, err)
		}
		// No Accept-Encoding: never ask for gzip, whose reader can hold
		// back events and distort arrival times.
		t.heads[e] = []byte("POST " + ref.RequestURI() + " HTTP/1.1\r\n" + common +
			"Content-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: ")
		t.urls[e] = baseURL + e.Path()
	}
	ref, err := url.Parse(baseURL + modelsPath)
	if err != nil {
		return nil, fmt.Errorf("base URL %q: %w", baseURL, err)
	}
	t.models = []byte("GET " + ref.RequestURI() + " HTTP/1.1\r\n" + common + "\r\n")
	return t, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// head is the request head for a body of n bytes to e, appended to dst.
func (t *target) head(dst []byte, e Endpoint, n int) []byte {
	dst = append(dst, t.heads[e.index()]...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, "\r\n\r\n"...)
}

// index is e's slot in target's tables (an unknown endpoint is Completions,
// as Path says).
func (e Endpoint) index() int {
	if e == ChatCompletions {
		return 1
	}
	return 0
}

// connPool holds a client's idle connections, most recently used on top:
// a request takes the warmest one, and those left at the bottom age out.
type connPool struct {
	t       *target
	cc      *connCounter
	dialer  net.Dialer
	maxIdle int
	mu      sync.Mutex
	idle    []*conn
}

// get returns an idle connection that still looks open, or nil when there
// is none. It never dials.
func (p *connPool) get() *conn {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return nil
		}
		cn := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if time.Since(cn.idleSince) < idleTimeout && cn.alive() {
			return cn
		}
		cn.close()
	}
}

// put makes cn idle, or closes it when the pool is full.
func (p *connPool) put(cn *conn) {
	cn.idleSince = time.Now()
	p.mu.Lock()
	if len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, cn)
		cn = nil
	}
	p.mu.Unlock()
	if cn != nil {
		cn.close()
	}
}

// sweep closes the idle connections that are expired or found closed and
// returns how many are left.
func (p *connPool) sweep() int {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	kept := idle[:0]
	for _, cn := range idle {
		if time.Since(cn.idleSince) < idleTimeout && cn.alive() {
			kept = append(kept, cn)
		} else {
			cn.close()
		}
	}
	clear(idle[len(kept):])
	p.mu.Lock()
	// Connections put back meanwhile go on top, as the most recent.
	p.idle = append(kept, p.idle...)
	n := len(p.idle)
	p.mu.Unlock()
	return n
}

// closeIdle closes every idle connection.
func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}

// dial opens a new connection (and its TLS session), counted.
func (p *connPool) dial(ctx context.Context) (*conn, error) {
	nc, err := p.dialer.DialContext(ctx, p.t.network, p.t.addr)
	if err != nil {
		return nil, err
	}
	cn := &conn{nc: nc, cc: p.cc}
	if tcp, ok := nc.(*net.TCPConn); ok {
		cn.plain = tcp
		if raw, err := tcp.SyscallConn(); err == nil {
			cn.raw = raw
		}
	}
	p.cc.dialled.Add(1)
	p.cc.open.Add(1)
	if p.t.tls != nil {
		tc := tls.Client(nc, p.t.tls)
		cn.nc, cn.plain = tc, nil
		if err := tc.HandshakeContext(ctx); err != nil {
			cn.close()
			return nil, err
		}
	}
	cn.br = bufio.NewReaderSize(cn.nc, connReadBuffer)
	return cn, nil
}
