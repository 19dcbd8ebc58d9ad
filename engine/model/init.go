package model

import (
	"hash/fnv"
	"math"
	"runtime"
	"strings"
	"sync"
)

// InitRandom returns weights drawn like Hugging Face initialises a fresh
// GPT2LMHeadModel (GPT2PreTrainedModel._init_weights), with one deliberate
// difference:
//
//   - wte, wpe, c_attn and c_fc weights: normal, std 0.02 (initializer_range);
//   - attn.c_proj and mlp.c_proj weights: normal, std 0.02/sqrt(2L) (GPT-2's
//     scaling of residual projections);
//   - difference: HF sets layer-norm weights to 1 and every bias to 0. Here
//     layer-norm weights are 1 + 0.1·N(0,1) and all biases (layer-norm and
//     linear) 0.05·N(0,1), so that a forward which drops a bias, swaps the
//     q/k/v split or skips a layer-norm scale disagrees with HF's and the
//     golden tests catch it.
//
// The result is a pure function of (cfg, seed): element i of tensor "name" is
// drawn from a counter-based generator keyed by (seed, name, i), independent of
// goroutine scheduling, platform and Go version (math.Log/Sincos can differ in
// the last bit across architectures, far below any test tolerance).
func InitRandom(cfg Config, seed uint64) (*Weights, error) {
	w, err := NewWeights(cfg)
	if err != nil {
		return nil, err
	}
	projStd := 0.02 / math.Sqrt(2*float64(cfg.NumLayers))
	type job struct {
		data        []float32
		key         uint64
		mean, std   float64
		first, last int // element range, even-aligned
	}
	const chunk = 1 << 20
	var jobs []job
	for _, t := range w.Tensors() {
		mean, std := 0.0, 0.02
		switch {
		case strings.HasSuffix(t.Name, "c_proj.weight"):
			std = projStd
		case strings.Contains(t.Name, "ln_") && strings.HasSuffix(t.Name, ".weight"):
			mean, std = 1, 0.1
		case strings.HasSuffix(t.Name, ".bias"):
			std = 0.05
		}
		key := tensorKey(seed, t.Name)
		for first := 0; first < len(t.Data); first += chunk {
			jobs = append(jobs, job{t.Data, key, mean, std, first, min(first+chunk, len(t.Data))})
		}
	}
	var wg sync.WaitGroup
	next := make(chan job)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range next {
				fillNormal(j.data[j.first:j.last], j.first, j.key, j.mean, j.std)
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return w, nil
}

// tensorKey mixes the seed with the tensor's name.
func tensorKey(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return mix64(seed ^ mix64(h.Sum64()))
}

// fillNormal writes mean + std·N(0,1) for elements first, first+1, ... of a
// tensor; elements 2k and 2k+1 are the Box-Muller pair of counter k, so first
// must be even (jobs start at multiples of the chunk size).
func fillNormal(dst []float32, first int, key uint64, mean, std float64) {
	for i := 0; i < len(dst); i += 2 {
		k := uint64((first + i) / 2)
		u1 := unitOpen(mix64(key + (2*k+1)*golden64))
		u2 := unitOpen(mix64(key + (2*k+2)*golden64))
		r := math.Sqrt(-2 * math.Log(u1))
		s, c := math.Sincos(2 * math.Pi * u2)
		dst[i] = float32(mean + std*r*c)
		if i+1 < len(dst) {
			dst[i+1] = float32(mean + std*r*s)
		}
	}
}

// golden64 is 2^64/φ, splitmix64's increment.
const golden64 = 0x9E3779B97F4A7C15

// mix64 is splitmix64's finaliser: a bijective 64-bit hash.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// unitOpen maps 64 random bits to (0, 1], never 0, so log is finite.
func unitOpen(bits uint64) float64 { return float64(bits>>11+1) * 0x1p-53 }
