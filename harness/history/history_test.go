package history

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/plots"
	"github.com/roseinfer/roseinfer/results"
)

const fixtures = "../../results/testdata/"

func fixtureEntry(t *testing.T) Entry {
	t.Helper()
	on, err := results.LoadOnline(fixtures + "report_ours_online.json")
	if err != nil {
		t.Fatal(err)
	}
	off, err := results.LoadOffline(fixtures + "report_ours_offline.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := FromRun(on, off)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestFromRunSaveLoadChart(t *testing.T) {
	e := fixtureEntry(t)
	metrics := map[string]bool{}
	for _, f := range e.Figures {
		metrics[f.Metric] = true
	}
	for _, p := range Panels {
		if !metrics[p.Metric] {
			t.Errorf("the fixture run gave no %s", p.Metric)
		}
	}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	var entries []Entry
	for i := range 5 {
		e.Time = "2026-11-0" + string(rune('1'+i)) + "T02:17:00+00:00"
		entries = append(entries, e)
	}
	if err := Save(path, entries, 3); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 3 || back[0].Time != entries[2].Time {
		t.Fatalf("kept %d entries starting %q, want the last 3", len(back), back[0].Time)
	}
	labels, panels := Chart(back)
	if len(labels) != 3 || !strings.HasPrefix(labels[0], "11-03") || len(panels) != len(Panels) {
		t.Fatalf("labels %v, %d panels", labels, len(panels))
	}
	fig, err := plots.History(labels, panels)
	if err != nil {
		t.Fatal(err)
	}
	png, err := fig.PNG()
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("history.png: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if got, err := Load(filepath.Join(dir, "none.jsonl")); err != nil || got != nil {
		t.Errorf("a missing file: got %v, %v; want an empty history", got, err)
	}
	for content, want := range map[string]string{
		"{\"time\":\"x\",\"figures\":[{\"metric\":\"m\",\"series\":\"s\",\"value\":1}]}\nnot json\n": "bad.jsonl:2:",
		"{\"time\":\"x\"}\n": "bad.jsonl:1: figures",
	} {
		path := filepath.Join(dir, "bad.jsonl")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
	if _, err := FromRun(nil, nil); err == nil {
		t.Error("FromRun of nothing: want an error")
	}
	if _, err := plots.History(nil, nil); err == nil {
		t.Error("plots.History of nothing: want an error")
	}
}
