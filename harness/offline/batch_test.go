package offline

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/workload/workloadtest"
	"github.com/roseinfer/roseinfer/results"
)

// LengthRanges follows vLLM's --random-range-ratio (floor and ceil, both
// ends included, output at least 1); an explicit range wins; bad input fails.
func TestLengthRanges(t *testing.T) {
	for _, tc := range []struct {
		name            string
		in, out         int
		ratio           float64
		inRange, oRange LenRange
		wantIn, wantOut LenRange
		wantErr         bool
	}{
		{"R = 0: fixed", 512, 128, 0, LenRange{}, LenRange{}, LenRange{512, 512}, LenRange{128, 128}, false},
		{"R = 0.5", 512, 128, 0.5, LenRange{}, LenRange{}, LenRange{256, 768}, LenRange{64, 192}, false},
		{"floor low, ceil high", 10, 3, 0.25, LenRange{}, LenRange{}, LenRange{7, 13}, LenRange{2, 4}, false},
		{"output low end at least 1", 10, 1, 0.9, LenRange{}, LenRange{}, LenRange{1, 19}, LenRange{1, 2}, false},
		{"explicit ranges win (nano-vllm)", 512, 128, 0.5, LenRange{100, 1024}, LenRange{100, 1024}, LenRange{100, 1024}, LenRange{100, 1024}, false},
		{"explicit input only", 512, 128, 0, LenRange{100, 1024}, LenRange{}, LenRange{100, 1024}, LenRange{128, 128}, false},
		{"R = 1 rejected", 512, 128, 1, LenRange{}, LenRange{}, LenRange{}, LenRange{}, true},
		{"negative R rejected", 512, 128, -0.1, LenRange{}, LenRange{}, LenRange{}, LenRange{}, true},
		{"empty range rejected", 512, 128, 0, LenRange{9, 3}, LenRange{}, LenRange{}, LenRange{}, true},
	} {
		o := Default()
		o.InputLen, o.OutputLen, o.RandomRangeRatio = tc.in, tc.out, tc.ratio
		o.InputLenRange, o.OutputLenRange = tc.inRange, tc.oRange
		in, out, err := o.LengthRanges()
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && (in != tc.wantIn || out != tc.wantOut) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, in, out, tc.wantIn, tc.wantOut)
		}
	}
}

// Drawn lengths stay inside their ranges, reach both ends, depend only on
// the seed, and a fixed range draws nothing.
func TestSampleLengthsBoundsAndSeed(t *testing.T) {
	in, out := LenRange{100, 1024}, LenRange{100, 1024}
	a, b := SampleLengths(256*20, in, out, 42)
	a2, b2 := SampleLengths(256*20, in, out, 42)
	if !slices.Equal(a, a2) || !slices.Equal(b, b2) {
		t.Fatal("the same seed gave different lengths")
	}
	if c, _ := SampleLengths(256*20, in, out, 43); slices.Equal(a, c) {
		t.Error("different seeds gave the same lengths")
	}
	for _, lens := range [][]int{a, b} {
		if slices.Min(lens) != 100 || slices.Max(lens) != 1024 {
			t.Errorf("lengths span [%d, %d], want [100, 1024] reached", slices.Min(lens), slices.Max(lens))
		}
		sum := 0
		for _, n := range lens {
			sum += n
		}
		if mean := float64(sum) / float64(len(lens)); mean < 552-15 || mean > 552+15 {
			t.Errorf("mean length %.1f, want about 562 (uniform)", mean)
		}
	}
	if slices.Equal(a, b) {
		t.Error("input and output lengths are the same draws")
	}
	fi, fo := SampleLengths(5, LenRange{7, 7}, LenRange{3, 3}, 42)
	if !slices.Equal(fi, []int{7, 7, 7, 7, 7}) || !slices.Equal(fo, []int{3, 3, 3, 3, 3}) {
		t.Errorf("fixed ranges gave %v %v", fi, fo)
	}
}

// With R = 0 the batch is today's: RandomPrompts' ids exactly, every
// output length --output-len, warmup of --input-len.
func TestBatchFixedLengthsUnchanged(t *testing.T) {
	o := Default()
	o.NumPrompts, o.InputLen, o.OutputLen, o.WarmupPrompts = 5, 33, 7, 2
	b, err := o.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	want, wantWarm := RandomPrompts(5, 33, VocabSize, 42), RandomPrompts(2, 33, VocabSize, 43)
	for i := range want {
		if !slices.Equal(b.Prompts[i], want[i]) || b.OutputLens[i] != 7 {
			t.Fatalf("prompt %d differs from the fixed-length run", i)
		}
	}
	for i := range wantWarm {
		if !slices.Equal(b.Warmup[i], wantWarm[i]) {
			t.Fatalf("warmup %d differs", i)
		}
	}
	if b.WarmupOut != 7 || b.meanInputLen() != 33 || b.meanOutputLen() != 7 {
		t.Errorf("warmup out %d, means %d %d", b.WarmupOut, b.meanInputLen(), b.meanOutputLen())
	}
	// Pinned: the first ids of seed 42, as before length ranges existed.
	if got := b.Prompts[0][:4]; !slices.Equal(got, pinnedFirstIDs) {
		t.Errorf("first ids %v, want %v", got, pinnedFirstIDs)
	}
}

// pinnedFirstIDs are RandomPrompts(…, 50257, 42)[0][:4] as it drew them
// before this change.
var pinnedFirstIDs = []int32{28451, 42131, 44763, 25455}

// The built-in model's 1024-token context bounds the ranges' high ends.
func TestBatchContextCheck(t *testing.T) {
	o := Default()
	o.NumPrompts, o.InputLenRange, o.OutputLenRange = 4, LenRange{100, 1024}, LenRange{100, 1024}
	if _, err := o.NewBatch(); err == nil {
		t.Error("ranges up to 2048 tokens accepted for the 1024-token built-in model")
	}
}

// A qwen3-tiny directory: ids are the tokenizer's regular tokens (below
// 151,643: never the 26 added ones), its 2,048-token context bounds the
// lengths, and ranges vary the prompts' lengths.
func TestBatchQwen3(t *testing.T) {
	dir := t.TempDir()
	if err := workloadtest.Qwen3Tiny(dir); err != nil {
		t.Fatal(err)
	}
	o := Default()
	o.Model, o.NumPrompts, o.WarmupPrompts = dir, 16, 1
	o.InputLenRange, o.OutputLenRange = LenRange{100, 1024}, LenRange{100, 1024}
	b, err := o.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	if b.ModelContext != 2048 {
		t.Errorf("context %d, want 2048", b.ModelContext)
	}
	lens := map[int]bool{}
	top := int32(0)
	for i, p := range append(b.Prompts, b.Warmup...) {
		for _, id := range p {
			if id < 0 || id >= 151643 {
				t.Fatalf("prompt %d holds id %d", i, id)
			}
			top = max(top, id)
		}
		lens[len(p)] = true
	}
	if len(lens) < 8 || top < 100000 {
		t.Errorf("%d distinct lengths, largest id %d", len(lens), top)
	}
	o.InputLenRange = LenRange{100, 2000}
	if _, err := o.NewBatch(); err == nil {
		t.Error("2000 + 1024 tokens accepted for a 2048-token model")
	}
}

func TestKVTokensWithoutPreemption(t *testing.T) {
	for _, tc := range []struct {
		seqTokens     []int
		maxConcurrent int
		want          int
	}{
		{[]int{640, 640, 640}, 256, 3 * (40 + 1) * 16},     // fixed lengths: as before
		{[]int{640, 640, 640}, 2, 2 * (40 + 1) * 16},       // batch cap
		{[]int{10, 700, 33, 64}, 2, (44 + 1 + 4 + 1) * 16}, // the longest two
	} {
		if got := kvTokensWithoutPreemption(tc.seqTokens, tc.maxConcurrent, 16); got != tc.want {
			t.Errorf("%v, %d: %d tokens, want %d", tc.seqTokens, tc.maxConcurrent, got, tc.want)
		}
	}
}

func TestParseLenRange(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    LenRange
		wantErr bool
	}{
		{"", LenRange{}, false},
		{"100,1024", LenRange{100, 1024}, false},
		{" 5 , 5 ", LenRange{5, 5}, false},
		{"0,10", LenRange{}, true},
		{"10,9", LenRange{}, true},
		{"10", LenRange{}, true},
		{"a,b", LenRange{}, true},
	} {
		got, err := ParseLenRange(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%q: %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// A run with length ranges on the sim device: every prompt generates its
// own drawn length (ignore_eos), the totals are the sums, and meta records
// the ranges.
func TestRunWithLengthRanges(t *testing.T) {
	o := Default()
	o.Backends, o.Device, o.SimStep = []string{LabelInProcess}, "sim", 100*time.Microsecond
	o.NumPrompts, o.WarmupPrompts, o.RunDir = 12, 1, t.TempDir()
	o.InputLen, o.OutputLen, o.RandomRangeRatio = 40, 8, 0.5
	rep, err := Run(context.Background(), o)
	if err != nil || len(rep.Failures) != 0 {
		t.Fatalf("%v %v", err, rep.Failures)
	}
	off, err := results.LoadOffline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := o.NewBatch()
	wantIn, wantOut := 0, 0
	for i, p := range b.Prompts {
		wantIn += len(p)
		wantOut += b.OutputLens[i]
	}
	r := off.Results[0]
	if r.TotalInputTokens != wantIn || r.TotalOutputTokens != wantOut {
		t.Errorf("totals %d in, %d out; want %d, %d", r.TotalInputTokens, r.TotalOutputTokens, wantIn, wantOut)
	}
	if r.InputLen != wantIn/12 || r.OutputLen != wantOut/12 {
		t.Errorf("input_len %d, output_len %d; want the means %d, %d", r.InputLen, r.OutputLen, wantIn/12, wantOut/12)
	}
	if got := off.Meta["input_len_range"]; !reflect.DeepEqual(got, []any{20.0, 60.0}) {
		t.Errorf("meta input_len_range %v, want [20 60]", got)
	}
	if got := off.Meta["output_len_range"]; !reflect.DeepEqual(got, []any{4.0, 12.0}) {
		t.Errorf("meta output_len_range %v, want [4 12]", got)
	}
	if off.Meta["random_range_ratio"] != 0.5 {
		t.Errorf("meta random_range_ratio %v", off.Meta["random_range_ratio"])
	}
}
