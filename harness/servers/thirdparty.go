package servers

import (
	"context"
	"errors"
	"fmt"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/results"
	"github.com/roseinfer/roseinfer/traces"
)

// thirdPartySpec builds the spec of a backend other than roseinfer. One that
// cannot run on this machine (no environment, no llama-server, no
// --backend-cmd) comes back as a skipped record naming the fix, so the run
// goes on with the others; a name nobody knows is skipped too. err is for
// bad flags only.
func thirdPartySpec(ctx context.Context, name string, o *Options, c traces.Context) (backend.Spec, *results.Backend, error) {
	if !backend.IsThirdParty(name) {
		return backend.Spec{}, &results.Backend{Backend: name, Skipped: true,
			Error: fmt.Sprintf("backend %q is not supported by this build (roseinfer, vllm, sglang, trtllm, llama, custom, or --base-url for a running server)", name)}, nil
	}
	spec, err := backend.ThirdParty(ctx, name, &o.ThirdParty, backend.ThirdPartyRun{
		Model: o.Model, ContextLen: c.ServerMaxLen(), GPU: o.GPU, ServerCPUs: o.ServerCPUs, Root: o.EnvsRoot,
		APIKey: o.APIKey})
	var u *backend.Unavailable
	if errors.As(err, &u) {
		return backend.Spec{}, u.Record(), nil
	}
	return spec, nil, err
}
