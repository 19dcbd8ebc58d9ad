package offline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/results"
)

// runThirdParty measures vLLM, SGLang or TensorRT-LLM with its offline
// driver inside its environment, on the same prompt token ids as roseinfer.
// A backend that cannot run here, or whose driver fails, comes back as an
// error with the zeroed result (command, interpreter, log path and versions
// in extra); the run goes on with the next backend.
func (o *Options) runThirdParty(ctx context.Context, runDir, name string, b *Batch) (results.OfflineResult, error) {
	if !b.Out.fixed() {
		// The Python drivers take one output_len for every prompt.
		return results.OfflineResult{}, fmt.Errorf("output length ranges are not supported by the %s driver yet", name)
	}
	res := backend.RunOffline(ctx, name, &o.ThirdParty, backend.ThirdPartyRun{Model: o.Model, Root: o.EnvsRoot},
		backend.OfflineSettings{Label: name, Prompts: b.Prompts, OutputLen: b.Out.Lo, Temperature: o.Temperature,
			TopP: o.TopP, TopK: o.TopK, IgnoreEOS: o.IgnoreEOS, Seed: o.Seed, MaxBatchSize: o.MaxBatchSize,
			WarmupPrompts: o.WarmupPrompts, RunDir: runDir})
	msg, _ := res.Extra["error"].(string)
	if msg == "" {
		return res, nil
	}
	if res.Extra["skipped"] == true {
		return res, fmt.Errorf("skipped: %s (fix: %v)", msg, res.Extra["fix_hint"])
	}
	return res, errors.New(strings.TrimSpace(msg))
}
