package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/engine/sample"
)

// parseSampling reads -sampling: "greedy", or "T<temperature>/p<top_p>/k<top_k>"
// (k0: no top-k, p1: no top-p), e.g. T0.7/p0.9/k50 (the offline default) or
// T0.6/p1/k0 (nano-vllm's protocol).
func parseSampling(s string) (sample.Params, error) {
	if s == "greedy" {
		return sample.Params{}, nil
	}
	bad := func(why string) (sample.Params, error) {
		return sample.Params{}, fmt.Errorf("-sampling %q: %s (want greedy or T<temperature>/p<top_p>/k<top_k>, e.g. T0.7/p0.9/k50)", s, why)
	}
	parts := strings.Split(s, "/")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "T") || !strings.HasPrefix(parts[1], "p") || !strings.HasPrefix(parts[2], "k") {
		return bad("three fields T, p and k")
	}
	t, err := strconv.ParseFloat(parts[0][1:], 32)
	if err != nil || !(t > 0 && t <= 100) {
		return bad("temperature must be a number in (0, 100]")
	}
	p, err := strconv.ParseFloat(parts[1][1:], 32)
	if err != nil || !(p > 0 && p <= 1) {
		return bad("top_p must be a number in (0, 1]")
	}
	k, err := strconv.Atoi(parts[2][1:])
	if err != nil || k < 0 || k > 1<<20 {
		return bad("top_k must be an integer in [0, 1048576]")
	}
	return sample.Params{Temperature: float32(t), TopP: float32(p), TopK: k}, nil
}
