package results

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// mergeOnlineSample is a first file: the rows' order and labels are what
// merging sorts (by scale, then label).
func mergeOnlineSample() *Online {
	return &Online{
		Meta: map[string]any{"model": "gpt2"},
		Summaries: []Summary{
			{Backend: "roseinfer+nocache", Scale: 1.6}, {Backend: "roseinfer", Scale: 1.6},
			{Backend: "roseinfer", Scale: 0.4}, {Backend: "my|server", Scale: 0.4},
		},
	}
}

func mergeOfflineSample() *Offline {
	return &Offline{
		Meta:    map[string]any{"model": "gpt2"},
		Results: []OfflineResult{{Backend: "roseinfer+server"}, {Backend: "roseinfer", TotalS: 1}, {Backend: "vllm"}},
	}
}

func TestMergeOnline(t *testing.T) {
	a := mergeOnlineSample()
	a.ByBackend = map[string]*Backend{"roseinfer": {Backend: "roseinfer", BaseURL: "a"}}
	b := &Online{
		Meta: map[string]any{"model": "other"},
		Summaries: []Summary{
			{Backend: "roseinfer", Scale: 1.6, NumRequests: 99}, // overrides a's
			{Backend: "vllm", Scale: 0.8, NumRequests: 5},
		},
		ByBackend: map[string]*Backend{"roseinfer": {Backend: "roseinfer", BaseURL: "b"}, "vllm": {Backend: "vllm"}},
	}
	m := MergeOnline([]*Online{a, b}, []string{"/a.json", "/b.json"})
	var keys []string
	for _, s := range m.Summaries {
		keys = append(keys, s.Backend+"@"+strconv.FormatFloat(s.Scale, 'f', -1, 64))
	}
	want := "my|server@0.4 roseinfer@0.4 vllm@0.8 roseinfer@1.6 roseinfer+nocache@1.6"
	if strings.Join(keys, " ") != want {
		t.Errorf("summaries %v, want %s", keys, want)
	}
	for _, s := range m.Summaries {
		if s.Backend == "roseinfer" && s.Scale == 1.6 && s.NumRequests != 99 {
			t.Errorf("later file did not override (backend, scale)")
		}
	}
	if m.ByBackend["roseinfer"].BaseURL != "b" || m.ByBackend["vllm"] == nil {
		t.Errorf("by_backend not merged by label: %+v", m.ByBackend)
	}
	if m.Meta["model"] != "gpt2" {
		t.Errorf("meta must come from the first file")
	}
	if got := strings.Join(m.Meta["backends"].([]string), ","); got != "my|server,roseinfer,roseinfer+nocache,vllm" {
		t.Errorf("meta.backends %s", got)
	}
	if got := m.Meta["merged_from"].([]string); len(got) != 2 || got[1] != "/b.json" {
		t.Errorf("meta.merged_from %v", got)
	}
}

func TestMergeFilesOffline(t *testing.T) {
	dir := t.TempDir()
	first := mergeOfflineSample()
	second := &Offline{Meta: map[string]any{"model": "x"}, Results: []OfflineResult{{Backend: "roseinfer", TotalS: 9}}}
	p1, p2 := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := WriteJSON(p1, first); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(p2, second); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m.json")
	if err := MergeFiles(KindOffline, out, []string{p1, p2}); err != nil {
		t.Fatal(err)
	}
	m, err := LoadOffline(out)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, r := range m.Results {
		labels = append(labels, r.Backend)
		if r.Backend == "roseinfer" && r.TotalS != 9 {
			t.Errorf("later file did not override roseinfer")
		}
	}
	if strings.Join(labels, ",") != "roseinfer,roseinfer+server,vllm" {
		t.Errorf("results %v, want sorted labels", labels)
	}
	if err := MergeFiles("bogus", out, []string{p1}); err == nil {
		t.Error("unknown kind accepted")
	}
	if err := MergeFiles(KindOnline, out, []string{p1}); err == nil {
		t.Error("an offline file merged as online")
	}
}
