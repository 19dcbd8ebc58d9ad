package results

import (
	"encoding/json"
	"fmt"
	"os"
)

// ProfileManifestFile is the profile stage's record in the run directory.
const ProfileManifestFile = "profile_manifest.json"

// ProfileManifest is profile_manifest.json: the original's schema —
// meta and one run per (tool, backend) — with additions per run: the files
// found, summaries of pprof profiles and of the phase trace, and the
// environment the server got.
type ProfileManifest struct {
	// Meta holds the original's keys (profile, profile_only, profile_n,
	// profile_scale, ..., tools, backends, profile_start_time, versions,
	// profile_end_time, profile_wall_s); a map, as for results meta, so the
	// original's manifests load unchanged.
	Meta map[string]any `json:"meta"`
	Runs []ProfileRun   `json:"runs"`
}

// ProfileRun is one (tool, backend) capture. The first block of fields is
// the original's; ProfileError is null when the capture worked.
type ProfileRun struct {
	Tool             string   `json:"tool"`         // torch, nsys or pprof
	Backend          string   `json:"backend"`      // run label, e.g. roseinfer+nocache
	BaseBackend      string   `json:"base_backend"` // roseinfer, vllm, sglang, trtllm
	Port             int      `json:"port,omitempty"`
	Cmd              []string `json:"cmd"`
	LogPath          string   `json:"log_path,omitempty"`
	OutputDir        string   `json:"output_dir"`
	NsysOutputPrefix *string  `json:"nsys_output_prefix"` // null unless tool is nsys
	WallS            float64  `json:"wall_s"`
	ProfileError     *string  `json:"profile_error"`

	// Additions.
	Env         map[string]string `json:"env,omitempty"`          // overrides given to the server
	NumRequests int               `json:"num_requests"`           // replayed while profiling
	NumSuccess  int               `json:"num_success"`            // of those, completed
	Files       []ProfileFile     `json:"files"`                  // every file in output_dir (+ the nsys report)
	Pprof       []PprofSummary    `json:"pprof,omitempty"`        // one per pprof file
	Trace       *TraceSummary     `json:"trace,omitempty"`        // roseinfer's trace.json, by phase
	Notes       []string          `json:"notes,omitempty"`        // what a reader should know (e.g. skipped steps)
	StopProfile json.RawMessage   `json:"stop_profile,omitempty"` // the server's /stop_profile answer, when JSON
}

// ProfileFile is one artifact. Kinds: chrome_trace (roseinfer trace.json),
// torch_trace (a torch profiler trace, maybe gzipped), nsys_rep, pprof_cpu,
// pprof_goroutine, pprof_block, pprof_mutex, or other.
type ProfileFile struct {
	Kind  string `json:"kind"`
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// PprofSummary is the top of one pprof profile, as `go tool pprof -top`
// shows it: per function, flat (samples whose leaf is the function) and
// cumulative (samples with the function anywhere on the stack) values of
// the profile's default sample type.
type PprofSummary struct {
	Kind       string      `json:"kind"` // pprof_cpu, pprof_goroutine, pprof_block, pprof_mutex
	Path       string      `json:"path"`
	SampleType string      `json:"sample_type"` // cpu, goroutine, delay, ...
	Unit       string      `json:"unit"`        // nanoseconds, count
	Total      int64       `json:"total"`
	NumSamples int         `json:"num_samples"`
	DurationS  float64     `json:"duration_s,omitempty"`
	Top        []PprofFunc `json:"top"`
	Error      string      `json:"error,omitempty"` // the file could not be read or parsed
}

// PprofFunc is one row of a top table. Percentages are of Total.
type PprofFunc struct {
	Function string  `json:"function"`
	Flat     int64   `json:"flat"`
	FlatPct  float64 `json:"flat_pct"`
	Cum      int64   `json:"cum"`
	CumPct   float64 `json:"cum_pct"`
}

// TraceSummary totals a Chrome trace's complete events by (track, name):
// for roseinfer's trace.json, the time per engine phase (schedule,
// forward/prefill, forward/decode, emit, step) and per device span.
type TraceSummary struct {
	Path      string         `json:"path"`
	NumEvents int            `json:"num_events"` // complete ("X") events
	SpanS     float64        `json:"span_s"`     // first event start to last event end
	Phases    []TracePhase   `json:"phases"`
	OtherData map[string]any `json:"other_data,omitempty"`
}

// TracePhase is one (track, name) row. Times in milliseconds.
type TracePhase struct {
	Track   string  `json:"track"`
	Name    string  `json:"name"`
	Count   int     `json:"count"`
	TotalMs float64 `json:"total_ms"`
	MeanMs  float64 `json:"mean_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// Error sets the run's profile_error.
func (r *ProfileRun) Error(msg string) { r.ProfileError = &msg }

// LoadProfileManifest reads a profile_manifest.json, ours or the original's.
func LoadProfileManifest(path string) (*ProfileManifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m ProfileManifest
	if err := json.Unmarshal(nonFiniteToNull(data), &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}
