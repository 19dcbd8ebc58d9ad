package plots

import (
	"bytes"
	"errors"
	"flag"
	"html"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

var update = flag.Bool("update", false, "rewrite docs/figures/example.png")

const fixtures = "../results/testdata/"

// figureCase is one figure rendered from one fixture, with the texts its
// SVG must contain (series labels and legend entries).
type figureCase struct {
	name     string
	build    func() (*Figure, error)
	wantPx   [2]int
	wantText []string
}

func loadOnline(t *testing.T, name string) *results.Online {
	t.Helper()
	on, err := results.LoadOnline(fixtures + name)
	if err != nil {
		t.Fatal(err)
	}
	return on
}

func loadOffline(t *testing.T, name string) *results.Offline {
	t.Helper()
	off, err := results.LoadOffline(fixtures + name)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func figureCases(t *testing.T) []figureCase {
	ours := loadOnline(t, "report_ours_online.json")
	orig := loadOnline(t, "report_original_online.json")
	single := loadOnline(t, "report_original_single.json")
	oursOff := loadOffline(t, "report_ours_offline.json")
	origOff := loadOffline(t, "report_original_offline.json")
	oneRow := &results.Offline{Results: origOff.Results[:1]}

	oursNames := []string{"roseinfer", "roseinfer (flash-attn)", "vLLM", "SGLang",
		"p90 (line)", "p99 (hollow)", "p50–p90 (band)", "95% CI over rounds", "invalid scale (send lag)"}
	origNames := []string{"roseinfer", "roseinfer (-fused ops)", "vLLM", "SGLang", "TensorRT-LLM (failed)",
		"p90 (line)", "p99 (hollow)", "p50–p90 (band)"}
	var cases []figureCase
	for _, fx := range []struct {
		name  string
		on    *results.Online
		names []string
	}{
		{"ours", ours, oursNames},
		{"original", orig, origNames},
		{"single", single, []string{"roseinfer", "p90 (line)"}},
	} {
		on := fx.on
		cases = append(cases,
			figureCase{fx.name + "/compare", func() (*Figure, error) { return OnlineLatencyCompare(on) },
				[2]int{1650, 1050}, slices.Concat(fx.names, []string{"TTFT", "TPOT", "ITL", "E2E", xLabel})},
			figureCase{fx.name + "/p90_only", func() (*Figure, error) { return OnlinePercentileOnly(on, "p90") },
				[2]int{2750, 1750}, []string{fx.names[0], "TTFT (P90)", "E2E (P90)"}},
			figureCase{fx.name + "/p99_only", func() (*Figure, error) { return OnlinePercentileOnly(on, "99") },
				[2]int{2750, 1750}, []string{fx.names[0], "ITL (P99)"}},
		)
		for _, m := range latencyMetrics {
			key := m.Key
			cases = append(cases, figureCase{fx.name + "/" + key, func() (*Figure, error) { return OnlineMetric(on, key) },
				[2]int{}, slices.Concat(fx.names, []string{m.YLabel})})
		}
	}
	offTitles := []string{"Output Throughput (tok/s)", "Request Throughput (req/s)", "Total Throughput (tok/s)"}
	cases = append(cases,
		figureCase{"ours/offline", func() (*Figure, error) { return OfflineThroughputCompare(oursOff) },
			[2]int{2025, 690}, slices.Concat(offTitles, []string{"roseinfer", "flash-attn", "vLLM", "SGLang", "OOM"})},
		figureCase{"original/offline", func() (*Figure, error) { return OfflineThroughputCompare(origOff) },
			[2]int{2025, 690}, slices.Concat(offTitles, []string{"roseinfer", "-ops", "-MLP", "OOM", "+kv256", "-overlap", "ERR", "vLLM", "SGLang"})},
		figureCase{"one_row/offline", func() (*Figure, error) { return OfflineThroughputCompare(oneRow) },
			[2]int{2025, 690}, slices.Concat(offTitles, []string{"roseinfer"})},
	)
	return cases
}

func TestFiguresRender(t *testing.T) {
	for _, c := range figureCases(t) {
		t.Run(c.name, func(t *testing.T) {
			fig, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			pngBytes, err := fig.PNG()
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(pngBytes))
			if err != nil {
				t.Fatalf("PNG does not decode: %v", err)
			}
			w, h := fig.PixelSize()
			if c.wantPx != [2]int{} && (w != c.wantPx[0] || h != c.wantPx[1]) {
				t.Errorf("figure size %dx%d px, want %dx%d", w, h, c.wantPx[0], c.wantPx[1])
			}
			if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
				t.Errorf("PNG is %dx%d, figure says %dx%d", b.Dx(), b.Dy(), w, h)
			}
			svg, err := fig.SVG()
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range c.wantText {
				for _, line := range strings.Split(text, "\n") {
					if !bytes.Contains(svg, []byte(">"+html.EscapeString(line)+"<")) {
						t.Errorf("SVG has no text %q", line)
					}
				}
			}
			png2, _ := fig.PNG()
			svg2, _ := fig.SVG()
			if !bytes.Equal(pngBytes, png2) || !bytes.Equal(svg, svg2) {
				t.Error("rendering twice gave different bytes")
			}
		})
	}
}

func TestFiguresAreDeterministicAcrossBuilds(t *testing.T) {
	// A fresh load and build (new maps, new iteration order) must give the
	// same bytes as the first.
	render := func() []byte {
		fig, err := OnlineLatencyCompare(loadOnline(t, "report_ours_online.json"))
		if err != nil {
			t.Fatal(err)
		}
		svg, err := fig.SVG()
		if err != nil {
			t.Fatal(err)
		}
		return svg
	}
	first := render()
	for i := 0; i < 3; i++ {
		if !bytes.Equal(first, render()) {
			t.Fatal("SVG differs between builds from the same file")
		}
	}
}

func TestExampleFigure(t *testing.T) {
	fig, err := OnlineLatencyCompare(loadOnline(t, "report_ours_online.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := fig.PNG()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "figures", "example.png")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run: go test ./plots -run TestExampleFigure -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale (run: go test ./plots -run TestExampleFigure -update)", path)
	}
}

func TestNoData(t *testing.T) {
	if _, err := OnlineLatencyCompare(&results.Online{}); !errors.Is(err, ErrNoOnlineData) {
		t.Errorf("empty online: err = %v, want ErrNoOnlineData", err)
	}
	if _, err := OfflineThroughputCompare(&results.Offline{}); !errors.Is(err, ErrNoOfflineData) {
		t.Errorf("empty offline: err = %v, want ErrNoOfflineData", err)
	}
	if _, err := OnlineMetric(loadOnline(t, "report_original_single.json"), "queue_ms"); err == nil {
		t.Error("unknown metric accepted")
	}
}

func TestParsePercentiles(t *testing.T) {
	cases := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"", "", false},
		{"p90,p99", "p90,p99", false},
		{" 90 , P99 ", "p90,p99", false},
		{"p50", "", true},
		{"p90,x", "", true},
	}
	for _, c := range cases {
		got, err := ParsePercentiles(c.in)
		if (err != nil) != c.wantErr {
			t.Errorf("ParsePercentiles(%q) err = %v, wantErr %v", c.in, err, c.wantErr)
			continue
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("ParsePercentiles(%q) = %v, want %s", c.in, got, c.want)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	figs, err := OnlineFigures(loadOnline(t, "report_original_single.json"), false, []string{"p99"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteFiles(dir, figs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"online_latency_compare", "online_ttft_ms", "online_tpot_ms", "online_itl_ms", "online_e2e_ms", "online_latency_p99_only"}
	if len(paths) != 2*len(want) {
		t.Fatalf("wrote %d files, want %d: %v", len(paths), 2*len(want), paths)
	}
	for i, name := range want {
		for j, ext := range []string{".png", ".svg"} {
			if got := filepath.Base(paths[2*i+j]); got != name+ext {
				t.Errorf("file %d = %s, want %s", 2*i+j, got, name+ext)
			}
		}
	}
	if _, err := WriteFiles(dir, figs[:1], "gif"); err == nil {
		t.Error("unknown format accepted")
	}
	onlyExtra, err := OnlineFigures(loadOnline(t, "report_original_single.json"), true, []string{"p90"})
	if err != nil || len(onlyExtra) != 1 || onlyExtra[0].Name != "online_latency_p90_only" {
		t.Errorf("--online-no-default: got %d figures, err %v", len(onlyExtra), err)
	}
}

func TestStyles(t *testing.T) {
	cases := map[string]seriesStyle{
		"roseinfer":                  {hex("#1f77b4"), "o"},
		"vllm":                       {hex("#ff7f0e"), "s"},
		"trtllm":                     {hex("#4d4d4d"), "H"},
		"roseinfer+nofuse":           {hex("#7f7f7f"), "s"},
		"roseinfer+kv256":            {hex("#ffbb78"), "^"},
		"roseinfer+flashattn+nomlp":  {hex("#e377c2"), "8"},
		"roseinfer+inproc+nooverlap": {hex("#aec7e8"), ">"},
		"llama-server":               {hex("#333333"), "o"},
	}
	for label, want := range cases {
		if got := styleFor(label); got != want {
			t.Errorf("styleFor(%q) = %v, want %v", label, got, want)
		}
	}
	// roseinfer+server and roseinfer would both be blue circles.
	labels := []string{"roseinfer", "roseinfer+server", "openai", "llama-server"}
	styles := assignStyles(labels)
	seen := map[seriesStyle]string{}
	for _, l := range labels {
		if other, dup := seen[styles[l]]; dup {
			t.Errorf("%s and %s share style %v", l, other, styles[l])
		}
		seen[styles[l]] = l
	}
	if styles["roseinfer"] != styleFor("roseinfer") {
		t.Error("the first label must keep its own style")
	}
}

func TestPlainNumber(t *testing.T) {
	cases := map[float64]string{0: "0", 25: "25", 12.5: "12.5", 0.1 + 0.2: "0.3", 3000: "3000", 1e-4: "0.0001", 12000.000000000002: "12000", 30000.000000000004: "30000", -2.5: "-2.5"}
	for v, want := range cases {
		if got := plainNumber(v); got != want {
			t.Errorf("plainNumber(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestFailedBackendWithoutSummaries(t *testing.T) {
	on := loadOnline(t, "report_original_single.json")
	on.ByBackend["vllm"] = &results.Backend{Backend: "vllm", Error: "server exited with status 1 before ready"}
	fig, err := OnlineLatencyCompare(on)
	if err != nil {
		t.Fatal(err)
	}
	svg, err := fig.SVG()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte(">vLLM (failed)<")) {
		t.Error("a backend that failed before any scale is missing from the legend")
	}
}
