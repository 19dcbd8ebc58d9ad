// Package timeline is bench online --timeline: one Chrome trace
// (timeline.json, opened in ui.perfetto.dev) that puts the client's view of
// every request — scheduled time, send, first token, each chunk — and
// roseinfer's engine steps — batch size, prefill tokens, decode rows, graph
// or eager — on the client's clock, and marks the ITL outliers with the
// step each fell in.
//
// The server side comes from roseinfer's own profiler (engine/profile): a
// phase-trace capture per round through POST /start_profile and
// /stop_profile. clock.go says how its times are aligned with the
// client's, and within what error; attribute.go how an outlier is matched
// to a step. The package reads results records and server traces and
// imports nothing from harness/online, which calls it.
package timeline
