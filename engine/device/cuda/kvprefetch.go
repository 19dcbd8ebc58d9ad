package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The decode-row attention reads every cached key and value of its rows
// from DRAM (at batch 128 and context 300, 157 MB a layer), while the norms
// and projections between two attentions are bound by their latency and
// leave most of the memory bandwidth idle. So a decode-only step forks, once
// a layer, a q3_kv_prefetch launch onto a stream of its own: it asks L2 for
// the keys and values that the next layer's attention reads first (the
// blocks the GPU starts first, up to a byte budget), and the chain of
// kernels goes on without waiting for it. The fork follows the previous
// layer's gate|up projection: early enough for the bytes to arrive, late
// enough that the weights streaming through L2 in between (down_proj's and
// q|k|v's, 14 MB) do not push them out. The step joins the side stream
// before its LM head, so a captured graph has one branch a layer and ends
// where it ended.
//
// On the H100 (cudabench, context 300, overlapped step, two rounds against
// the same binary without it): batch 64 1.929-1.938 ms against 2.008-2.014,
// 96 2.294-2.300 against 2.375-2.401, 128 2.700-2.706 against 2.813-2.838,
// 192 3.785-3.816 against 3.820-3.843; offline 128 x 256 -> 64 (bench
// offline) 34,537-34,923 against 33,435-33,737 tok/s. Not kept: 8, 16, 20
// and 24 MiB (16: batch 64 1.948-1.955, offline 34,517-34,678), the L2
// evict_last policy (batch 1 0.859-0.866 against 0.843-0.844), the fork
// after o_proj (batch 128 2.991: the bytes are evicted before they are read)
// or after down_proj (2.855: the prefetch's blocks still hold SM slots when
// the attention starts), and steps outside 33-192 rows (batch 32 1.596-1.603
// against 1.589-1.590, 256 4.742-4.773 against 4.707-4.720).

// kvPrefetchMB is the budget a layer, and kvPrefetchMinRows and
// kvPrefetchMaxRows the decode-only steps that prefetch.
const (
	kvPrefetchMB      = 12
	kvPrefetchMinRows = 33
	kvPrefetchMaxRows = 192
)

// kvPrefetch is the rotary block's side stream and its fork and join
// events (zero where prefetching is off).
type kvPrefetch struct {
	stream, fork, join uintptr
	budget             int  // (key, value) cache-block pairs a layer
	anyRows            bool // every decode-only step prefetches (tests)
	forks              int  // launches enqueued or captured (tests check that the path ran)
}

// initKVPrefetch sets up the side stream unless the lab or a test turned it
// off. Only Hopper takes it: the kernel's bulk prefetches are sm_90's, and
// it is measured nowhere else.
func (d *Device) initKVPrefetch() error {
	q, f := d.q3, d.opts.force
	if q.f32 || d.g.ccMajor < 9 || f.kvPrefetchMB < 0 {
		return nil
	}
	mb := kvPrefetchMB
	if f.kvPrefetchMB > 0 {
		mb = f.kvPrefetchMB
	}
	pair := 2 * d.kv.BlockSizeTokens * q.HD * q.actBytes()
	pf := kvPrefetch{budget: mb << 20 / pair, anyRows: f.kvPrefetchAnyRows}
	drv := d.g.drv
	if err := drv.call("cuStreamCreate", drv.cuStreamCreate, uintptr(unsafe.Pointer(&pf.stream)), streamNonBlocking); err != nil {
		return fmt.Errorf("cuda: KV prefetch stream: %w", err)
	}
	q.pf = pf // freeKVPrefetch releases what is set from here on
	var err error
	if q.pf.fork, err = drv.eventCreate(eventDisableTiming); err != nil {
		return err
	}
	q.pf.join, err = drv.eventCreate(eventDisableTiming)
	return err
}

// freeKVPrefetch waits for the side stream and releases it and its events.
func (q *rotaryState) freeKVPrefetch(drv *driver) {
	for _, e := range []uintptr{q.pf.fork, q.pf.join} {
		if e != 0 {
			purego.SyscallN(drv.cuEventDestroy, e)
		}
	}
	if q.pf.stream != 0 {
		_ = drv.streamSync(q.pf.stream)
		purego.SyscallN(drv.cuStreamDestroy, q.pf.stream)
	}
	q.pf = kvPrefetch{}
}

// prefetchesKV reports whether the step prefetches its attention's keys and
// values: a decode-only step (every row's context is in the cache before
// the step) of kvPrefetchMinRows to kvPrefetchMaxRows rows, with the side
// stream set up.
func (s *rotaryStep) prefetchesKV() bool {
	n, pf := s.p.nDecode, &s.q.pf
	return pf.stream != 0 && s.p.decodeOnly() && n > 0 && (pf.anyRows || n >= kvPrefetchMinRows && n <= kvPrefetchMaxRows)
}

// prefetchKV forks layer l's prefetch after the kernels enqueued so far
// (layer 0's after the embedding, each next one's after gate|up).
func (s *rotaryStep) prefetchKV(l int) {
	if s.err != nil || l >= len(s.q.w.layers) || !s.prefetch {
		return
	}
	d, q, p, lay, g := s.d, s.q, s.p, &s.p.lay, s.d.g
	if s.err = g.drv.eventRecord(q.pf.fork, g.stream); s.err != nil {
		return
	}
	if s.err = g.drv.streamWaitEvent(q.pf.stream, q.pf.fork); s.err != nil {
		return
	}
	kc, vc := d.kvLayer(l)
	items := p.nDecode * q.NKV
	// Off the chain: it waits for nothing of the step's but the fork.
	s.err = g.launchOn(q.pf.stream, false, q.k.kvPrefetch, ceilDiv(items, 4), 1, 1, 128, 0,
		argPtr(kc), argPtr(vc), argPtr(p.in(lay.pos)), argPtr(p.in(lay.decSeqs)), argPtr(p.in(lay.decRuns)),
		argPtr(p.in(lay.qStart)), argPtr(p.in(lay.blockTables)), argPtr(p.in(lay.btStride)),
		argInt(p.nDecode), argInt(q.NKV), argInt(d.kv.BlockSizeTokens), argInt(q.pf.budget))
	if s.err == nil {
		s.forked = true
		q.pf.forks++
	}
}

// joinKV makes the step's remaining kernels wait for its prefetches, so
// that a step (and a captured graph) ends with its side stream.
func (s *rotaryStep) joinKV() {
	if s.err != nil || !s.forked {
		return
	}
	g := s.d.g
	if s.err = g.drv.eventRecord(s.q.pf.join, s.q.pf.stream); s.err == nil {
		s.err = g.drv.streamWaitEvent(g.stream, s.q.pf.join)
	}
	s.forked = false
}
