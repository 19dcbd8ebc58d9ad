// Package server is roseinfer's OpenAI-compatible HTTP API over an engine:
// /v1/completions and /v1/chat/completions (JSON or SSE), /v1/models,
// /health, /metrics and /debug/pprof. It owns request validation,
// tokenization, incremental detokenization, stop strings and the wire format;
// the engine owns scheduling. It wraps net/http so callers never import it.
//
// The API it speaks, including its extensions and error statuses, is
// documented in docs/roseinfer-api.md.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roseinfer/roseinfer/engine/model/arch"
	"github.com/roseinfer/roseinfer/engine/tokenizer"
)

// Config is what a Server needs besides its engine. Zero values get the
// defaults noted.
type Config struct {
	Addr            string               // host:port; port 0 picks a free one (see URL)
	ModelName       string               // served model name; default "gpt2"
	MaxModelLen     int                  // context length in tokens; required
	VocabSize       int                  // token ids in prompts must be below it; required
	Tokenizer       *tokenizer.Tokenizer // required; its EOS is never decoded into text
	StreamInterval  int                  // tokens per streamed chunk after the first; default 1
	MaxBodyBytes    int64                // default 8 MiB
	ShutdownTimeout time.Duration
	EnablePprof     bool
	// APIKey, when set, is the key every /v1 route, /start_profile,
	// /stop_profile and /debug/pprof require as "Authorization: Bearer
	// <key>" (auth.go); /metrics too with MetricsAuth. Empty: all open.
	APIKey      string
	MetricsAuth bool
	// ChatFormat renders chat messages as the prompt: the model family's
	// (launch.Resolved.Family.Chat); default arch.PlainChat, the
	// role-prefixed format of families without a template. Its error is a
	// 400 on "messages".
	ChatFormat func(msgs []arch.ChatMessage, opts arch.ChatOptions) (string, error)
	// ProfileHandler, when set, serves POST /start_profile and POST
	// /stop_profile (engine/profile's Profiler.Handler).
	ProfileHandler http.Handler
	Logger         *slog.Logger // default slog.Default()
	// BaseSeed, when HasBaseSeed, makes requests without a "seed" draw
	// reproducibly: the n-th such request gets a seed derived from (BaseSeed,
	// n). Otherwise the engine picks a random seed for them.
	BaseSeed    uint64
	HasBaseSeed bool
	// Limits on receiving requests (limits.go). For the first two, 0 means
	// the default and < 0 none.
	RequestReadTimeout   time.Duration // headers + body of one request; default 30 s
	MaxBodyBytesInflight int64         // bytes of all bodies being read and parsed at once; default 64 MiB
	BodyBudgetWait       time.Duration // how long a body waits for room under it, then 503; default 1 s
}

// Defaults for Config.
const (
	DefaultModelName       = "gpt2"
	DefaultMaxBodyBytes    = 8 << 20
	DefaultShutdownTimeout = 5 * time.Second
)

// Server serves the API. Open starts it; SetEngine makes it ready.
type Server struct {
	cfg      Config
	engine   atomic.Pointer[Engine] // nil until SetEngine: answers 503
	metrics  *metrics
	started  time.Time
	idBase   string        // random per server, so ids from two runs never collide
	nextID   atomic.Uint64 // request counter appended to idBase
	nextSeed atomic.Uint64 // requests without a seed, for BaseSeed
	bodies   *byteBudget   // MaxBodyBytesInflight; nil = no cap

	ln      net.Listener
	http    *http.Server
	baseCtx context.Context // parent of every request context
	cancel  context.CancelFunc
	served  chan error
	closeMu sync.Once
}

// New validates cfg and builds a server that is not listening yet.
func New(cfg Config) (*Server, error) {
	if cfg.Tokenizer == nil || cfg.MaxModelLen < 1 || cfg.VocabSize < 1 {
		return nil, errors.New("server: Config needs Tokenizer, MaxModelLen and VocabSize")
	}
	if cfg.ModelName == "" {
		cfg.ModelName = DefaultModelName
	}
	if cfg.StreamInterval < 1 {
		cfg.StreamInterval = 1
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if err := cfg.setLimitDefaults(); err != nil {
		return nil, err
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.ChatFormat == nil {
		cfg.ChatFormat = arch.PlainChat
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var seed [6]byte
	_, _ = rand.Read(seed[:])
	s := &Server{cfg: cfg, started: time.Now(), idBase: hex.EncodeToString(seed[:])}
	s.metrics = newMetrics(s)
	s.bodies = newByteBudget(cfg.MaxBodyBytesInflight)
	return s, nil
}

// Open listens synchronously (a busy port fails here, not later) and serves
// in a goroutine.
func (s *Server) Open() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	readTimeout, readHeaderTimeout := s.cfg.readTimeouts()
	s.http = &http.Server{
		Handler:           s.routes(),
		ReadTimeout:       readTimeout,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       5 * time.Minute, // keep-alive connections of a benchmark client stay open between requests
		BaseContext:       func(net.Listener) context.Context { return s.baseCtx },
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
	}
	s.served = make(chan error, 1)
	go func() { s.served <- s.http.Serve(ln) }()
	return nil
}

// URL is the base URL, e.g. "http://127.0.0.1:8000", valid after Open.
func (s *Server) URL() string {
	addr := s.ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port))
}

// SetEngine makes the server ready: until then generation endpoints and
// /health answer 503.
func (s *Server) SetEngine(e Engine) { s.engine.Store(&e) }

func (s *Server) currentEngine() Engine {
	if p := s.engine.Load(); p != nil {
		return *p
	}
	return nil
}

// Close stops accepting connections and waits up to ShutdownTimeout for open
// requests to finish; then it cancels their contexts (their engine requests
// are aborted) and closes every connection. It is safe to call twice.
func (s *Server) Close() error {
	var err error
	s.closeMu.Do(func() {
		if s.http == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if err = s.http.Shutdown(ctx); err != nil {
			s.cancel()
			err = s.http.Close()
		}
		s.cancel()
		if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	})
	return err
}

// routes: the key is checked before a body's bytes are reserved, so
// requests without it never use up the body budget.
func (s *Server) routes() http.Handler {
	return s.recoverPanics(s.requireAPIKey(s.limitBodies(s.mux())))
}

// mux maps routes to handlers (the fuzz test calls it without recoverPanics,
// so that a panic fails the test).
func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	mux.HandleFunc("POST /v1/chat/completions", s.handleChatCompletions)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("POST /tokenize", s.handleTokenize) // and /detokenize: tokenize.go
	mux.HandleFunc("POST /detokenize", s.handleDetokenize)
	mux.Handle("GET /metrics", s.metrics.handler())
	if s.cfg.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if s.cfg.ProfileHandler != nil {
		mux.Handle("POST /start_profile", s.cfg.ProfileHandler)
		mux.Handle("POST /stop_profile", s.cfg.ProfileHandler)
	}
	mux.HandleFunc("/", s.handleNotFound)
	return mux
}

// recoverPanics is the last resort: validation is what keeps input from
// crashing the server, but a bug must cost one request, not the process.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.cfg.Logger.Error("handler panic", "path", r.URL.Path, "panic", v)
				s.metrics.panics.Inc()
				writeError(w, errInternal) // ignored by net/http if headers were already sent
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// handleNotFound answers unknown routes and wrong methods with JSON errors.
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics":
		writeError(w, errMethod)
		return
	}
	writeError(w, errNotFound)
}

// handleModels serves GET /v1/models: the one model this server runs.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root"`
		MaxModelLen int    `json:"max_model_len"`
	}
	writeJSON(w, http.StatusOK, struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{s.cfg.ModelName, "model", s.started.Unix(), "roseinfer", s.cfg.ModelName, s.cfg.MaxModelLen}}})
}

// handleHealth serves GET /health: 200 {"status":"ok"} once the engine is
// set, 503 {"status":"starting"} before.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.currentEngine() == nil {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfterSeconds))
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// newRequestID returns "<prefix>-<server hex><counter hex>": unique without a
// random read per request.
func (s *Server) newRequestID(prefix string) string {
	return fmt.Sprintf("%s-%s%016x", prefix, s.idBase, s.nextID.Add(1))
}
