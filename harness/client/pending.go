package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Pending is a request Start has sent, or left for Finish to send when no
// idle connection was open. Finish must be called exactly once.
type Pending struct {
	c        *Client
	ctx      context.Context
	cancel   context.CancelFunc // the per-request Timeout's; nil without one
	endpoint Endpoint
	body     []byte
	res      *Result
	headBuf  [256]byte // room for the usual request head, so rendering it does not allocate

	// The attempt in progress: its connection (nil once released), the
	// watch that aborts it when ctx ends, what is known of it, and its
	// failure.
	cn    *conn
	stop  func() bool
	att   attempt
	err   error
	wrote bool // some attempt's request left: res.Sent is set
}

// Start sends one streaming request and returns at once, before any
// answer: the request is written on the calling goroutine, so a replay's
// dispatcher sends at its scheduled instant without waking another
// goroutine, and Result.Sent (t_0) is taken as the write returns. It takes
// an idle keep-alive connection; when there is none, the dial and the
// write are left to Finish, so a dial never holds up the caller's later
// sends. Finish reads the answer (on any goroutine).
func (c *Client) Start(ctx context.Context, endpoint Endpoint, body []byte) *Pending {
	p := &Pending{c: c, ctx: ctx, endpoint: endpoint, body: body, res: &Result{Called: time.Now(),
		UsagePromptTokens: -1, UsageCompletionTokens: -1, UsageCachedTokens: -1}}
	if c.opts.Timeout > 0 {
		p.ctx, p.cancel = context.WithTimeout(ctx, c.opts.Timeout)
	}
	switch {
	case c.err != nil:
		p.err = c.err
	case p.ctx.Err() != nil:
		p.err = p.ctx.Err()
	default:
		if cn := c.pool.get(); cn != nil {
			p.send(cn, true)
		}
	}
	return p
}

// send writes the request on cn (reused: it came from the idle pool).
func (p *Pending) send(cn *conn, reused bool) {
	p.cn, p.stop = cn, cn.watch(p.ctx)
	p.att.reused.Store(reused)
	p.att.gotFirstByte.Store(false)
	head := p.c.target.head(p.headBuf[:0], p.endpoint, len(p.body))
	if err := cn.write(head, p.body); err != nil {
		p.err = p.wrap(err)
		p.release(false)
		return
	}
	if !p.wrote {
		// t_0: the first attempt's write; a retried request is timed from it.
		p.res.Sent, p.wrote = time.Now(), true
	}
}

// dialAndSend sends on a newly dialled connection.
func (p *Pending) dialAndSend() {
	cn, err := p.c.pool.dial(p.ctx)
	if err != nil {
		p.err = p.wrap(err)
		return
	}
	p.send(cn, false)
}

func (p *Pending) wrap(err error) error {
	return fmt.Errorf("Post %q: %w", p.c.target.urls[p.endpoint.index()], err)
}

// release ends the attempt's hold on its connection: back to the idle pool
// when its answer was read to a clean end and the server keeps it open,
// closed otherwise.
func (p *Pending) release(keep bool) {
	cn := p.cn
	if cn == nil {
		return
	}
	p.cn = nil
	aborted := !p.stop()
	if keep && !aborted && cn.br.Buffered() == 0 {
		p.c.pool.put(cn)
		return
	}
	cn.close()
}

// Finish reads the answer to the end and returns the result; Result.Err
// says whether the request failed. A request whose first attempt cannot
// have reached the server (retryable) is sent once more on a new
// connection; Result.Retries counts it, and Result.Sent stays the first
// attempt's send time (the call time if that attempt wrote nothing).
func (p *Pending) Finish() *Result {
	res := p.res
	defer func() {
		if p.cancel != nil {
			p.cancel()
		}
		if !p.wrote {
			res.Sent = res.Called // never written: the dial or write failed
		}
		if res.End.IsZero() {
			res.End = time.Now()
		}
	}()
	if p.err == nil && p.cn == nil {
		p.dialAndSend() // no idle connection at Start
	}
	var resp *http.Response
	if p.err == nil {
		resp, p.err = p.readHead()
	}
	if p.err != nil {
		p.release(false)
	}
	if p.err != nil && !p.c.noRetry && p.att.retryable(p.err) && p.ctx.Err() == nil {
		// The first attempt's bytes went to a connection the server had
		// already closed: it never read them. The new connection's dial
		// counts in TTFT, as t_0 stays the first attempt's.
		if !p.wrote {
			res.Sent, p.wrote = res.Called, true
		}
		res.Retries++
		p.err = nil
		p.dialAndSend()
		if p.err == nil {
			resp, p.err = p.readHead()
		}
	}
	if p.err != nil {
		p.release(false)
		res.fail(classify(p.ctx, p.err, false), p.err)
		return res
	}
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		// A 101 has no body to end: its connection is never reused.
		p.release(resp.StatusCode >= 200 && !resp.Close && drained(resp.Body))
		kind := ErrHTTP5xx
		if resp.StatusCode < 500 {
			kind = ErrHTTP4xx
		}
		res.fail(kind, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg)))
		return res
	}
	clean := p.c.readStream(p.ctx, resp.Body, res)
	p.release(clean && !resp.Close)
	return res
}

// readHead reads the response status and headers on the attempt's
// connection. Informational (1xx) answers are skipped.
func (p *Pending) readHead() (*http.Response, error) {
	br := p.cn.br
	if _, err := br.Peek(1); err != nil {
		return nil, p.wrap(err)
	}
	p.att.gotFirstByte.Store(true)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return nil, p.wrap(err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// drained reads what is left of body (a few KiB at most) and reports
// whether it ended cleanly there, so its connection can carry another
// request.
func drained(body io.Reader) bool {
	_, err := io.CopyN(io.Discard, body, 4<<10)
	return errors.Is(err, io.EOF)
}
