package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// Connection accounting and prewarming. A replay that dials a connection at
// a scheduled send pays the dial (and, on 2 cores, the scheduling around
// it) as send lag; 2,000 streams opened within 2 s, each on a new
// connection, put the client tens of ms behind its schedule. Prewarm opens
// the connections before the round starts, and the counters let a caller
// (and a test) see that none was dialled after it.

// connCounter counts the TCP connections a client dialled and how many of
// them are still open.
type connCounter struct {
	dialled atomic.Int64
	open    atomic.Int64
}

// dialer wraps dial so every connection it makes is counted, and counted
// closed once.
func (cc *connCounter) dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc.dialled.Add(1)
		cc.open.Add(1)
		return &countedConn{Conn: conn, cc: cc}, nil
	}
}

type countedConn struct {
	net.Conn
	cc     *connCounter
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.cc.open.Add(-1)
	}
	return c.Conn.Close()
}

// NumDialled is how many connections the client has dialled since New,
// retries' fresh connections included.
func (c *Client) NumDialled() int64 { return c.conns.dialled.Load() }

// NumOpen is how many of the client's connections are open now, idle or in
// use (a connection the server closed counts until the client notices).
func (c *Client) NumOpen() int { return int(c.conns.open.Load()) }

// modelsPath is what a prewarm request asks for: every OpenAI-compatible
// server answers it, cheaply and without generating.
const modelsPath = "/v1/models"

// Prewarm makes sure at least n keep-alive connections are open, idle in the
// pool, before a replay, and returns how many it dialled. n is capped at
// Options.MaxConcurrency, the most connections the idle pool keeps.
//
// The transport has no call to open a connection, so Prewarm sends n cheap
// requests (GET /v1/models) at once and holds each on its connection until
// all n have one: no request can then reuse another's, so the pool ends
// with n distinct connections, reused ones first. Each is a complete
// request and response, so the server treats the connection as an idle
// keep-alive one (roseinfer keeps those 5 minutes) rather than one whose
// first request is late. The response's status does not matter, only that
// the connection stays open.
func (c *Client) Prewarm(ctx context.Context, n int) (int, error) {
	n = min(n, c.opts.MaxConcurrency)
	if n <= c.NumOpen() {
		return 0, nil
	}
	before := c.NumDialled()
	var (
		held    sync.WaitGroup // requests that have their connection (or failed)
		done    sync.WaitGroup
		release = make(chan struct{})
		errMu   sync.Mutex
		first   error
	)
	held.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			var once sync.Once
			arrived := func() { once.Do(held.Done) }
			defer arrived() // a request that failed before its connection
			if err := c.prewarmOne(ctx, arrived, release); err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
		}()
	}
	held.Wait()
	close(release)
	done.Wait()
	dialled := int(c.NumDialled() - before)
	if first != nil {
		return dialled, fmt.Errorf("prewarm %d connections to %s: %w", n, c.opts.BaseURL, first)
	}
	return dialled, nil
}

// prewarmOne sends one prewarm request; once it has its connection it calls
// arrived and waits for release (or ctx) before writing.
func (c *Client) prewarmOne(ctx context.Context, arrived func(), release <-chan struct{}) error {
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
		arrived()
		select {
		case <-release:
		case <-ctx.Done():
		}
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet,
		c.opts.BaseURL+modelsPath, nil)
	if err != nil {
		return err
	}
	if c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Read the whole body so the connection goes back to the pool.
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
