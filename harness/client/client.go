// Package client is the harness's streaming OpenAI client: it sends one
// completion (or chat) request, reads the SSE stream and records, per chunk,
// when it arrived (monotonic clock, taken before parsing) and how many
// generated tokens it carried. An error is a result; the one exception is a
// request that never reached the server (a pooled connection the server had
// just closed), sent once more on a new connection and counted (retryable).
//
// Requests go over the client's own HTTP/1.1 keep-alive connections
// (conn.go), not net/http's transport: Start writes a request on the
// calling goroutine, so a replay's dispatcher sends at its scheduled instant
// without handing the request to another goroutine, and Finish reads the
// answer. net/http still parses the answers.
//
// It imports results (for the raw record it fills) and nothing else of the
// project; metrics are computed from its records by harness/metrics.
package client

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure a Client. One Client serves one target server.
type Options struct {
	// BaseURL is the server root, e.g. http://127.0.0.1:8000 (no /v1).
	BaseURL string
	// MaxConcurrency is the most requests expected in flight at once; the
	// idle pool keeps that many connections so none is re-dialled.
	MaxConcurrency int
	// Timeout bounds one request from send to the end of its stream
	// (0 = none). It is a per-request context deadline, never
	// http.Client.Timeout, which would also cut long streams.
	Timeout time.Duration
	// APIKey is sent as a bearer token when set.
	APIKey string
	// CountTokens, when set, counts the tokens of a chunk's text. It is used
	// only when a server gives neither token ids nor usage per chunk.
	CountTokens func(text string) int
	// KeepTokenIDs keeps the generated token ids each chunk lists
	// (Result.TokenIDs): a session replay builds the next turn's prompt from
	// them. Off, the ids are only counted.
	KeepTokenIDs bool
}

// Client sends streaming requests to one server.
type Client struct {
	opts   Options
	target *target
	err    error // a bad BaseURL or APIKey: every request fails with it
	pool   connPool
	// noRetry turns the retry off (tests show what the old client lost).
	noRetry bool
	conns   connCounter // the pool's connections (pool.go)
}

// New builds a Client with its own connection pool. It talks to the
// server directly (no proxy) over HTTP/1.1 (TLS for an https BaseURL).
func New(opts Options) *Client {
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	if opts.MaxConcurrency < 1 {
		opts.MaxConcurrency = 1
	}
	c := &Client{opts: opts}
	c.target, c.err = newTarget(opts.BaseURL, opts.APIKey)
	c.pool = connPool{t: c.target, cc: &c.conns, maxIdle: opts.MaxConcurrency,
		dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
	return c
}

// Close closes the idle connections; the client stays usable.
func (c *Client) Close() { c.pool.closeIdle() }

// BaseURL is the server root this client targets.
func (c *Client) BaseURL() string { return c.opts.BaseURL }

// Error kinds recorded in results.Request.ErrorKind.
const (
	ErrHTTP4xx      = "http_4xx"
	ErrHTTP5xx      = "http_5xx"
	ErrConnect      = "connect"       // dial failed: server down or not listening
	ErrTimeout      = "timeout"       // the per-request deadline passed
	ErrStreamBroken = "stream_broken" // connection lost or stream ended without [DONE]
	ErrServer       = "server_error"  // the server reported an error in the stream
	ErrBadStream    = "bad_stream"    // a chunk was not valid JSON
	ErrCanceled     = "canceled"      // the run was interrupted
)

// Do sends one streaming request and reads it to the end: Start, then
// Finish on the same goroutine. It always returns a Result; Result.Err says
// whether the request failed.
func (c *Client) Do(ctx context.Context, endpoint Endpoint, body []byte) *Result {
	return c.Start(ctx, endpoint, body).Finish()
}

// attempt is what is known of one send: whether it went out on a pooled
// keep-alive connection and whether any response byte came back.
type attempt struct {
	reused       atomic.Bool
	gotFirstByte atomic.Bool
}

// retryable reports whether a failed attempt cannot have reached the server:
// it went out on a reused keep-alive connection, not one byte of a response
// came back, and the connection was found closed (EOF, reset or broken
// pipe; net/http's "server closed idle connection" is the same case). That is the race of a server
// closing an idle connection just as the client picks it from the pool: the
// server closes only connections with no request in flight, so it never read
// this one. A fresh connection, a dial error, a timeout or anything after
// the first response byte is never retried: the server may have seen it.
func (a *attempt) retryable(err error) bool {
	if !a.reused.Load() || a.gotFirstByte.Load() {
		return false
	}
	return strings.Contains(err.Error(), "http: server closed idle connection") ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readStream consumes the SSE body into res. It reports whether the body
// was read to its clean end, so its connection can carry another request.
func (c *Client) readStream(ctx context.Context, bodyReader io.Reader, res *Result) (clean bool) {
	sr := newSSEReader(bodyReader)
	defer sr.release()
	var counter tokenCounter
	sawDone := false
	for {
		ev, err := sr.next()
		if err != nil {
			res.End = time.Now()
			clean = errors.Is(err, io.EOF)
			switch {
			case errors.Is(err, io.EOF) && res.FinishReason != "":
				// Closed after a finish_reason but without [DONE]: complete.
			case errors.Is(err, io.EOF):
				res.fail(ErrStreamBroken, errors.New("stream ended without [DONE] or finish_reason"))
			default:
				res.fail(classify(ctx, err, true), err)
			}
			break
		}
		if ev.done {
			res.End = ev.at
			sawDone = true
			break
		}
		ck, err := parseChunk(ev.data)
		if err != nil {
			res.End = ev.at
			res.fail(ErrBadStream, err)
			break
		}
		if ck.errMsg != "" {
			res.End = ev.at
			res.fail(ErrServer, errors.New(ck.errMsg))
			break
		}
		counter.add(res, ck, ev.at)
		if c.opts.KeepTokenIDs && ck.tokenIDs > 0 {
			res.TokenIDs = appendTokenIDs(res.TokenIDs, ev.data)
		}
	}
	counter.resolve(res, c.opts.CountTokens)
	if sawDone {
		// Read the chunked-encoding terminator so the connection is reused.
		clean = drained(bodyReader)
	}
	return clean
}

// classify maps a transport error to an error kind. inStream is true once
// the response headers arrived.
func classify(ctx context.Context, err error, inStream bool) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ErrTimeout
	case errors.Is(ctx.Err(), context.Canceled):
		return ErrCanceled
	}
	if inStream {
		return ErrStreamBroken
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return ErrConnect
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return ErrConnect
	}
	return ErrStreamBroken
}
