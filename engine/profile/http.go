package profile

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// Routes served by Handler.
const (
	StartPath = "/start_profile"
	StopPath  = "/stop_profile"
)

// maxBodyBytes bounds a start request's body.
const maxBodyBytes = 1 << 20

// Handler serves POST /start_profile and POST /stop_profile, the original
// server's endpoints (G.2): 200 {"status":"ok"} (stop adds the files it
// wrote), 400 {"detail": message} on any error, as the original.
func (p *Profiler) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "use POST"})
			return
		}
		switch r.URL.Path {
		case StartPath:
			p.handleStart(w, r)
		case StopPath:
			p.handleStop(w)
		default:
			writeJSON(w, http.StatusNotFound, map[string]string{"detail": "not found"})
		}
	})
}

// handleStart serves POST /start_profile. An empty body means the torch
// tool, which then needs output_dir, so in practice a body is required.
func (p *Profiler) handleStart(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err == nil && len(data) > maxBodyBytes {
		err = errors.New("body too large")
	}
	if err == nil && strings.TrimSpace(string(data)) != "" {
		err = json.Unmarshal(data, &req)
	}
	if err == nil {
		err = p.Start(req)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"detail": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleStop serves POST /stop_profile.
func (p *Profiler) handleStop(w http.ResponseWriter) {
	res, err := p.Stop()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"detail": err.Error(), "result": res})
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
		*Result
	}{"ok", res})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
