package cuda

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/roseinfer/roseinfer/engine/device"
)

// layout places a step's integer inputs in one int32 buffer, so one
// host-to-device copy carries the whole step. Offsets depend only on the
// counts, so a decode step of batch b always has the same device pointers:
// the CUDA graph captured for b replays over fresh inputs.
type layout struct {
	nTok, nSeq, nTiles, nSample, maxBlocks int

	tokens, pos, slots, srcRows          int // (nTok)
	qStart, qLen, ctx, newFrom, decSeqs  int // (nSeq)
	decRuns                              int // (2 nSeq): dec_row_head's runs of decSeqs
	tileSeq, tileQ0                      int // (nTiles)
	sampleRows, temp, topK, topP, seedLo int // (nSample)
	seedHi, index, banned, wantLP        int // (nSample)
	hostOut                              int // 2 words: device address of the stage's mapped (id, logprob) pairs
	btStride                             int // 1 word: maxBlocks, for kernels that read it (a graph replays any stride)
	blockTables                          int // (nSeq, maxBlocks): last, so its stride moves no other region
	total                                int
}

func newLayout(nTok, nSeq, nTiles, nSample, maxBlocks int) layout {
	l := layout{nTok: nTok, nSeq: nSeq, nTiles: nTiles, nSample: nSample, maxBlocks: maxBlocks}
	off := 0
	take := func(n int) int {
		o := off
		off += (n + 3) &^ 3 // 16-byte aligned regions
		return o
	}
	l.tokens, l.pos, l.slots, l.srcRows = take(nTok), take(nTok), take(nTok), take(nTok)
	l.qStart, l.qLen, l.ctx, l.newFrom, l.decSeqs = take(nSeq), take(nSeq), take(nSeq), take(nSeq), take(nSeq)
	l.decRuns = take(2 * nSeq)
	l.tileSeq, l.tileQ0 = take(nTiles), take(nTiles)
	l.sampleRows, l.temp, l.topK, l.topP = take(nSample), take(nSample), take(nSample), take(nSample)
	l.seedLo, l.seedHi, l.index, l.banned, l.wantLP = take(nSample), take(nSample), take(nSample), take(nSample), take(nSample)
	l.hostOut = take(2)
	l.btStride = take(1)
	l.blockTables = take(nSeq * maxBlocks)
	l.total = off
	return l
}

// stepPlan is a Batch turned into kernel inputs.
type stepPlan struct {
	lay        layout
	nDecode    int
	nPrefill   int    // tokens of prefill chunks (rows kv_write handles)
	seqOfRow   []int  // sample row -> index in Batch.Seqs, or -1 (a row sampled only because its graph samples every row)
	rowOfSeq   []int  // index in Batch.Seqs -> sample row or -1
	graphBatch int    // > 0: a padded decode step replayed from the graph of this size
	stage      int    // the staging the inputs came from
	inputs     devPtr // where they are on the device (that stage's devIn)
	// What the step computes, however it is laid out (spans name it):
	// sequences with a prompt chunk of several tokens, and one-token ones.
	chunkSeqs, oneTokenSeqs int
	// isGraphLaunch: the step was launched as a captured graph (runGraph
	// runs a size's first step eagerly and captures on the second).
	isGraphLaunch bool
}

// Query rows per prefill attention block: PREFILL_BR in attention.cu, FA_BR
// in attention_mma.cu.
const (
	prefillTileRows    = 128
	prefillTileRowsMMA = 64
)

// buildPlan validates b and writes its inputs into st.in (int32 words) and
// its plan into st.plan. rows (see chunkRows) lays the step out as one-token
// rows, each attended by the decode kernels: a chunk of n tokens becomes n
// consecutive rows of its sequence. graphSize > 0 (rows only) pads them to
// that many; the padding rows decode token 0 at position 0 into the scratch
// KV block.
func (d *Device) buildPlan(b *device.Batch, st *staging, rows bool, graphSize int) error {
	if graphSize > 0 && !rows {
		return fmt.Errorf("cuda: a graph step must be laid out as rows")
	}
	host, p := st.in, &st.plan
	B, maxT, V := d.kv.BlockSizeTokens, d.cfg.MaxSeqLen, d.cfg.VocabSize
	nTok, nTiles, nSample := 0, 0, 0
	for i := range b.Seqs {
		s := &b.Seqs[i]
		n := len(s.Tokens)
		if n == 0 {
			return fmt.Errorf("cuda: seq %d has no tokens", s.SeqID)
		}
		if s.StartPos < 0 || s.StartPos+n > maxT {
			return fmt.Errorf("cuda: seq %d covers positions [%d, %d), model max %d", s.SeqID, s.StartPos, s.StartPos+n, maxT)
		}
		if need := (s.StartPos + n + B - 1) / B; len(s.BlockTable) < need || len(s.BlockTable) > d.cache.maxBlocks {
			return fmt.Errorf("cuda: seq %d has %d blocks, needs %d (max %d)", s.SeqID, len(s.BlockTable), need, d.cache.maxBlocks)
		}
		nTok += n
		if n > 1 && !rows {
			nTiles += (n + d.path.prefillTile - 1) / d.path.prefillTile
		}
		if s.Sample {
			nSample++
		}
	}
	nSeq := len(b.Seqs)
	if rows {
		nSeq = nTok
		if graphSize > 0 {
			nTok, nSeq, nSample = graphSize, graphSize, graphSize
		}
	}
	if nTok > d.opts.MaxStepTokens || nSeq > d.opts.MaxSeqs {
		return fmt.Errorf("cuda: step of %d tokens / %d sequences exceeds the device's %d / %d (Options.MaxStepTokens/MaxSeqs)",
			nTok, nSeq, d.opts.MaxStepTokens, d.opts.MaxSeqs)
	}
	lay := newLayout(nTok, nSeq, nTiles, nSample, d.blockTableStride(b))
	p.lay, p.nDecode, p.nPrefill, p.graphBatch = lay, 0, 0, graphSize
	p.isGraphLaunch = false
	p.stage, p.inputs = st.index, st.devIn
	p.chunkSeqs, p.oneTokenSeqs = 0, 0
	p.seqOfRow, p.rowOfSeq = p.seqOfRow[:0], p.rowOfSeq[:0]
	if len(host) < lay.total {
		return fmt.Errorf("cuda: input staging of %d words, step needs %d", len(host), lay.total)
	}
	f32 := func(v float32) int32 { return int32(math.Float32bits(v)) }
	// Where the sampler stores the ids and logprobs: this stage's mapped
	// host memory (a graph replays with whichever stage's address).
	host[lay.hostOut], host[lay.hostOut+1] = int32(uint32(st.outDev)), int32(uint32(st.outDev>>32))
	host[lay.btStride] = int32(lay.maxBlocks)
	// seqEntry describes sequence entry e: its first row, rows, cached
	// tokens, first position of this step, and block table.
	seqEntry := func(e, row, n, ctx, from int, table []int32) error {
		host[lay.qStart+e], host[lay.qLen+e], host[lay.ctx+e], host[lay.newFrom+e] = int32(row), int32(n), int32(ctx), int32(from)
		bt := host[lay.blockTables+e*lay.maxBlocks : lay.blockTables+(e+1)*lay.maxBlocks]
		for j := range bt {
			bt[j] = d.cache.scratchBlock
			if j < len(table) {
				id := table[j]
				if id < 0 || int(id) >= d.kv.NumBlocks {
					return fmt.Errorf("block %d out of range [0, %d)", id, d.kv.NumBlocks)
				}
				bt[j] = id
			}
		}
		if n == 1 {
			host[lay.decSeqs+p.nDecode] = int32(e)
			p.nDecode++
		}
		return nil
	}
	// sampleAs makes row the next sample row, drawn with sequence si's
	// parameters (a dummy greedy draw for si < 0, whose result nobody reads).
	srow := 0
	sampleAs := func(row, si int) {
		host[lay.sampleRows+srow] = int32(row)
		host[lay.temp+srow], host[lay.topK+srow], host[lay.topP+srow] = 0, 0, f32(1)
		host[lay.seedLo+srow], host[lay.seedHi+srow], host[lay.index+srow] = 0, 0, 0
		host[lay.banned+srow], host[lay.wantLP+srow] = -1, 0
		p.seqOfRow = append(p.seqOfRow, si)
		if si >= 0 {
			s := &b.Seqs[si]
			pr := s.Params
			host[lay.temp+srow] = f32(pr.Temperature)
			host[lay.topK+srow] = int32(pr.TopK)
			host[lay.topP+srow] = f32(pr.TopP)
			host[lay.seedLo+srow] = int32(uint32(pr.Seed))
			host[lay.seedHi+srow] = int32(uint32(pr.Seed >> 32))
			host[lay.index+srow] = int32(s.SampleIndex)
			host[lay.banned+srow] = s.BannedToken
			if s.WantLogprob {
				host[lay.wantLP+srow] = 1
			}
			p.rowOfSeq[si] = srow
		}
		srow++
	}
	row, tile := 0, 0
	for i := range b.Seqs {
		s := &b.Seqs[i]
		n := len(s.Tokens)
		if !rows {
			if err := seqEntry(i, row, n, s.StartPos, s.StartPos, s.BlockTable); err != nil {
				return fmt.Errorf("cuda: seq %d: %w", s.SeqID, err)
			}
		}
		p.rowOfSeq = append(p.rowOfSeq, -1)
		if n > 1 {
			p.chunkSeqs++
		} else {
			p.oneTokenSeqs++
		}
		for k, tok := range s.Tokens {
			pos := s.StartPos + k
			if rows {
				// Row k of the chunk: a decode row at pos whose keys from
				// StartPos on come from this step's rows.
				if err := seqEntry(row, row, 1, pos, s.StartPos, s.BlockTable); err != nil {
					return fmt.Errorf("cuda: seq %d: %w", s.SeqID, err)
				}
			}
			host[lay.pos+row] = int32(pos)
			host[lay.srcRows+row] = -1
			switch {
			case tok >= 0 && int(tok) < V:
				host[lay.tokens+row] = tok
			case tok < 0 && n == 1:
				// Overlap: the token this sequence sampled in the previous step, still on the GPU.
				prev, ok := d.queue.prevRow[s.SeqID]
				if !ok {
					return fmt.Errorf("cuda: seq %d asks for its previous sample but the last step did not sample it", s.SeqID)
				}
				host[lay.tokens+row] = 0
				host[lay.srcRows+row] = int32(prev)
			default:
				return fmt.Errorf("cuda: seq %d token %d outside vocab %d", s.SeqID, tok, V)
			}
			host[lay.slots+row] = -1 // the decode kernels append their row's K/V themselves
			if d.q3 != nil || (n > 1 && !rows) {
				host[lay.slots+row] = s.BlockTable[pos/B]*int32(B) + int32(pos%B)
			}
			if n > 1 && !rows {
				p.nPrefill++
			}
			if graphSize > 0 && (k < n-1 || !s.Sample) {
				sampleAs(row, -1) // a graph samples every row
			}
			row++
		}
		if n > 1 && !rows {
			for q0 := 0; q0 < n; q0 += d.path.prefillTile {
				host[lay.tileSeq+tile], host[lay.tileQ0+tile] = int32(i), int32(q0)
				tile++
			}
		}
		if s.Sample {
			sampleAs(row-1, i)
		}
	}
	// Padding rows of a graph batch: greedy decode of token 0 at position 0
	// into the scratch block, results ignored.
	for ; row < graphSize; row++ {
		if err := seqEntry(row, row, 1, 0, 0, nil); err != nil {
			return err
		}
		host[lay.tokens+row], host[lay.pos+row], host[lay.slots+row], host[lay.srcRows+row] = 0, 0, -1, -1
		if d.q3 != nil {
			host[lay.slots+row] = d.cache.scratchBlock * int32(B)
		}
		sampleAs(row, -1)
	}
	if d.q3 != nil {
		entries, runs := host[lay.decSeqs:lay.decSeqs+p.nDecode], host[lay.decRuns:lay.decRuns+2*p.nDecode]
		if d.opts.force.decodeInBatchOrder {
			oneRun(runs)
		} else {
			longestFirst(entries, runs, host[lay.ctx:lay.ctx+lay.nSeq])
		}
	}
	return nil
}

// longestFirst orders a step's decode entries by cached context, longest
// first (ties in batch order), and writes each entry's run of equal context
// as (first entry, length) into runs. The GPU starts blocks in index order,
// and the decode-row attention's blocks follow this order (dec_row_head in
// common.cuh), so the long rows start first and the grid ends with short
// ones that finish together, instead of a few long rows running on an
// otherwise idle GPU: longest-processing-time-first list scheduling, for the
// mixed contexts of a serving batch. Within a run of equal contexts the
// blocks keep one KV head at a time, the order that was faster there.
func longestFirst(entries, runs, ctx []int32) {
	slices.SortStableFunc(entries, func(a, b int32) int { return cmp.Compare(ctx[b], ctx[a]) })
	for first := 0; first < len(entries); {
		end := first + 1
		for end < len(entries) && ctx[entries[end]] == ctx[entries[first]] {
			end++
		}
		for j := first; j < end; j++ {
			runs[2*j], runs[2*j+1] = int32(first), int32(end-first)
		}
		first = end
	}
}

// oneRun makes every entry one run: the attention's blocks in batch order,
// one KV head at a time.
func oneRun(runs []int32) {
	for j := 0; j < len(runs); j += 2 {
		runs[j], runs[j+1] = 0, int32(len(runs)/2)
	}
}

// blockTableStride is the block-table row length of a step of b: the
// cache's maxBlocks for the kernels that take it as an argument (GPT-2's,
// captured in graphs), else the longest table of b rounded up to 16, at
// most maxBlocks (what the staging holds). Qwen3's 40,960 positions are 2,560 blocks of 16 tokens: a
// full-length row per sequence would upload 1.3 MB of tables for a decode
// step of 128, where the tables in use take a few KB.
func (d *Device) blockTableStride(b *device.Batch) int {
	if d.q3 == nil {
		return d.cache.maxBlocks
	}
	n := 1
	for i := range b.Seqs {
		n = max(n, len(b.Seqs[i].BlockTable))
	}
	return min(ceilDiv(n, 16)*16, d.cache.maxBlocks)
}

// chunkRows is how many one-token rows b takes when every sequence brings at
// most Options.ChunkRows tokens (decode steps, and prefills of a prompt's
// short uncached tail, alone or beside decodes), so that the step runs
// through the decode kernels and, padded, a captured graph; 0 otherwise:
// a chunk's rows each attend over the whole context, which pays only for
// short chunks.
func (d *Device) chunkRows(b *device.Batch) int {
	rows := 0
	for i := range b.Seqs {
		n := len(b.Seqs[i].Tokens)
		if n > 1 && n > d.opts.ChunkRows {
			return 0
		}
		rows += n
	}
	if rows == 0 || rows > d.opts.MaxSeqs {
		return 0
	}
	return rows
}

// decodeOnly reports whether every row of the step is one sequence's one
// token (graph padding included): no row reads a key another row of the
// step writes.
func (p *stepPlan) decodeOnly() bool {
	return p.lay.nTok > 0 && p.lay.nTiles == 0 && p.chunkSeqs == 0 && p.nDecode == p.lay.nTok
}
