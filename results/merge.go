package results

import (
	"fmt"
	"path/filepath"
	"sort"
)

// Merge kinds for MergeFiles.
const (
	KindOnline  = "online"
	KindOffline = "offline"
)

// MergeFiles is `bench merge` (the original's merge_results.py): it
// reads inputs of the given kind, merges them with MergeOnline or
// MergeOffline (later files override earlier duplicates) and writes out
// atomically.
func MergeFiles(kind, out string, inputs []string) error {
	if len(inputs) == 0 {
		return fmt.Errorf("merge: no input files")
	}
	abs := make([]string, len(inputs))
	for i, p := range inputs {
		a, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		abs[i] = a
	}
	switch kind {
	case KindOnline:
		files := make([]*Online, len(inputs))
		for i, p := range inputs {
			on, err := LoadOnline(p)
			if err != nil {
				return fmt.Errorf("merge: %w", err)
			}
			files[i] = on
		}
		return WriteJSON(out, MergeOnline(files, abs))
	case KindOffline:
		files := make([]*Offline, len(inputs))
		for i, p := range inputs {
			off, err := LoadOffline(p)
			if err != nil {
				return fmt.Errorf("merge: %w", err)
			}
			files[i] = off
		}
		return WriteJSON(out, MergeOffline(files, abs))
	}
	return fmt.Errorf("merge: unknown kind %q (want online or offline)", kind)
}

// MergeOnline merges online results: summaries keyed by (backend, scale)
// and by_backend entries keyed by label, a later file replacing an earlier
// one's entry; summaries sorted by (scale, backend). Meta is the first
// file's plus merged_from (the input paths) and backends (sorted labels).
func MergeOnline(files []*Online, paths []string) *Online {
	type key struct {
		backend string
		scale   float64
	}
	summaries := map[key]Summary{}
	out := &Online{Meta: copyMeta(files), ByBackend: map[string]*Backend{}}
	for _, f := range files {
		for _, s := range f.Summaries {
			summaries[key{s.Backend, s.Scale}] = s
		}
		for label, b := range f.ByBackend {
			out.ByBackend[label] = b
		}
	}
	for _, s := range summaries {
		out.Summaries = append(out.Summaries, s)
	}
	sort.Slice(out.Summaries, func(i, j int) bool {
		a, b := out.Summaries[i], out.Summaries[j]
		if a.Scale != b.Scale {
			return a.Scale < b.Scale
		}
		return a.Backend < b.Backend
	})
	labels := map[string]bool{}
	for label := range out.ByBackend {
		labels[label] = true
	}
	for k := range summaries {
		labels[k.backend] = true
	}
	out.Meta["merged_from"] = paths
	out.Meta[MetaBackends] = sortedKeys(labels)
	return out
}

// MergeOffline merges offline results keyed by backend label, a later file
// replacing an earlier one's entry, sorted by label; meta as MergeOnline.
func MergeOffline(files []*Offline, paths []string) *Offline {
	byLabel := map[string]OfflineResult{}
	for _, f := range files {
		for _, r := range f.Results {
			byLabel[r.Backend] = r
		}
	}
	labels := map[string]bool{}
	for label := range byLabel {
		labels[label] = true
	}
	out := &Offline{Meta: map[string]any{}}
	if len(files) > 0 && files[0].Meta != nil {
		for k, v := range files[0].Meta {
			out.Meta[k] = v
		}
	}
	for _, label := range sortedKeys(labels) {
		out.Results = append(out.Results, byLabel[label])
	}
	out.Meta["merged_from"] = paths
	out.Meta[MetaBackends] = sortedKeys(labels)
	return out
}

func copyMeta(files []*Online) map[string]any {
	meta := map[string]any{}
	if len(files) > 0 && files[0].Meta != nil {
		for k, v := range files[0].Meta {
			meta[k] = v
		}
	}
	return meta
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
