package servers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/results"
	"github.com/roseinfer/roseinfer/traces"
)

// Specs turns --backends, --variant and --base-url into run specs, in run
// order; c is the workload's context, which sizes third-party servers. Names no descriptor exists for yet, and backends that cannot
// run on this machine, are returned as skipped backends, so the rest still
// run and the exit code says something was left out. Third-party specs
// read o.ServerCPUs, so the CPU split must be settled first
// (ApplyCPUSplit). bench online's profile stage profiles the same specs.
func Specs(ctx context.Context, o *Options, c traces.Context) ([]backend.Spec, []*results.Backend, error) {
	if o.BaseURL != "" {
		label := "openai"
		if len(o.Backends) == 1 && o.Backends[0] != "roseinfer" {
			label = o.Backends[0]
		}
		return []backend.Spec{backend.OpenAI(label, o.BaseURL, o.APIKey)}, nil, nil
	}
	var specs []backend.Spec
	var skipped []*results.Backend
	seen := map[string]bool{}
	for _, name := range o.Backends {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		if name != "roseinfer" {
			spec, skip, err := thirdPartySpec(ctx, name, o, c)
			if err != nil {
				return nil, nil, err
			}
			if skip != nil {
				skipped = append(skipped, skip)
			} else {
				specs = append(specs, spec)
			}
			continue
		}
		bin := o.RoseinferBin
		if bin == "" {
			var err error
			if bin, err = backend.FindRoseinfer(ctx); err != nil {
				return nil, nil, err
			}
		}
		env := map[string]string{}
		if o.GPU != "" {
			env["CUDA_VISIBLE_DEVICES"] = o.GPU
		}
		common := backend.RoseinferOptions{Binary: bin, Device: o.Device, Model: o.Model, Flags: o.ServerArgs, Env: env,
			APIKey: o.APIKey}
		specs = append(specs, backend.Roseinfer(common))
		for _, v := range o.Variants {
			label, flags, err := backend.ParseVariant(v)
			if err != nil {
				return nil, nil, err
			}
			if seen[label] {
				return nil, nil, fmt.Errorf("--variant: label %s given twice", label)
			}
			seen[label] = true
			vo := common
			vo.Label = label
			vo.Flags = append(append([]string{}, o.ServerArgs...), flags...)
			specs = append(specs, backend.Roseinfer(vo))
		}
	}
	if len(o.Variants) > 0 && !seen["roseinfer"] {
		return nil, nil, errors.New("--variant needs roseinfer in --backends")
	}
	return specs, skipped, nil
}
