package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Limits on what reading requests may cost the server, beside the
// per-request body limit (Config.MaxBodyBytes):
//
//   - RequestReadTimeout bounds how long one request may take to arrive,
//     headers and body together (http.Server.ReadTimeout). Without it a
//     client trickling or stalling its body held a connection and a handler
//     for as long as it liked. The response is not bounded: a generation
//     may stream for minutes (net/http lifts the read deadline once the body
//     is read, so it does not cancel the request's context).
//   - MaxBodyBytesInflight bounds the bytes of all bodies being read and
//     parsed at once. Without it 20 concurrent 7.8 MB bodies took the
//     server's RSS from 82 to 592 MB before each was rejected. A body waits
//     up to BodyBudgetWait for room, then gets 503 with Retry-After.
//
// Both are documented in docs/roseinfer-api.md and docs/roseinfer-flags.md.

// Defaults for the limits in Config.
const (
	DefaultRequestReadTimeout   = 30 * time.Second
	DefaultMaxBodyBytesInflight = 64 << 20
	DefaultBodyBudgetWait       = time.Second
)

// maxHeaderTime is how long headers alone may take (the server's
// ReadHeaderTimeout), unless RequestReadTimeout is shorter.
const maxHeaderTime = 10 * time.Second

var (
	errBodyBudget = &Error{Status: http.StatusServiceUnavailable, Type: "service_unavailable_error",
		Code: "server_busy", Message: "too many request bodies are being read at once; retry later"}
	errReadTimeout = &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error",
		Code: "request_timeout", Message: "the request body did not arrive in time"}
)

func errBodyTooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
		Code: "request_too_large", Message: fmt.Sprintf("request body larger than %d bytes", limit)}
}

// setLimitDefaults fills in the limits' defaults (negative turns a limit off)
// and checks that any body the per-request limit allows fits the cap.
func (cfg *Config) setLimitDefaults() error {
	if cfg.RequestReadTimeout == 0 {
		cfg.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if cfg.MaxBodyBytesInflight == 0 {
		cfg.MaxBodyBytesInflight = DefaultMaxBodyBytesInflight
	}
	if cfg.BodyBudgetWait <= 0 {
		cfg.BodyBudgetWait = DefaultBodyBudgetWait
	}
	if cfg.MaxBodyBytesInflight > 0 && cfg.MaxBodyBytesInflight < cfg.MaxBodyBytes {
		return fmt.Errorf("server: MaxBodyBytesInflight (%d) is below MaxBodyBytes (%d): a body the per-request "+
			"limit allows could never be read", cfg.MaxBodyBytesInflight, cfg.MaxBodyBytes)
	}
	return nil
}

// readTimeouts are the http.Server's ReadTimeout and ReadHeaderTimeout (0 =
// none).
func (cfg *Config) readTimeouts() (whole, header time.Duration) {
	if cfg.RequestReadTimeout < 0 {
		return 0, maxHeaderTime
	}
	return cfg.RequestReadTimeout, min(maxHeaderTime, cfg.RequestReadTimeout)
}

// limitBodies admits a request's body only while the bytes of all bodies
// being read and parsed fit the server-wide cap. It reserves the body's
// Content-Length (or the per-request limit for a chunked body, which
// MaxBytesReader then enforces) before the handler reads a byte, and
// releases it when the handler calls doneReading or returns. A body over the
// per-request limit is refused at once (413), without reading it.
func (s *Server) limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		numBytes := r.ContentLength
		switch {
		case numBytes == 0 || r.Body == nil || r.Body == http.NoBody:
			next.ServeHTTP(w, r)
			return
		case numBytes > s.cfg.MaxBodyBytes:
			s.refuseUnread(w, errBodyTooLarge(s.cfg.MaxBodyBytes))
			return
		case numBytes < 0: // chunked: unknown length
			numBytes = s.cfg.MaxBodyBytes
		}
		// The handler gets a shallow copy with the wrapped body: net/http
		// inspects the original request's body after the handler returns.
		r = r.WithContext(r.Context())
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		if s.bodies == nil {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.BodyBudgetWait)
		admitted := s.bodies.acquire(ctx, numBytes)
		cancel()
		if !admitted {
			s.refuseUnread(w, errBodyBudget)
			return
		}
		body := &budgetedBody{ReadCloser: r.Body, release: sync.OnceFunc(func() { s.bodies.release(numBytes) })}
		defer body.release()
		r.Body = body
		next.ServeHTTP(w, r)
	})
}

// refuseUnread answers a request whose body was not read and closes the
// connection: otherwise net/http reads up to 256 KiB of the body first, to
// keep the connection, and a stalled client would hold the answer until the
// read deadline.
func (s *Server) refuseUnread(w http.ResponseWriter, e *Error) {
	w.Header().Set("Connection", "close")
	s.fail(w, e)
}

// budgetedBody is a body holding a reservation in the budget. release is
// idempotent.
type budgetedBody struct {
	io.ReadCloser
	release func()
}

// doneReading gives back a request's reservation once its handler has
// turned the body into a plan. Until then the bytes are live several times
// over (the decoder's buffer, the raw prompt, its text), which is why the
// reservation outlasts the read; after it a generation may run for minutes,
// and no longer holds them. Other handlers give it back when they return.
func doneReading(r *http.Request) {
	if b, ok := r.Body.(*budgetedBody); ok {
		b.release()
	}
}

// byteBudget is a counting semaphore over bytes. golang.org/x/sync's
// semaphore.Weighted would do, but it is only an indirect dependency here
// and does not tell how many bytes are in use, which the slow-client test
// checks returns to 0. It is not FIFO: every release wakes every waiter, and
// a large body may lose to smaller ones for as long as its wait lasts; then
// it gets 503, which is what the cap is for.
type byteBudget struct {
	mu            sync.Mutex
	numBytes      int64         // the cap
	numBytesInUse int64         // reserved by bodies being read and parsed
	released      chan struct{} // closed, and replaced, whenever bytes are released
}

func newByteBudget(numBytes int64) *byteBudget {
	if numBytes <= 0 {
		return nil // no cap
	}
	return &byteBudget{numBytes: numBytes, released: make(chan struct{})}
}

// acquire reserves n bytes, waiting until they fit or ctx ends.
func (b *byteBudget) acquire(ctx context.Context, n int64) bool {
	for {
		b.mu.Lock()
		if n <= b.numBytes-b.numBytesInUse { // not inUse+n: n is a client's Content-Length
			b.numBytesInUse += n
			b.mu.Unlock()
			return true
		}
		released := b.released
		b.mu.Unlock()
		select {
		case <-released:
		case <-ctx.Done():
			return false
		}
	}
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.numBytesInUse -= n
	if b.numBytesInUse < 0 {
		panic("server: byteBudget released more than it reserved")
	}
	close(b.released)
	b.released = make(chan struct{})
}

// inUse is the number of bytes reserved now.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.numBytesInUse
}

// isTimeout reports whether a body read failed on the read deadline.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
