package online

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/traces"
)

// TestSimSessionsHitThePrefixCache is issue 36's sessions acceptance test,
// against the real `roseinfer serve --device sim` (real scheduler and
// prefix cache): 8 synthetic two-turn conversations. Turn 2's prompt is
// turn 1's 512 tokens, its 16-token answer and 16 new tokens, so 528 of its
// 544 tokens are implied hits. The server computed the KV of turn 1's
// prompt and answer but the answer's last token (527 tokens, 32 whole
// 16-token blocks), so it finds 512: 97% of the implied hits. The same run
// against the server with --no-prefix-cache finds none.
func TestSimSessionsHitThePrefixCache(t *testing.T) {
	o := simOptions(t, 500)
	o.Workload.Sessions = traces.SessionOptions{NumSessions: 8, NumTurns: 2, ThinkTimeS: 0.05, RatePerS: 40,
		InputLen: 512, TurnInputLen: 16, OutputLen: 16}
	o.Servers.Variants = []string{"nocache=--no-prefix-cache"}
	rep, err := Online(context.Background(), context.Background(), o)
	on := loadCleanRun(t, rep, err)
	if len(on.Summaries) != 2 {
		t.Fatalf("%d summaries, want roseinfer and roseinfer+nocache", len(on.Summaries))
	}
	for _, s := range on.Summaries {
		pc := s.PrefixCache
		if s.NumSuccess != 16 || pc == nil || pc.NumSessionTurns != 8 || pc.NumReported != 16 ||
			pc.ImpliedTokens != 8*528 || pc.PromptTokens != 8*(512+544) {
			t.Fatalf("%s: %d/%d ok, prefix cache %+v", s.Backend, s.NumSuccess, s.NumRequests, pc)
		}
		found := *pc.ImpliedHitsFound
		t.Logf("%s: implied hit rate %.4f, measured %.4f, implied hits found %.4f", s.Backend,
			*pc.ImpliedHitRate, *pc.MeasuredHitRate, found)
		switch s.Backend {
		case "roseinfer":
			if found < 0.95 {
				t.Errorf("the server found %.1f%% of the implied prefix hits, want at least 95%%", found*100)
			}
		case "roseinfer+nocache":
			if found != 0 || *pc.CachedTokens != 0 {
				t.Errorf("without a prefix cache: %.1f%% found, %d cached tokens, want 0", found*100, *pc.CachedTokens)
			}
		}
	}
	// Per request: turn 2 continues turn 1 of its own session, is sent after
	// its answer and the think time, and carries the history as its prefix.
	reqs := on.ByBackend["roseinfer"].Runs[0].RequestMetrics
	byIndex := map[int]int{}
	for i, r := range reqs {
		byIndex[r.Index] = i
	}
	for _, r := range reqs {
		if r.Turn == 1 {
			if r.ParentIndex != nil || r.InputLen != 512 || *r.UsageCachedTokens != 0 {
				t.Errorf("turn 1 (row %d): parent %v, input %d, cached %d", r.Index, r.ParentIndex, r.InputLen,
					*r.UsageCachedTokens)
			}
			continue
		}
		p := reqs[byIndex[*r.ParentIndex]]
		if r.Turn != 2 || r.InputLen != 544 || *r.UsagePromptTokens != 544 || *r.PrefixImpliedTokens != 528 ||
			r.StartS < p.EndS+0.05 {
			t.Errorf("turn 2 (row %d): turn %d, input %d (server %d), implied %d, sent %.4f s after turn 1 ended",
				r.Index, r.Turn, r.InputLen, *r.UsagePromptTokens, *r.PrefixImpliedTokens, r.StartS-p.EndS)
		}
		if *r.UsageCachedTokens != 512 {
			t.Errorf("turn 2 (row %d): %d tokens cached, want 512", r.Index, *r.UsageCachedTokens)
		}
	}
	md, err := os.ReadFile(rep.SummaryPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "Prefix cache") || !strings.Contains(string(md), "97.0%") {
		t.Errorf("online_summary.md lacks the prefix-cache table:\n%s", md)
	}
}
