package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"path"
	"strings"
)

// API key check (Config.APIKey), as vLLM's --api-key: a request to a
// protected route must carry "Authorization: Bearer <key>", or it gets 401
// with an OpenAI-style error and "WWW-Authenticate: Bearer". Protected are
// /v1 and everything under it, /start_profile, /stop_profile and
// /debug/pprof/ (its cmdline page would show a key given as a flag), plus
// /metrics with Config.MetricsAuth. /health stays open so that a load
// balancer or a launcher can wait for readiness without the key.

var (
	errMissingKey = &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "no API key provided: send it as the header Authorization: Bearer <key>"}
	errWrongKey = &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "incorrect API key provided"}
)

// requireAPIKey wraps next with the key check; with no key configured it is
// next itself (everything open).
func (s *Server) requireAPIKey(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	// Both sides are hashed before the compare so that it takes the same
	// time whatever the length of the key sent: subtle.ConstantTimeCompare
	// returns at once when lengths differ.
	want := sha256.Sum256([]byte(s.cfg.APIKey))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.isProtected(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, errMissingKey)
			return
		}
		got := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, errWrongKey)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isProtected reports whether a request to p needs the key. p is cleaned
// first, the way the mux cleans it before routing, so that "/x/../v1/models"
// cannot slip past as an unprotected path.
func (s *Server) isProtected(p string) bool {
	p = path.Clean("/" + p)
	switch {
	case p == "/v1" || strings.HasPrefix(p, "/v1/"):
		return true
	case p == "/start_profile" || p == "/stop_profile":
		return true
	case p == "/debug/pprof" || strings.HasPrefix(p, "/debug/pprof/"):
		return true
	case p == "/metrics":
		return s.cfg.MetricsAuth
	}
	return false
}

// bearerToken reads "Bearer <token>" (the scheme in any case, RFC 7235).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}
