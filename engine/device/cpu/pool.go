package cpu

import (
	"sync"
	"sync/atomic"
)

// pool runs the parallel loops of the forward on a fixed set of goroutines:
// the caller (the engine loop) plus numWorkers-1 helpers started once, so a
// step spawns no goroutines. Work is handed out in chunks through an atomic
// counter, so a helper that the OS does not schedule (the cores are shared
// with the server and the benchmark client) costs little: the others take
// its chunks.
type pool struct {
	numWorkers int
	wake       []chan struct{} // one per helper
	done       chan struct{}
	closeOnce  sync.Once

	// The job in flight, written before the wake-ups (channel sends order
	// these writes before the helpers' reads).
	fn    func(worker, lo, hi int)
	n     int
	chunk int
	next  atomic.Int64
}

func newPool(numWorkers int) *pool {
	p := &pool{numWorkers: max(1, numWorkers), done: make(chan struct{})}
	for w := 1; w < p.numWorkers; w++ {
		c := make(chan struct{})
		p.wake = append(p.wake, c)
		go func() {
			for range c {
				p.runChunks(w)
				p.done <- struct{}{}
			}
		}()
	}
	return p
}

// parallel calls fn(worker, lo, hi) over [0, n) in chunks whose bounds are
// multiples of align (except the end), no smaller than minChunk; worker is in
// [0, numWorkers) and identifies per-worker scratch. It returns when all
// chunks are done. Small loops run inline.
func (p *pool) parallel(n, minChunk, align int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	if p.numWorkers == 1 || n <= minChunk {
		fn(0, 0, n)
		return
	}
	// About four chunks per worker balances load without much overhead.
	chunk := max(minChunk, (n+4*p.numWorkers-1)/(4*p.numWorkers))
	chunk = (chunk + align - 1) / align * align
	p.fn, p.n, p.chunk = fn, n, chunk
	p.next.Store(0)
	for _, c := range p.wake {
		c <- struct{}{}
	}
	p.runChunks(0)
	for range p.wake {
		<-p.done
	}
	p.fn = nil
}

func (p *pool) runChunks(worker int) {
	for {
		lo := int(p.next.Add(int64(p.chunk))) - p.chunk
		if lo >= p.n {
			return
		}
		p.fn(worker, lo, min(lo+p.chunk, p.n))
	}
}

// close stops the helpers; safe to call twice.
func (p *pool) close() {
	p.closeOnce.Do(func() {
		for _, c := range p.wake {
			close(c)
		}
	})
}
