package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/launch"
	"github.com/roseinfer/roseinfer/engine/profile"
	"github.com/roseinfer/roseinfer/engine/server"
)

// serveOptions are the flags of `roseinfer serve`.
type serveOptions struct {
	engineOptions
	host           string
	port           int
	modelName      string
	streamInterval int
	seed           int64
	hasSeed        bool
	pprof          bool
	pprofGiven     bool // --pprof or --pprof=false on the command line
	logLevel       string
	apiKey         string
	metricsAuth    bool
	profileDir     string

	// Limits on reading requests (engine/server/limits.go); 0 = none.
	requestReadTimeout   time.Duration
	maxBodyBytesInflight int64

	// ready, when set, is called with the server's URL once it listens
	// (tests use it with --port 0).
	ready func(url string)
}

func newServeCommand() *cobra.Command {
	o := serveOptions{engineOptions: defaultEngineOptions(), host: "127.0.0.1", port: 8000,
		streamInterval: 1, logLevel: "info",
		requestReadTimeout: server.DefaultRequestReadTimeout, maxBodyBytesInflight: server.DefaultMaxBodyBytesInflight}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the OpenAI-compatible API (/v1/completions, /v1/chat/completions, /metrics...)",
		Long: `serve loads a GPT-2 or Qwen3 model and answers the OpenAI completions and chat APIs,
streaming or not, until SIGINT or SIGTERM (open requests get a few seconds to finish).
/health answers 503 while the model loads and 200 once requests are accepted.

  roseinfer serve                                        # built-in tiny model on the CPU
  roseinfer serve --model ./gpt2 --port 9000 --max-num-seqs 64
  roseinfer serve --device sim --sim-step-us 2000        # fixed-delay device: harness ground truth
  curl -N localhost:8000/v1/completions -d '{"prompt":"Hello","max_tokens":16,"stream":true}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.hasSeed = cmd.Flags().Changed("seed")
			o.pprofGiven = cmd.Flags().Changed("pprof")
			return runServe(cmd.Context(), o, cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.addFlags(fs)
	fs.StringVar(&o.host, "host", o.host, "address to listen on")
	fs.IntVar(&o.port, "port", o.port, "port to listen on (0 = any free port, printed at start)")
	fs.StringVar(&o.modelName, "served-model-name", o.modelName, "model name clients must send (or omit), listed by /v1/models (default: --model as given, or "+
		server.DefaultModelName+" for the built-in model)")
	fs.IntVar(&o.streamInterval, "stream-interval", o.streamInterval, "streamed chunks carry at least this many tokens after the first")
	fs.Int64Var(&o.seed, "seed", o.seed, "base seed for requests without a \"seed\" (default: random per request)")
	fs.BoolVar(&o.pprof, "pprof", o.pprof, "serve /debug/pprof/ (default: only when --host is loopback; --pprof=false: never)")
	fs.StringVar(&o.apiKey, "api-key", o.apiKey, "require \"Authorization: Bearer KEY\" on /v1/*, /start_profile, /stop_profile and /debug/pprof (default $"+envAPIKey+"; empty: no key)")
	fs.BoolVar(&o.metricsAuth, "metrics-auth", o.metricsAuth, "require the API key on /metrics too")
	fs.StringVar(&o.profileDir, "profile-dir", o.profileDir, "/start_profile writes only inside this directory (default: a new temp dir, logged at start)")
	fs.StringVar(&o.logLevel, "log-level", o.logLevel, "debug, info, warn or error")
	fs.DurationVar(&o.requestReadTimeout, "request-read-timeout", o.requestReadTimeout,
		"a request's headers and body must arrive within this (else 408); 0 = no limit")
	fs.Int64Var(&o.maxBodyBytesInflight, "max-body-bytes-inflight", o.maxBodyBytesInflight,
		"bytes of request bodies read at once, all connections together (excess waits 1 s, then 503); 0 = no cap")
	return cmd
}

// runServe opens the server first (503 while loading), then loads the model
// and starts the engine, and serves until ctx ends.
func runServe(ctx context.Context, o serveOptions, logOut io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if o.streamInterval < 1 {
		return fmt.Errorf("--stream-interval must be at least 1, got %d", o.streamInterval)
	}
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("--port must be in [0, 65535], got %d", o.port)
	}
	key := apiKey(o.apiKey, os.Getenv)
	if err := checkAccessFlags(key, o.metricsAuth); err != nil {
		return err
	}
	if o.maxBodyBytesInflight > 0 && o.maxBodyBytesInflight < server.DefaultMaxBodyBytes {
		return fmt.Errorf("--max-body-bytes-inflight must be 0 (no cap) or at least the per-request body limit "+
			"(%d), got %d", server.DefaultMaxBodyBytes, o.maxBodyBytesInflight)
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	// The engine reports its phases to the profiler's recorder (trace.json
	// of /start_profile), which also asks the device for its GPU spans; the
	// pprof tool works on its own.
	recorder := profile.NewRecorder(0)
	lo := o.launchOptions()
	lo.Observer = recorder
	lo.OnDevice = func(dev device.Device) { recorder.ObserveDevice(dev) }
	info, err := launch.Resolve(lo, log)
	if err != nil {
		return err
	}
	profileDir, closeProfileDir, err := openProfileDir(o.profileDir, log)
	if err != nil {
		return err
	}
	defer closeProfileDir() // after prof.Close has written a capture still running
	prof := profile.New(recorder, profile.Options{Dir: profileDir,
		Info: map[string]string{"model": info.Name, "device": info.Device}})
	defer prof.Close()
	modelName := servedModelName(o.modelName, o.ModelDir)
	srv, err := server.New(server.Config{
		Addr:           net.JoinHostPort(o.host, strconv.Itoa(o.port)),
		ModelName:      modelName,
		MaxModelLen:    info.Model.MaxSeqLen,
		VocabSize:      info.Model.VocabSize,
		Tokenizer:      info.Tokenizer,
		ChatFormat:     info.Family.Chat,
		StreamInterval: o.streamInterval,
		EnablePprof:    pprofEnabled(o.host, o.pprofGiven, o.pprof),
		APIKey:         key,
		MetricsAuth:    o.metricsAuth,
		ProfileHandler: prof.Handler(),
		Logger:         log,
		BaseSeed:       uint64(o.seed),
		HasBaseSeed:    o.hasSeed,
		// The flags' 0 is "none"; the Config's is "default", its none < 0.
		RequestReadTimeout:   cmp.Or(max(o.requestReadTimeout, 0), -1),
		MaxBodyBytesInflight: cmp.Or(max(o.maxBodyBytesInflight, 0), -1),
	})
	if err != nil {
		return err
	}
	if err := srv.Open(); err != nil {
		return err
	}
	log.Info("listening", "url", srv.URL(), "model", info.Name, "served_model_name", modelName)
	if o.ready != nil {
		o.ready(srv.URL())
	}
	running, err := info.Start(log)
	if err != nil {
		return errors.Join(err, srv.Close())
	}
	eng := running.Engine
	srv.SetEngine(server.FromEngine(eng))
	<-ctx.Done()
	log.Info("shutting down")
	// The server first: open requests finish (or are aborted after the
	// shutdown timeout) before the engine stops.
	return errors.Join(srv.Close(), eng.Close())
}

// servedModelName is the model id clients send and /v1/models lists:
// --served-model-name, else --model as given (a path, as vLLM serves it),
// else gpt2 for the built-in model.
func servedModelName(flag, modelDir string) string {
	return cmp.Or(flag, modelDir, server.DefaultModelName)
}
