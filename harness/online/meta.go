package online

// onlineMeta is meta of online_results.json: the original's keys where they
// apply (E.2), then additions.
func onlineMeta(o *OnlineOptions, w *Workload, labels []string) map[string]any {
	var maxIn any
	if o.MaxInputLen > 0 {
		maxIn = o.MaxInputLen
	}
	model := o.Model
	if model == "" {
		model = "gpt2"
		if o.BaseURL == "" {
			model = "roseinfer built-in tiny (GPT-2 vocabulary, random weights)"
		}
	}
	return map[string]any{
		"model":                  model,
		"device":                 o.Device,
		"gpu":                    o.GPU,
		"seed":                   o.Seed,
		"temperature":            o.Temperature,
		"top_p":                  o.TopP,
		"top_k":                  o.TopK,
		"ignore_eos":             o.IgnoreEOS,
		"n":                      o.N,
		"scales":                 o.Scales,
		"max_output_len":         o.MaxOutputLen,
		"max_input_len":          maxIn,
		"prompt_overhead_tokens": o.PromptOverheadTokens,
		"start_offset_s":         o.StartOffsetS,
		"warmup_requests":        o.WarmupRequests,
		"warmup_input_len":       o.WarmupInputLen,
		"warmup_output_len":      o.WarmupOutputLen,
		"timeout_ready_s":        o.TimeoutReady.Seconds(),
		"backends":               labels,
		"server_cpus":            cpuListMeta(o.ServerCPUs),
		"client_cpus":            cpuListMeta(o.ClientCPUs),
		"trace_path":             w.trace.Name,
		// Additions.
		"trace_format":          string(w.trace.Format),
		"num_trace_rows":        len(w.rows),
		"model_max_len":         o.ModelMaxLen,
		"effective_context":     w.context.Effective(),
		"prefix_mode":           o.PrefixMode,
		"repeat":                o.Repeat,
		"send_lag_threshold_ms": o.SendLagThresholdMs,
		"slo":                   o.SLO,
		"request_timeout_s":     o.RequestTimeout.Seconds(),
		"base_url":              o.BaseURL,
		"server_args":           o.ServerArgs,
		"variants":              o.Variants,
		"host":                  o.Host,
		"port_base":             o.PortBase,
	}
}
