package offline

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/harness/workload"
)

// LenRange is an inclusive range of token counts [Lo, Hi]; Lo == Hi is a
// fixed length.
type LenRange struct{ Lo, Hi int }

func (r LenRange) fixed() bool { return r.Lo == r.Hi }

// meta is the range as offline_results.json records it: [lo, hi].
func (r LenRange) meta() []int { return []int{r.Lo, r.Hi} }

// LengthRanges resolves the run's lengths. An explicit range
// (--input-len-range, --output-len-range) wins; otherwise
// --random-range-ratio R spreads --input-len L as vLLM's random dataset
// does: [floor(L·(1−R)), ceil(L·(1+R))], both ends included, and the
// output length likewise, with a low end of at least 1. (vLLM first takes
// the tokenizer's added special tokens off the input length; token-id
// prompts add none.) R = 0 gives today's fixed lengths.
func (o *Options) LengthRanges() (in, out LenRange, err error) {
	if !(o.RandomRangeRatio >= 0 && o.RandomRangeRatio < 1) {
		return in, out, fmt.Errorf("--random-range-ratio %v: want 0 <= R < 1", o.RandomRangeRatio)
	}
	spread := func(n int) LenRange {
		if o.RandomRangeRatio == 0 {
			return LenRange{n, n}
		}
		return LenRange{int(math.Floor(float64(n) * (1 - o.RandomRangeRatio))),
			int(math.Ceil(float64(n) * (1 + o.RandomRangeRatio)))}
	}
	in, out = spread(o.InputLen), spread(o.OutputLen)
	if o.InputLenRange != (LenRange{}) {
		in = o.InputLenRange
	}
	if o.OutputLenRange != (LenRange{}) {
		out = o.OutputLenRange
	}
	in.Lo, out.Lo = max(in.Lo, 1), max(out.Lo, 1)
	switch {
	case in.Lo > in.Hi:
		return in, out, fmt.Errorf("input length range [%d, %d] is empty", in.Lo, in.Hi)
	case out.Lo > out.Hi:
		return in, out, fmt.Errorf("output length range [%d, %d] is empty", out.Lo, out.Hi)
	}
	return in, out, nil
}

// SampleLengths draws n input lengths and then n output lengths, each
// uniform over its inclusive range, from a PCG generator seeded by seed (a
// stream apart from the prompt ids'), so the same seed gives the same
// lengths. A fixed range draws nothing.
func SampleLengths(n int, in, out LenRange, seed int64) (inputLens, outputLens []int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6c656e67746873)) // "lengths"
	draw := func(r LenRange) []int {
		lens := make([]int, n)
		for i := range lens {
			lens[i] = r.Lo
			if !r.fixed() {
				lens[i] = r.Lo + rng.IntN(r.Hi-r.Lo+1)
			}
		}
		return lens
	}
	inputLens = draw(in)
	outputLens = draw(out)
	return inputLens, outputLens
}

// Batch is an offline run's work: each prompt's token ids and output
// length, and the warmup prompts.
type Batch struct {
	Prompts    [][]int32
	OutputLens []int
	Warmup     [][]int32
	WarmupOut  int // warmup max_tokens: up to 16
	In, Out    LenRange
	// ModelContext is the context the lengths were checked against; 0 when
	// --model is a model id rather than a directory (not checked).
	ModelContext int
}

// NewBatch builds the run's prompts: lengths from LengthRanges and
// SampleLengths, ids from Prompts, over --model DIR's tokenizer's regular
// tokens when it is not GPT-2 (workload.ReadModel), else GPT-2's range as
// before. The warmup prompts have the shortest input length.
func (o *Options) NewBatch() (*Batch, error) {
	in, out, err := o.LengthRanges()
	if err != nil {
		return nil, err
	}
	b := &Batch{In: in, Out: out, ModelContext: builtinContext, WarmupOut: min(16, out.Lo)}
	table, contextLen, err := o.PromptTokenIDs()
	if err != nil {
		return nil, err
	}
	if o.Model != "" {
		b.ModelContext = contextLen // 0: a model id for another engine, context unknown here
	}
	// A model id for a third-party engine has no context we can read.
	if o.Model == "" || contextLen > 0 {
		if in.Hi+out.Hi > b.ModelContext {
			return nil, fmt.Errorf("input length up to %d + output length up to %d exceed the model's %d-token context",
				in.Hi, out.Hi, b.ModelContext)
		}
	}
	inputLens, outputLens := SampleLengths(o.NumPrompts, in, out, o.Seed)
	b.Prompts = Prompts(inputLens, VocabSize, table, o.Seed)
	b.OutputLens = outputLens
	b.Warmup = Prompts(repeat(o.WarmupPrompts, in.Lo), VocabSize, table, o.Seed+1)
	return b, nil
}

// PromptTokenIDs are the ids prompts are drawn from and the model's
// context, for --model DIR (workload.ReadModel): nil ids for GPT-2 (its
// range, VocabSize, as always), and context 0 when --model is empty or not a
// directory.
func (o *Options) PromptTokenIDs() (ids []int32, contextLen int, err error) {
	if !workload.IsModelDir(o.Model) {
		return nil, 0, nil
	}
	m, err := workload.ReadModel(o.Model)
	if err != nil {
		return nil, 0, err
	}
	return m.TokenIDs, m.ContextLen, nil
}

// builtinContext is the built-in tiny model's (and GPT-2's) context.
const builtinContext = 1024

// Prompts returns one prompt per length, of exactly that many token ids
// drawn uniformly from [0, vocab) — or, with a table, from the table — with
// a PCG generator seeded by seed: the same ids for every backend of a run.
// Prompts are drawn one after another from one stream, so equal lengths
// give RandomPrompts' ids exactly.
func Prompts(lengths []int, vocab int, table []int32, seed int64) [][]int32 {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6f66666c696e65)) // "offline"
	n := vocab
	if table != nil {
		n = len(table)
	}
	out := make([][]int32, len(lengths))
	for i, length := range lengths {
		p := make([]int32, length)
		for j := range p {
			k := rng.IntN(n)
			if table != nil {
				p[j] = table[k]
			} else {
				p[j] = int32(k)
			}
		}
		out[i] = p
	}
	return out
}

// RandomPrompts returns n prompts of exactly length token ids drawn
// uniformly from [0, vocab): Prompts with one length.
func RandomPrompts(n, length, vocab int, seed int64) [][]int32 {
	return Prompts(repeat(n, length), vocab, nil, seed)
}

func repeat(n, v int) []int {
	out := make([]int, max(n, 0))
	for i := range out {
		out[i] = v
	}
	return out
}

// totalTokens is how many tokens each prompt's sequence reaches.
func (b *Batch) totalTokens() []int {
	out := make([]int, len(b.Prompts))
	for i, p := range b.Prompts {
		out[i] = len(p) + b.OutputLens[i]
	}
	return out
}

// meanInputLen and meanOutputLen are the mean lengths, rounded down.
func (b *Batch) meanInputLen() int {
	sum := 0
	for _, p := range b.Prompts {
		sum += len(p)
	}
	return sum / max(1, len(b.Prompts))
}

func (b *Batch) meanOutputLen() int {
	sum := 0
	for _, n := range b.OutputLens {
		sum += n
	}
	return sum / max(1, len(b.OutputLens))
}

// ParseLenRange reads "A,B" (inclusive, 1 <= A <= B); "" is unset.
func ParseLenRange(s string) (LenRange, error) {
	if strings.TrimSpace(s) == "" {
		return LenRange{}, nil
	}
	lo, hi, ok := strings.Cut(s, ",")
	a, errA := strconv.Atoi(strings.TrimSpace(lo))
	b, errB := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || errA != nil || errB != nil || a < 1 || a > b {
		return LenRange{}, fmt.Errorf("%q: want A,B with 1 <= A <= B", s)
	}
	return LenRange{a, b}, nil
}
