package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/roseinfer/roseinfer/engine/server"
)

// Who may use what on `roseinfer serve`: the API key, /metrics behind it,
// /debug/pprof's default, and the directory /start_profile writes under.

// envAPIKey is the key's environment variable: it keeps the key out of the
// process's command line, which other local users can read.
const envAPIKey = "ROSEINFER_API_KEY"

// apiKey is --api-key when given, else $ROSEINFER_API_KEY; "" means no key.
// An empty flag falls back to the environment, so `--api-key "$UNSET"`
// cannot turn off a key set there.
func apiKey(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return flagValue
	}
	return getenv(envAPIKey)
}

// pprofEnabled decides whether /debug/pprof is served: --pprof or
// --pprof=false when given, else only when host is loopback, because pprof
// shows the command line and can keep a core busy for as long as a client
// asks.
func pprofEnabled(host string, isFlagGiven, flagValue bool) bool {
	if isFlagGiven {
		return flagValue
	}
	return server.IsLoopbackHost(host)
}

// openProfileDir makes the profile directory (--profile-dir; "" = a new
// temp dir) and returns its absolute path. The directory stays when the
// server stops, since the captures in it are the output, unless it was the
// temp dir and is still empty: then closeDir removes it.
func openProfileDir(dir string, log *slog.Logger) (path string, closeDir func(), err error) {
	isTemp := dir == ""
	if isTemp {
		dir, err = os.MkdirTemp("", "roseinfer-profiles-")
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		dir, err = filepath.Abs(dir)
	}
	if err != nil {
		return "", nil, fmt.Errorf("--profile-dir: %w", err)
	}
	log.Info("profile dir", "path", dir)
	closeDir = func() {
		if isTemp {
			_ = os.Remove(dir) // fails, and keeps it, when a capture wrote there
		}
	}
	return dir, closeDir, nil
}

// checkAccessFlags rejects settings that would not do what they say.
func checkAccessFlags(key string, metricsAuth bool) error {
	if metricsAuth && key == "" {
		return errors.New("--metrics-auth needs an API key (--api-key or " + envAPIKey + ")")
	}
	return nil
}
