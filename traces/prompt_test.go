package traces

import (
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type pyCase struct {
	Seed  int64 `json:"seed"`
	Lo    int   `json:"lo"`
	Hi    int   `json:"hi"`
	Draws []int `json:"draws"`
}

// loadPyRandom reads draws CPython made (testdata/make_pyrandom.py).
func loadPyRandom(t *testing.T) []pyCase {
	t.Helper()
	data, err := os.ReadFile("testdata/pyrandom.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []pyCase }
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Cases
}

func TestPyRandomMatchesCPython(t *testing.T) {
	for _, c := range loadPyRandom(t) {
		rng := newPyRandom(c.Seed)
		for i, want := range c.Draws {
			if got := rng.randint(c.Lo, c.Hi); got != want {
				t.Fatalf("seed %d randint(%d, %d) draw %d = %d, want %d", c.Seed, c.Lo, c.Hi, i, got, want)
			}
		}
	}
}

// The default base prompt is the original's: seed 42, GPT-2's vocabulary.
func TestBaseSequenceIsTheOriginals(t *testing.T) {
	want := loadPyRandom(t)[0]
	if want.Seed != 42 || want.Hi != 50257/2 {
		t.Fatalf("fixture case 0 is seed %d hi %d, want the default", want.Seed, want.Hi)
	}
	got, err := BaseSequence(len(want.Draws), 42, 50257, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, int32s(want.Draws)) {
		t.Error("base sequence differs from CPython's draws")
	}
	if _, err := BaseSequence(10, 42, 0, nil); err == nil {
		t.Error("vocabulary 0: no error")
	}
}

// fakeCodec writes ids as decimal words; Encode applies a rewrite to each
// id, so decode→encode can shrink or grow a sequence like a real tokenizer.
type fakeCodec struct{ rewrite func(id int32) []int32 }

func (c fakeCodec) Decode(ids []int32) string {
	words := make([]string, len(ids))
	for i, id := range ids {
		words[i] = strconv.Itoa(int(id))
	}
	return strings.Join(words, " ")
}

func (c fakeCodec) Encode(text string) []int32 {
	var ids []int32
	for _, w := range strings.Fields(text) {
		id, _ := strconv.Atoi(w)
		ids = append(ids, c.rewrite(int32(id))...)
	}
	return ids
}

func TestBaseSequenceWithCodec(t *testing.T) {
	draws := int32s(loadPyRandom(t)[0].Draws) // CPython: seed 42, randint(0, 25128)
	const n = 1000
	keep := func(id int32) []int32 { return []int32{id} }
	dropAbove := func(limit int32) func(int32) []int32 {
		return func(id int32) []int32 {
			if id > limit {
				return nil
			}
			return []int32{id}
		}
	}
	halveAbove := func(id int32) []int32 {
		if id >= 20000 {
			return []int32{id / 2, id / 2}
		}
		return []int32{id}
	}
	var shrunk []int32 // the original's fix-up for a shrinking codec, from CPython's draws
	for _, id := range draws[:n] {
		if id <= 24900 {
			shrunk = append(shrunk, id)
		}
	}
	shrunk = append(shrunk, draws[n:n+(n-len(shrunk))]...)
	var grown []int32
	for _, id := range draws[:n] {
		grown = append(grown, halveAbove(id)...)
	}
	grown = grown[:n]

	tests := []struct {
		name    string
		rewrite func(int32) []int32
		want    []int32 // nil: an error is expected
	}{
		{"round-trip stable: ids unchanged", keep, draws[:n]},
		{"same length, other ids: kept as drawn (the original checks length only)", func(id int32) []int32 { return []int32{id % 100} }, draws[:n]},
		{"shrinks: re-encoded ids padded with further draws", dropAbove(24900), shrunk},
		{"grows: re-encoded ids truncated", halveAbove, grown},
		{"still unstable after the fix-up: error", dropAbove(20000), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BaseSequence(n, 42, 50257, fakeCodec{tt.rewrite})
			if tt.want == nil {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("base differs: got %d ids, want %d", len(got), len(tt.want))
			}
		})
	}
	if len(shrunk) != n || slices.Equal(shrunk, draws[:n]) {
		t.Fatal("the shrinking case must exercise the padding path")
	}
}

func TestBuildPromptsBase(t *testing.T) {
	rows := []Row{{InputLen: 5}, {InputLen: 12}, {InputLen: 0}, {InputLen: 7}}
	prompts, err := BuildPrompts(rows, PromptOptions{Seed: 42, VocabSize: 50257})
	if err != nil {
		t.Fatal(err)
	}
	base := int32s(loadPyRandom(t)[0].Draws[:12])
	for i, p := range prompts {
		if !slices.Equal(p, base[:rows[i].InputLen]) || cap(p) != len(p) {
			t.Errorf("prompt %d = %v (cap %d), want the first %d base ids, capacity = length", i, p, cap(p), rows[i].InputLen)
		}
	}
	if _, err := BuildPrompts([]Row{{InputLen: -1}}, PromptOptions{VocabSize: 10}); err == nil {
		t.Error("negative length: no error")
	}
}

func TestTracePrompts(t *testing.T) {
	const vocab, bs = 1000, 4
	rows := []Row{
		{Index: 0, InputLen: 10, HashIDs: []int64{0, 1, 2}},   // 4 + 4 + 2 of block 2
		{Index: 1, InputLen: 12, HashIDs: []int64{0, 1, 3}},   // shares blocks 0 and 1
		{Index: 2, InputLen: 9, HashIDs: []int64{5, 0}},       // block 0 at another position, 1 token of padding
		{Index: 3, InputLen: 6},                               // no hash ids: all padding
		{Index: 4, InputLen: 6},                               // padding differs from row 3's
		{Index: 5, InputLen: 3, HashIDs: []int64{0, 1, 2, 3}}, // truncated inside block 0
	}
	prompts, err := BuildPrompts(rows, PromptOptions{Mode: PrefixTrace, Seed: 42, VocabSize: vocab, BlockSizeTokens: bs})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range prompts {
		if len(p) != rows[i].InputLen {
			t.Fatalf("prompt %d has %d ids, want %d", i, len(p), rows[i].InputLen)
		}
		for _, id := range p {
			if id < 0 || id > vocab/2 {
				t.Fatalf("prompt %d: id %d outside [0, %d]", i, id, vocab/2)
			}
		}
	}
	block0 := prompts[0][0:4]
	same := func(name string, a, b []int32) {
		if !slices.Equal(a, b) {
			t.Errorf("%s: %v != %v", name, a, b)
		}
	}
	differ := func(name string, a, b []int32) {
		if slices.Equal(a, b) {
			t.Errorf("%s: both %v", name, a)
		}
	}
	same("rows 0 and 1 share blocks 0-1", prompts[0][:8], prompts[1][:8])
	differ("blocks 2 and 3", prompts[0][8:10], prompts[1][8:10])
	same("block 0 is the same at position 1", prompts[2][4:8], block0)
	differ("block 5 vs block 0", prompts[2][0:4], block0)
	same("truncation keeps a prefix of block 0", prompts[5], block0[:3])
	differ("padding is per row", prompts[3], prompts[4])
	differ("padding differs from blocks", prompts[2][8:9], block0[:1])

	again, _ := BuildPrompts(rows, PromptOptions{Mode: PrefixTrace, Seed: 42, VocabSize: vocab, BlockSizeTokens: bs})
	other, _ := BuildPrompts(rows, PromptOptions{Mode: PrefixTrace, Seed: 43, VocabSize: vocab, BlockSizeTokens: bs})
	same("deterministic", slices.Concat(prompts...), slices.Concat(again...))
	differ("the seed matters", slices.Concat(prompts...), slices.Concat(other...))

	if _, err := BuildPrompts(rows, PromptOptions{Mode: PrefixTrace, VocabSize: vocab}); err == nil {
		t.Error("trace mode without a block size: no error")
	}
	if _, err := BuildPrompts(rows, PromptOptions{Mode: "weird", VocabSize: vocab}); err == nil {
		t.Error("unknown mode: no error")
	}
}

// Tokens of a block are spread over the allowed range, not stuck on a few
// values: with 50k possible ids, 4096 draws should be nearly all distinct.
func TestTracePromptSpread(t *testing.T) {
	p := TracePrompt(Row{InputLen: 4096, HashIDs: []int64{1, 2, 3, 4, 5, 6, 7, 8}}, 512, 42, 50257)
	seen := map[int32]bool{}
	for _, id := range p {
		seen[id] = true
	}
	if len(seen) < 3700 {
		t.Errorf("%d distinct ids in 4096 draws over 25129 values", len(seen))
	}
}

func TestParsePrefixMode(t *testing.T) {
	for in, want := range map[string]PrefixMode{"": PrefixBase, "base": PrefixBase, "Trace": PrefixTrace} {
		if got, err := ParsePrefixMode(in); err != nil || got != want {
			t.Errorf("ParsePrefixMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParsePrefixMode("hash"); err == nil {
		t.Error("ParsePrefixMode(hash): no error")
	}
}

func int32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// With a token table the draws are made over len(table) and mapped through
// it, in both modes: an identity table gives the plain draws, a shifted one
// the same draws shifted. A table cannot be combined with a codec.
func TestBuildPromptsTokenTable(t *testing.T) {
	rows := []Row{{Index: 0, InputLen: 9, HashIDs: []int64{1}}, {Index: 1, InputLen: 20, HashIDs: []int64{1, 2}}}
	const n = 1000
	identity, shifted := make([]int32, n), make([]int32, n)
	for i := range identity {
		identity[i], shifted[i] = int32(i), int32(i+5000)
	}
	for _, mode := range []PrefixMode{PrefixBase, PrefixTrace} {
		plain, err := BuildPrompts(rows, PromptOptions{Mode: mode, Seed: 42, VocabSize: n, BlockSizeTokens: 16})
		if err != nil {
			t.Fatal(err)
		}
		same, _ := BuildPrompts(rows, PromptOptions{Mode: mode, Seed: 42, VocabSize: 50257, BlockSizeTokens: 16, TokenIDs: identity})
		moved, _ := BuildPrompts(rows, PromptOptions{Mode: mode, Seed: 42, VocabSize: 50257, BlockSizeTokens: 16, TokenIDs: shifted})
		for i := range plain {
			if !slices.Equal(plain[i], same[i]) {
				t.Errorf("%s: prompt %d: identity table %v, plain draws %v", mode, i, same[i], plain[i])
			}
			for j, id := range moved[i] {
				if id != plain[i][j]+5000 {
					t.Fatalf("%s: prompt %d: shifted table gives %d, want %d", mode, i, id, plain[i][j]+5000)
				}
			}
		}
	}
	if _, err := BuildPrompts(rows, PromptOptions{Seed: 42, TokenIDs: identity, Codec: fakeCodec{}}); err == nil {
		t.Error("a table with a codec: no error")
	}
}
