package cuda

import (
	"math"
	"slices"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// planDevice is a Device with only what buildPlan reads (no GPU).
func planDevice() *Device {
	return &Device{
		cfg:   model.Config{MaxSeqLen: 256, VocabSize: 1000},
		kv:    device.KVConfig{NumBlocks: 64, BlockSizeTokens: 16},
		opts:  withDefaults(Options{MaxSeqs: 32, MaxStepTokens: 512}),
		cache: kvCache{maxBlocks: 16, scratchBlock: 63},
		path:  pathChoice{prefillTile: prefillTileRowsMMA},
		queue: stepQueue{prevRow: map[uint64]int{7: 2}},
	}
}

// TestBuildPlanChunkRows lays a step out as one-token rows: a decode, a
// 3-token chunk over a cached prefix that samples, and a 2-token chunk that
// does not, padded to a graph of 8 rows. Every row must be a decode entry
// with its own position and the chunk's first position as new_from, the
// sampled sequences' results must map to their last rows, and every other
// row must get a dummy greedy draw.
func TestBuildPlanChunkRows(t *testing.T) {
	d := planDevice()
	st := &staging{in: make([]int32, 1<<14), outDev: 0x1234_5678_9abc}
	p := sample.Params{Temperature: 0.7, TopK: 50, TopP: 0.9, Seed: 99}
	b := &device.Batch{Seqs: []device.Seq{
		{SeqID: 7, Tokens: []int32{device.FromPrevious}, StartPos: 40, BlockTable: []int32{1, 2, 3}, Sample: true, Params: p, BannedToken: -1},
		{SeqID: 8, Tokens: []int32{11, 12, 13}, StartPos: 30, BlockTable: []int32{4, 5, 6}, Sample: true, Params: p, SampleIndex: 0, BannedToken: -1},
		{SeqID: 9, Tokens: []int32{21, 22}, StartPos: 0, BlockTable: []int32{9}, Sample: false, BannedToken: -1},
	}}
	rows := d.chunkRows(b)
	if rows != 6 {
		t.Fatalf("chunkRows = %d, want 6", rows)
	}
	if err := d.buildPlan(b, st, true, 8); err != nil {
		t.Fatal(err)
	}
	pl, in := &st.plan, st.in
	lay := pl.lay
	if lay.nTok != 8 || lay.nSeq != 8 || lay.nSample != 8 || lay.nTiles != 0 || pl.nPrefill != 0 || pl.nDecode != 8 {
		t.Fatalf("layout %+v, nPrefill %d, nDecode %d: want 8 rows, all decode entries", lay, pl.nPrefill, pl.nDecode)
	}
	// row: position, new_from, token, sequence entry's first block
	want := []struct{ pos, from, tok, blk0 int32 }{
		{40, 40, 0, 1}, {30, 30, 11, 4}, {31, 30, 12, 4}, {32, 30, 13, 4}, {0, 0, 21, 9}, {1, 0, 22, 9}, {0, 0, 0, 63}, {0, 0, 0, 63},
	}
	for r, w := range want {
		got := []int32{in[lay.pos+r], in[lay.ctx+r], in[lay.newFrom+r], in[lay.tokens+r], in[lay.blockTables+r*d.cache.maxBlocks],
			in[lay.qStart+r], in[lay.qLen+r], in[lay.decSeqs+r], in[lay.slots+r], in[lay.sampleRows+r]}
		exp := []int32{w.pos, w.pos, w.from, w.tok, w.blk0, int32(r), 1, int32(r), -1, int32(r)}
		if !slices.Equal(got, exp) {
			t.Errorf("row %d: (pos, ctx, new_from, token, block 0, q_start, q_len, dec_seq, slot, sample row) = %v, want %v", r, got, exp)
		}
	}
	if pl.chunkSeqs != 2 || pl.oneTokenSeqs != 1 {
		t.Errorf("chunk sequences %d, one-token sequences %d: want 2 and 1 (the step is mixed)", pl.chunkSeqs, pl.oneTokenSeqs)
	}
	if in[lay.srcRows] != 2 {
		t.Errorf("decode row takes the previous step's sample row %d, want 2", in[lay.srcRows])
	}
	if !slices.Equal(pl.rowOfSeq, []int{0, 3, -1}) {
		t.Errorf("rowOfSeq = %v, want [0 3 -1]", pl.rowOfSeq)
	}
	if !slices.Equal(pl.seqOfRow, []int{0, -1, -1, 1, -1, -1, -1, -1}) {
		t.Errorf("seqOfRow = %v, want [0 -1 -1 1 -1 -1 -1 -1]", pl.seqOfRow)
	}
	for r := range 8 {
		temp := math.Float32frombits(uint32(in[lay.temp+r]))
		real := r == 0 || r == 3
		if real != (temp == 0.7) || (!real && (temp != 0 || in[lay.topK+r] != 0 || in[lay.banned+r] != -1)) {
			t.Errorf("sample row %d: temperature %v top-k %d banned %d", r, temp, in[lay.topK+r], in[lay.banned+r])
		}
	}
	if got := uint64(uint32(in[lay.hostOut])) | uint64(uint32(in[lay.hostOut+1]))<<32; got != uint64(st.outDev) {
		t.Errorf("host output address %#x, want %#x", got, st.outDev)
	}
}

// TestChunkRowsLimits: a chunk longer than Options.ChunkRows, a step with
// more rows than MaxSeqs, or ChunkRows < 0 with any chunk keep the prefill
// layout; one-token sequences are always rows.
func TestChunkRowsLimits(t *testing.T) {
	d := planDevice()
	seq := func(n int) device.Seq { return device.Seq{Tokens: make([]int32, n)} }
	batch := func(ns ...int) *device.Batch {
		b := &device.Batch{}
		for _, n := range ns {
			b.Seqs = append(b.Seqs, seq(n))
		}
		return b
	}
	for _, tc := range []struct {
		chunkRows int
		ns        []int
		want      int
	}{
		{0, []int{1, 16, 1}, 18},
		{0, []int{1, 17}, 0},
		{0, []int{16, 16, 1}, 0}, // 33 rows > MaxSeqs 32
		{-1, []int{1, 1}, 2},
		{-1, []int{1, 2}, 0},
		{4, []int{4, 1}, 5},
		{4, []int{5}, 0},
	} {
		d.opts.ChunkRows = tc.chunkRows
		d.opts = withDefaults(d.opts)
		if got := d.chunkRows(batch(tc.ns...)); got != tc.want {
			t.Errorf("ChunkRows %d, chunks %v: %d rows, want %d", tc.chunkRows, tc.ns, got, tc.want)
		}
	}
	// The prefill layout: the chunk gets prefill tiles and KV slots.
	d.opts.ChunkRows = -1
	st := &staging{in: make([]int32, 1<<14)}
	b := &device.Batch{Seqs: []device.Seq{{SeqID: 1, Tokens: []int32{5, 6}, StartPos: 16, BlockTable: []int32{3, 4}, Sample: true}}}
	if err := d.buildPlan(b, st, false, 0); err != nil {
		t.Fatal(err)
	}
	if st.plan.nPrefill != 2 || st.plan.nDecode != 0 || st.plan.lay.nTiles != 1 || st.in[st.plan.lay.slots] != 4*16 {
		t.Errorf("prefill layout: nPrefill %d nDecode %d tiles %d slot %d", st.plan.nPrefill, st.plan.nDecode, st.plan.lay.nTiles, st.in[st.plan.lay.slots])
	}
	if err := d.buildPlan(b, st, false, 8); err == nil {
		t.Error("a graph step laid out as a prefill: no error")
	}
}

// TestBuildPlanLongestFirst: the rotary block's decode entries go to the
// attention longest context first (graph padding, at context 0, last; ties
// in batch order), each with its run of equal context (first entry,
// length); GPT-2's stay in batch order, and the rotary block's under the
// lab's batchorder switch, as one run.
func TestBuildPlanLongestFirst(t *testing.T) {
	b := &device.Batch{}
	for i, start := range []int{40, 100, 7, 100, 63} {
		b.Seqs = append(b.Seqs, device.Seq{SeqID: uint64(i), Tokens: []int32{1}, StartPos: start,
			BlockTable: []int32{1, 2, 3, 4, 5, 6, 7}, Sample: true, BannedToken: -1})
	}
	decodeOrder := func(d *Device, graph int) (entries, runs []int32) {
		t.Helper()
		st := &staging{in: make([]int32, 1<<14)}
		if err := d.buildPlan(b, st, graph > 0, graph); err != nil {
			t.Fatal(err)
		}
		lay, n := st.plan.lay, st.plan.nDecode
		return slices.Clone(st.in[lay.decSeqs : lay.decSeqs+n]), slices.Clone(st.in[lay.decRuns : lay.decRuns+2*n])
	}
	rotary := planDevice()
	rotary.q3 = &rotaryState{}
	for _, tc := range []struct {
		name       string
		d          *Device
		graph      int
		want, runs []int32
		checkRuns  bool
		batchOrder bool
	}{
		{"rotary", rotary, 0, []int32{1, 3, 4, 0, 2}, []int32{0, 2, 0, 2, 2, 1, 3, 1, 4, 1}, true, false},
		{"rotary graph of 8", rotary, 8, []int32{1, 3, 4, 0, 2, 5, 6, 7},
			[]int32{0, 2, 0, 2, 2, 1, 3, 1, 4, 1, 5, 3, 5, 3, 5, 3}, true, false},
		{"rotary batchorder", rotary, 0, []int32{0, 1, 2, 3, 4}, []int32{0, 5, 0, 5, 0, 5, 0, 5, 0, 5}, true, true},
		{"gpt-2", planDevice(), 0, []int32{0, 1, 2, 3, 4}, nil, false, false},
	} {
		tc.d.opts.force.decodeInBatchOrder = tc.batchOrder
		entries, runs := decodeOrder(tc.d, tc.graph)
		if !slices.Equal(entries, tc.want) || (tc.checkRuns && !slices.Equal(runs, tc.runs)) {
			t.Errorf("%s: decode entries %v runs %v, want %v runs %v", tc.name, entries, runs, tc.want, tc.runs)
		}
	}
}
