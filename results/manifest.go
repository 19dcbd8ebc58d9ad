package results

import (
	"encoding/json"
	"fmt"
	"os"
)

// ProfileManifestFile is the profile stage's record in the run directory.
const ProfileManifestFile = "profile_manifest.json"

// ProfileManifest is profile_manifest.json: the original's schema (E.4) —
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
