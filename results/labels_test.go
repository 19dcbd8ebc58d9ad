package results

import "testing"

func TestBackendDisplayName(t *testing.T) {
	cases := map[string]string{
		"roseinfer":                       "roseinfer",
		"roseinfer+flashattn":             "roseinfer (flash-attn)",
		"vllm":                            "vLLM",
		"sglang":                          "SGLang",
		"trtllm":                          "TensorRT-LLM",
		"openai":                          "openai",
		"roseinfer+flashinfer+nofuse":     "roseinfer (flashinfer, -fused ops)",
		"roseinfer+nothr+kv256+batch16":   "roseinfer (-thr cap, +kv256, +batch16)",
		"roseinfer+tok2+nompasync":        "roseinfer (+tok2, -mp async admit)",
		"roseinfer+gcfreeze+fastsse":      "roseinfer",
		"roseinfer+gcfreeze+nooverlap":    "roseinfer (-overlap sched)",
		"roseinfer+server":                "roseinfer (server)",
		"roseinfer+kvx":                   "roseinfer (kvx)",
		"roseinferx":                      "roseinferx",
		"roseinfer+nogc+nofastsse+inproc": "roseinfer (-gc freeze, -fast SSE, in-proc)",
	}
	for label, want := range cases {
		if got := BackendDisplayName(label); got != want {
			t.Errorf("BackendDisplayName(%q) = %q, want %q", label, got, want)
		}
	}
}

func TestCanonicalLabels(t *testing.T) {
	cases := []struct {
		name   string
		labels []string
		want   map[string]string
	}{
		{
			name:   "old scheme: absence of gcfreeze/fastsse means off",
			labels: []string{"roseinfer+gcfreeze+fastsse", "roseinfer+fastsse", "vllm"},
			want: map[string]string{
				"roseinfer+gcfreeze+fastsse": "roseinfer",
				"roseinfer+fastsse":          "roseinfer+nogc",
				"vllm":                       "vllm",
			},
		},
		{
			name:   "new scheme: explicit off tokens kept, old ones dropped",
			labels: []string{"roseinfer", "roseinfer+nogc", "roseinfer+gcfreeze"},
			want: map[string]string{
				"roseinfer":          "roseinfer",
				"roseinfer+nogc":     "roseinfer+nogc",
				"roseinfer+gcfreeze": "roseinfer",
			},
		},
		{
			name:   "no gc tokens at all",
			labels: []string{"roseinfer+flashattn"},
			want:   map[string]string{"roseinfer+flashattn": "roseinfer+flashattn"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CanonicalLabels(c.labels)
			for label, want := range c.want {
				if got[label] != want {
					t.Errorf("%q -> %q, want %q", label, got[label], want)
				}
			}
		})
	}
}
