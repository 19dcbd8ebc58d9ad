package online

import (
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/harness/workload"
)

// onlineMeta is meta of online_results.json: the original's keys where they
// apply, then additions.
func onlineMeta(o *OnlineOptions, w *workload.Workload, labels []string) map[string]any {
	var maxIn any
	if o.Workload.MaxInputLen > 0 {
		maxIn = o.Workload.MaxInputLen
	}
	model := o.Servers.Model
	if model == "" {
		model = "gpt2"
		if o.Servers.BaseURL == "" {
			model = "roseinfer built-in tiny (GPT-2 vocabulary, random weights)"
		}
	}
	return map[string]any{
		"model":                  model,
		"device":                 o.Servers.Device,
		"gpu":                    o.Servers.GPU,
		"seed":                   o.Workload.Seed,
		"temperature":            o.Workload.Temperature,
		"top_p":                  o.Workload.TopP,
		"top_k":                  o.Workload.TopK,
		"ignore_eos":             o.Workload.IgnoreEOS,
		"n":                      o.Workload.N,
		"scales":                 o.Load.Scales,
		"max_output_len":         o.Workload.MaxOutputLen,
		"max_input_len":          maxIn,
		"prompt_overhead_tokens": o.Workload.PromptOverheadTokens,
		"start_offset_s":         o.Load.StartOffsetS,
		"warmup_requests":        o.Workload.WarmupRequests,
		"warmup_input_len":       o.Workload.WarmupInputLen,
		"warmup_output_len":      o.Workload.WarmupOutputLen,
		"timeout_ready_s":        o.Servers.TimeoutReady.Seconds(),
		"backends":               labels,
		"server_cpus":            servers.CPUListMeta(o.Servers.ServerCPUs),
		"client_cpus":            servers.CPUListMeta(o.Servers.ClientCPUs),
		"trace_path":             w.Trace().Name,
		// Additions.
		"trace_format":          string(w.Trace().Format),
		"num_trace_rows":        w.NumRows(),
		"model_max_len":         w.Context().ModelMaxLen,
		"effective_context":     w.Context().Effective(),
		"prefix_mode":           o.Workload.PrefixMode,
		"repeat":                o.Load.Repeat,
		"send_lag_threshold_ms": o.Load.SendLagThresholdMs,
		"prewarm_conns":         o.Load.PrewarmConns,
		"min_success_rate":      o.Load.MinSuccessRate,
		"slo":                   o.Load.SLO,
		"request_timeout_s":     o.Load.RequestTimeout.Seconds(),
		"base_url":              o.Servers.BaseURL,
		"server_args":           o.Servers.ServerArgs,
		"variants":              o.Servers.Variants,
		"host":                  o.Servers.Host,
		"port_base":             o.Servers.PortBase,
		"sessions":              sessionsMeta(o, w),
	}
}

// sessionsMeta says how the replay treats conversations: null when it sends
// independent requests only.
func sessionsMeta(o *OnlineOptions, w *workload.Workload) any {
	if !w.HasSessions() {
		return nil
	}
	m := map[string]any{"dropped_turns": w.NumDroppedTurns()}
	if s := o.Workload.Sessions; s.NumSessions > 0 {
		m["synthetic"] = map[string]any{"sessions": s.NumSessions, "turns": s.NumTurns, "think_time_s": s.ThinkTimeS,
			"session_rate": s.RatePerS, "input_len": s.InputLen, "turn_input_len": s.TurnInputLen,
			"output_len": s.OutputLen}
	}
	return m
}
