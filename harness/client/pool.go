package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
// Options.MaxConcurrency, the most connections the idle pool keeps. Idle
// connections the server has closed meanwhile are dropped first.
//
// Each new connection carries one cheap request (GET /v1/models, which
// every OpenAI-compatible server answers without generating) before it
// goes idle, so the server treats it as an idle keep-alive connection
// (roseinfer keeps those 5 minutes) rather than one whose first request is
// late. The answer's status does not matter, only that the connection stays
// open; one the server closes is not kept.
func (c *Client) Prewarm(ctx context.Context, n int) (int, error) {
	n = min(n, c.opts.MaxConcurrency)
	if c.err != nil {
		return 0, fmt.Errorf("prewarm %d connections to %s: %w", n, c.opts.BaseURL, c.err)
	}
	need := n - c.pool.sweep()
	if need <= 0 {
		return 0, nil
	}
	before := c.NumDialled()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		errMu sync.Mutex
		first error
	)
	for range min(need, prewarmParallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(need) && ctx.Err() == nil {
				if err := c.prewarmOne(ctx); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	dialled := int(c.NumDialled() - before)
	if first != nil {
		return dialled, fmt.Errorf("prewarm %d connections to %s: %w", n, c.opts.BaseURL, first)
	}
	return dialled, nil
}

// prewarmParallel is how many connections Prewarm opens at once: enough to
// open thousands in well under a second, few enough to stay inside a
// server's accept backlog.
const prewarmParallel = 64

// prewarmOne dials one connection, sends GET /v1/models on it and, once
// the answer is read, leaves it idle in the pool.
func (c *Client) prewarmOne(ctx context.Context) error {
	cn, err := c.pool.dial(ctx)
	if err != nil {
		return err
	}
	stop := cn.watch(ctx)
	keep := false
	defer func() {
		if stop() && keep {
			c.pool.put(cn)
		} else {
			cn.close()
		}
	}()
	if _, err := cn.nc.Write(c.target.models); err != nil {
		return err
	}
	resp, err := http.ReadResponse(cn.br, nil)
	if err != nil {
		return err
	}
	// Read the whole answer so the connection can carry the next request.
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("answer longer than 1 MiB")
		}
		return fmt.Errorf("GET %s: %w", modelsPath, err)
	}
	keep = !resp.Close && cn.br.Buffered() == 0
	return nil
}
