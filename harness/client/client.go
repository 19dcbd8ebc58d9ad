// Package client is the harness's streaming OpenAI client: it sends one
// completion (or chat) request, reads the SSE stream and records, per chunk,
// when it arrived (monotonic clock, taken before parsing) and how many
// generated tokens it carried. An error is a result; the one exception is a
// request that never reached the server (a pooled connection the server had
// just closed), sent once more on a new connection and counted (retryable).
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
	// KeepTokenIDs keeps the generated token ids each chunk lists
	// (Result.TokenIDs): a session replay builds the next turn's prompt from
	// them. Off, the ids are only counted.
	KeepTokenIDs bool
}

// Client sends streaming requests to one server.
type Client struct {
	opts      Options
	http      *http.Client
	transport *http.Transport
	// fresh sends retries: keep-alives off, so every request dials a new
	// connection rather than taking another pooled one that may be as stale.
	fresh *http.Client
	// noRetry turns the retry off (tests show what the old client lost).
	noRetry bool
	conns   connCounter // both pools' connections (pool.go)
}

// New builds a Client with its own connection pool.
func New(opts Options) *Client {
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	if opts.MaxConcurrency < 1 {
		opts.MaxConcurrency = 1
	}
	c := &Client{opts: opts}
	t := &http.Transport{
		Proxy: nil, // a benchmark talks to the server directly
		DialContext: c.conns.dialer((&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext),
		MaxIdleConns:        0, // no global cap
		MaxIdleConnsPerHost: opts.MaxConcurrency,
		MaxConnsPerHost:     0, // a cap would queue requests inside the client, hidden in TTFT
		IdleConnTimeout:     90 * time.Second,
		// Go would otherwise ask for gzip and decompress transparently; a
		// gzip reader can hold back events and distort arrival times.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
	f := t.Clone()
	f.DisableKeepAlives = true
	c.transport, c.http, c.fresh = t, &http.Client{Transport: t}, &http.Client{Transport: f}
	return c
}

// Close drops idle connections.
func (c *Client) Close() {
	c.transport.CloseIdleConnections()
	c.fresh.CloseIdleConnections()
}

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
// a Result; Result.Err says whether the request failed. A request that
// failed before any of it could have reached the server (retryable) is sent
// once more on a new connection; Result.Retries counts it, and Result.Sent
// stays the first attempt's send time.
func (c *Client) Do(ctx context.Context, endpoint Endpoint, body []byte) *Result {
	res := &Result{Called: time.Now(), UsagePromptTokens: -1, UsageCompletionTokens: -1, UsageCachedTokens: -1}
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	// WroteRequest runs on the transport's writer goroutine once the request
	// is flushed to the socket; a small body is a single write, so this is
	// the instant its first byte left (t_0). Only the first attempt's write
	// counts: a retried request is timed from its first send.
	var sent atomic.Pointer[time.Time]
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

	resp, att, err := c.send(ctx, endpoint, body, c.http, &sent)
	if err != nil && !c.noRetry && att.retryable(err) && ctx.Err() == nil {
		// The first attempt's bytes went to a connection the server had
		// already closed: it never read them. t_0 stays the first attempt's
		// (Called when it wrote nothing), so the reconnect counts in TTFT.
		called := res.Called
		sent.CompareAndSwap(nil, &called)
		res.Retries++
		resp, _, err = c.send(ctx, endpoint, body, c.fresh, &sent)
	}
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

// attempt is what the transport told about one send: whether it used a
// pooled keep-alive connection and whether any response byte came back.
type attempt struct {
	reused       atomic.Bool
	gotFirstByte atomic.Bool
}

// send makes one attempt through hc, recording its first write in sent
// (unless an earlier attempt did).
func (c *Client) send(ctx context.Context, endpoint Endpoint, body []byte, hc *http.Client,
	sent *atomic.Pointer[time.Time]) (*http.Response, *attempt, error) {
	att := &attempt{}
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { att.reused.Store(info.Reused) },
		WroteRequest: func(httptrace.WroteRequestInfo) {
			now := time.Now()
			sent.CompareAndSwap(nil, &now)
		},
		GotFirstResponseByte: func() { att.gotFirstByte.Store(true) },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace),
		http.MethodPost, c.opts.BaseURL+endpoint.Path(), bytes.NewReader(body))
	if err != nil {
		return nil, att, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := hc.Do(req)
	return resp, att, err
}

// retryable reports whether a failed attempt cannot have reached the server:
// it went out on a reused keep-alive connection, not one byte of a response
// came back, and the connection was found closed (Go's "server closed idle
// connection", EOF, reset or broken pipe). That is the race of a server
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
		if c.opts.KeepTokenIDs && ck.tokenIDs > 0 {
			res.TokenIDs = appendTokenIDs(res.TokenIDs, ev.data)
		}
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
