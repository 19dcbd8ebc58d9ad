package model

import (
	"hash/fnv"
	"math"
	"runtime"
	"sync"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// InitRandom returns random weights drawn as c's family says
// (arch.Family.InitRandom: GPT-2's follows Hugging Face's initialisation).
//
// The result is a pure function of (cfg, seed): element i of checkpoint
// tensor "name", counted in the file's layout, is drawn from a
// counter-based generator keyed by (seed, name, i), independent of
// goroutine scheduling, platform and Go version (math.Log/Sincos can differ
// in the last bit across architectures, far below any test tolerance), and
// of the canonical layout in memory.
func InitRandom(cfg Config, seed uint64) (*Weights, error) {
	w, err := NewWeights(cfg)
	if err != nil {
		return nil, err
	}
	f, _ := arch.Lookup(w.Config.Family)
	// A job fills elements [first, last) of one tensor. A tensor the file
	// stores transposed is one job, drawn in file layout into the worker's
	// scratch and then transposed into place.
	type job struct {
		ft          *fileTensor
		key         uint64
		mean, std   float64
		first, last int // element range, even-aligned
	}
	const chunk = 1 << 20
	var jobs []job
	fts := fileTensors(w)
	for i := range fts {
		ft := &fts[i]
		mean, std := f.InitRandom(w.Config, ft.name)
		key := tensorKey(seed, ft.name)
		if ft.transposed {
			jobs = append(jobs, job{ft, key, mean, std, 0, len(ft.data)})
			continue
		}
		for first := 0; first < len(ft.data); first += chunk {
			jobs = append(jobs, job{ft, key, mean, std, first, min(first+chunk, len(ft.data))})
		}
	}
	var wg sync.WaitGroup
	next := make(chan job)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			var scratch []float32
			for j := range next {
				if !j.ft.transposed {
					fillNormal(j.ft.data[j.first:j.last], j.first, j.key, j.mean, j.std)
					continue
				}
				if cap(scratch) < len(j.ft.data) {
					scratch = make([]float32, len(j.ft.data))
				}
				src := scratch[:len(j.ft.data)]
				fillNormal(src, 0, j.key, j.mean, j.std)
				j.ft.load(src)
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
