// Package client is the harness's streaming OpenAI client: it sends one
// completion (or chat) request, reads the SSE stream and records, per chunk,
// when it arrived (monotonic clock, taken before parsing) and how many
// generated tokens it carried. It never retries: an error is a result.
//
// It imports results (for the raw record it fills) and nothing else of the
// project; metrics are computed from its records by harness/metrics.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
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
}

// Client sends streaming requests to one server.
type Client struct {
	opts      Options
	http      *http.Client
	transport *http.Transport
}

// New builds a Client with its own connection pool.
func New(opts Options) *Client {
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	if opts.MaxConcurrency < 1 {
		opts.MaxConcurrency = 1
	}
	t := &http.Transport{
		Proxy: nil, // a benchmark talks to the server directly
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:        0, // no global cap
		MaxIdleConnsPerHost: opts.MaxConcurrency,
		MaxConnsPerHost:     0, // a cap would queue requests inside the client, hidden in TTFT
		IdleConnTimeout:     90 * time.Second,
		// Go would otherwise ask for gzip and decompress transparently; a
		// gzip reader can hold back events and distort arrival times.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
	return &Client{opts: opts, transport: t, http: &http.Client{Transport: t}}
}

// Close drops idle connections.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

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

// Do sends one streaming request and reads it to the end. It always returns
// a Result; Result.Err says whether the request failed.
func (c *Client) Do(ctx context.Context, endpoint Endpoint, body []byte) *Result {
	res := &Result{Called: time.Now(), UsagePromptTokens: -1, UsageCompletionTokens: -1}
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	// WroteRequest runs on the transport's writer goroutine once the request
	// is flushed to the socket; a small body is a single write, so this is
	// the instant its first byte left (t_0).
	var sent atomic.Pointer[time.Time]
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		now := time.Now()
		sent.Store(&now)
	}}
	defer func() {
		if t := sent.Load(); t != nil {
			res.Sent = *t
		} else {
			res.Sent = res.Called // never written: the dial or write failed
		}
		if res.End.IsZero() {
			res.End = time.Now()
		}
	}()

	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace),
		http.MethodPost, c.opts.BaseURL+endpoint.Path(), bytes.NewReader(body))
	if err != nil {
		res.fail(ErrConnect, err)
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		res.fail(classify(ctx, err, false), err)
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		kind := ErrHTTP5xx
		if resp.StatusCode < 500 {
			kind = ErrHTTP4xx
		}
		res.fail(kind, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg)))
		return res
	}
	c.readStream(ctx, resp.Body, res)
	return res
}

// readStream consumes the SSE body into res.
func (c *Client) readStream(ctx context.Context, bodyReader io.Reader, res *Result) {
	sr := newSSEReader(bodyReader)
	defer sr.release()
	var counter tokenCounter
	sawDone := false
	for {
		ev, err := sr.next()
		if err != nil {
			res.End = time.Now()
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
	}
	counter.resolve(res, c.opts.CountTokens)
	if sawDone {
		// Read the chunked-encoding terminator so the connection is reused.
		io.CopyN(io.Discard, bodyReader, 4<<10)
	}
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
