package server

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/roseinfer/roseinfer/engine"
)

// metrics are the server's Prometheus series (names listed in
// docs/roseinfer-api.md). Each Server has its own registry, so tests can run
// several servers in one process.
type metrics struct {
	reg          *prometheus.Registry
	ttft         prometheus.Histogram
	itl          prometheus.Histogram
	e2e          prometheus.Histogram
	queue        prometheus.Histogram
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	requests     *prometheus.CounterVec // by finish reason
	errors       *prometheus.CounterVec // by HTTP status
	panics       prometheus.Counter
}

// Latency buckets in seconds: from a fast decode step to a long CPU generation.
var latencyBuckets = []float64{.001, .0025, .005, .01, .02, .04, .06, .08, .1, .15, .2, .3, .5, .75,
	1, 2.5, 5, 10, 20, 40, 80}

func newMetrics(s *Server) *metrics {
	reg := prometheus.NewRegistry()
	hist := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "roseinfer", Name: name, Help: help,
			Buckets: latencyBuckets})
	}
	m := &metrics{
		reg:   reg,
		ttft:  hist("time_to_first_token_seconds", "HTTP arrival to the first generated token."),
		itl:   hist("inter_token_latency_seconds", "Time between successive generated tokens of a request."),
		e2e:   hist("e2e_request_latency_seconds", "HTTP arrival to the engine finishing the request."),
		queue: hist("request_queue_time_seconds", "Engine submission to the first step that included the request."),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "roseinfer",
			Name: "prompt_tokens_total", Help: "Prompt tokens submitted to the engine."}),
		genTokens: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "roseinfer",
			Name: "generation_tokens_total", Help: "Generated tokens returned to clients."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "roseinfer",
			Name: "requests_total", Help: "Finished generation requests by finish reason."}, []string{"finish_reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "roseinfer",
			Name: "request_errors_total", Help: "Requests answered with an error, by HTTP status."}, []string{"status"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "roseinfer",
			Name: "handler_panics_total", Help: "Handler panics recovered (each is a bug)."}),
	}
	reg.MustRegister(m.ttft, m.itl, m.e2e, m.queue, m.promptTokens, m.genTokens, m.requests, m.errors, m.panics,
		&engineCollector{s: s},
		// The Go collector's go_gc_duration_seconds summary gives GC pause
		// quantiles; the runtime's /sched/pauses histograms add the
		// stop-the-world pause distribution the hot-path work cares about.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/pauses/.*`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observe records one finished choice, off the token path (once per request).
func (m *metrics) observe(arrival time.Time, t engine.Timing, c *choice) {
	m.genTokens.Add(float64(c.numTokens))
	m.requests.WithLabelValues(c.finishReason()).Inc()
	if c.finish != engine.FinishLength && c.finish != engine.FinishStop {
		return
	}
	if !t.FirstScheduled.IsZero() && !t.Arrival.IsZero() {
		m.queue.Observe(t.FirstScheduled.Sub(t.Arrival).Seconds())
	}
	tokens := t.Tokens[:min(c.numTokens, len(t.Tokens))]
	if len(tokens) > 0 {
		m.ttft.Observe(tokens[0].Sub(arrival).Seconds())
	}
	for i := 1; i < len(tokens); i++ {
		m.itl.Observe(tokens[i].Sub(tokens[i-1]).Seconds())
	}
	if !t.Finished.IsZero() {
		m.e2e.Observe(t.Finished.Sub(arrival).Seconds())
	}
}

func statusLabel(status int) string { return strconv.Itoa(status) }

// engineCollector reads one engine.Stats snapshot per scrape.
type engineCollector struct{ s *Server }

var (
	descRunning   = newDesc("num_requests_running", "Sequences in the running batch.")
	descWaiting   = newDesc("num_requests_waiting", "Requests waiting to be scheduled.")
	descBlocksUsd = newDesc("kv_blocks_used", "KV cache blocks in use.")
	descBlocksFr  = newDesc("kv_blocks_free", "KV cache blocks free.")
	descHitRate   = newDesc("prefix_cache_hit_rate", "Prompt tokens found in the prefix cache / tokens looked up, since start.")
	descQueried   = newDesc("prefix_cache_queried_tokens_total", "Prompt tokens looked up in the prefix cache.")
	descHits      = newDesc("prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache.")
	descPreempt   = newDesc("preemptions_total", "Sequences preempted (their KV recomputed later).")
	descSteps     = newDesc("engine_steps_total", "Engine steps run.")
)

func newDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("roseinfer_"+name, help, nil, nil)
}

func (ec *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descBlocksUsd, descBlocksFr, descHitRate,
		descQueried, descHits, descPreempt, descSteps} {
		ch <- d
	}
}

func (ec *engineCollector) Collect(ch chan<- prometheus.Metric) {
	eng := ec.s.currentEngine()
	if eng == nil {
		return
	}
	st := eng.Stats()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descRunning, float64(st.NumRunning))
	gauge(descWaiting, float64(st.NumWaiting))
	gauge(descBlocksUsd, float64(st.KVBlocksUsed))
	gauge(descBlocksFr, float64(st.KVBlocksFree))
	hitRate := 0.0
	if st.PrefixQueriedTokens > 0 {
		hitRate = float64(st.PrefixHitTokens) / float64(st.PrefixQueriedTokens)
	}
	gauge(descHitRate, hitRate)
	counter(descQueried, float64(st.PrefixQueriedTokens))
	counter(descHits, float64(st.PrefixHitTokens))
	counter(descPreempt, float64(st.NumPreemptions))
	counter(descSteps, float64(st.NumSteps))
}
