package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File names a run directory holds.
const (
	OnlineResultsFile  = "online_results.json"
	OfflineResultsFile = "offline_results.json"
)

// ErrNoResults is returned by LoadRun when a path holds neither results file.
var ErrNoResults = errors.New("no online_results.json or offline_results.json")

// LoadOnline reads an online_results.json written by this harness or by the
// original Python harness (see DecodeOnline).
func LoadOnline(path string) (*Online, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read online results: %w", err)
	}
	on, err := DecodeOnline(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return on, nil
}

// LoadOffline reads an offline_results.json (ours or the original's).
func LoadOffline(path string) (*Offline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read offline results: %w", err)
	}
	off, err := DecodeOffline(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return off, nil
}

// DecodeOnline parses online results leniently enough for the original
// harness's files: bare NaN/Infinity tokens (Python's json default) become
// null, missing metric objects stay empty, and a summary without a "valid" key
// (the original never wrote one) counts as valid.
func DecodeOnline(data []byte) (*Online, error) {
	clean := nonFiniteToNull(data)
	var on Online
	if err := json.Unmarshal(clean, &on); err != nil {
		return nil, fmt.Errorf("decode online results: %w", err)
	}
	if on.Summaries == nil && on.ByBackend == nil {
		return nil, errors.New("decode online results: no summaries or by_backend (not an online_results.json?)")
	}
	if err := defaultValid(clean, &on); err != nil {
		return nil, err
	}
	return &on, nil
}

// DecodeOffline parses offline results (NaN tolerant, like DecodeOnline).
func DecodeOffline(data []byte) (*Offline, error) {
	var off Offline
	if err := json.Unmarshal(nonFiniteToNull(data), &off); err != nil {
		return nil, fmt.Errorf("decode offline results: %w", err)
	}
	if off.Results == nil {
		return nil, errors.New("decode offline results: no results list (not an offline_results.json?)")
	}
	return &off, nil
}

// LoadRun loads what path holds: a run directory (either or both results
// files inside) or a single results file, whose kind is told from its content.
// Missing kinds are nil; ErrNoResults when there is nothing at all.
func LoadRun(path string) (*Online, *Offline, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load run: %w", err)
	}
	if !st.IsDir() {
		return loadRunFile(path)
	}
	var on *Online
	var off *Offline
	if p := filepath.Join(path, OnlineResultsFile); fileExists(p) {
		if on, err = LoadOnline(p); err != nil {
			return nil, nil, err
		}
	}
	if p := filepath.Join(path, OfflineResultsFile); fileExists(p) {
		if off, err = LoadOffline(p); err != nil {
			return nil, nil, err
		}
	}
	if on == nil && off == nil {
		return nil, nil, fmt.Errorf("%s: %w", path, ErrNoResults)
	}
	return on, off, nil
}

func loadRunFile(path string) (*Online, *Offline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load run: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(nonFiniteToNull(data), &top); err != nil {
		return nil, nil, fmt.Errorf("%s: not a results file: %w", path, err)
	}
	switch {
	case top["summaries"] != nil || top["by_backend"] != nil:
		on, err := DecodeOnline(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return on, nil, nil
	case top["results"] != nil:
		off, err := DecodeOffline(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, off, nil
	}
	return nil, nil, fmt.Errorf("%s: %w", path, ErrNoResults)
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// defaultValid marks as valid every summary whose JSON has no "valid" key:
// the zero value false would otherwise brand every scale of an original
// results file as invalid.
func defaultValid(clean []byte, on *Online) error {
	type probeSummary struct {
		Valid  *bool          `json:"valid"`
		Rounds []probeSummary `json:"rounds"`
	}
	var probe struct {
		Summaries []probeSummary `json:"summaries"`
		ByBackend map[string]*struct {
			Runs []struct {
				Summary probeSummary `json:"summary"`
			} `json:"runs"`
		} `json:"by_backend"`
	}
	if err := json.Unmarshal(clean, &probe); err != nil {
		return fmt.Errorf("decode online results: %w", err)
	}
	var apply func(s *Summary, p probeSummary)
	apply = func(s *Summary, p probeSummary) {
		if p.Valid == nil {
			s.Valid = true
		}
		for i := range s.Rounds {
			if i < len(p.Rounds) {
				apply(&s.Rounds[i], p.Rounds[i])
			}
		}
	}
	for i := range on.Summaries {
		apply(&on.Summaries[i], probe.Summaries[i])
	}
	for label, b := range on.ByBackend {
		pb := probe.ByBackend[label]
		if b == nil || pb == nil {
			continue
		}
		for i := range b.Runs {
			apply(&b.Runs[i].Summary, pb.Runs[i].Summary)
		}
	}
	return nil
}

// nonFiniteToNull rewrites the bare NaN, Infinity and -Infinity tokens that
// Python's json module emits into null, leaving string contents untouched.
// Strict JSON has no other bare words starting with N or I, so outside a
// string these letters can only begin one of those tokens.
func nonFiniteToNull(data []byte) []byte {
	if !bytes.Contains(data, []byte("NaN")) && !bytes.Contains(data, []byte("Infinity")) {
		return data
	}
	out := make([]byte, 0, len(data))
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			out = append(out, c)
			switch c {
			case '\\':
				if i+1 < len(data) {
					i++
					out = append(out, data[i])
				}
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
			out = append(out, c)
		case bytes.HasPrefix(data[i:], []byte("NaN")):
			out = append(out, "null"...)
			i += len("NaN") - 1
		case bytes.HasPrefix(data[i:], []byte("-Infinity")):
			out = append(out, "null"...)
			i += len("-Infinity") - 1
		case bytes.HasPrefix(data[i:], []byte("Infinity")):
			out = append(out, "null"...)
			i += len("Infinity") - 1
		default:
			out = append(out, c)
		}
	}
	return out
}
