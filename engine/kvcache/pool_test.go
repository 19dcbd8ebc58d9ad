package kvcache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func mustPool(t *testing.T, numBlocks, blockSizeTokens int, prefixCaching bool) *Pool {
	t.Helper()
	p, err := NewPool(numBlocks, blockSizeTokens, prefixCaching)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func checkPool(t *testing.T, p *Pool) {
	t.Helper()
	if err := p.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}

// seqTokens returns n token ids starting at first: distinct blocks for
// distinct first values.
func seqTokens(first, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(first + i)
	}
	return out
}

func TestNewPoolRejectsBadSizes(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		numBlocks, blockSize int
	}{
		{"no blocks", 0, 16},
		{"negative blocks", -1, 16},
		{"zero block size", 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPool(tc.numBlocks, tc.blockSize, true); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestNumBlocksFor(t *testing.T) {
	p := mustPool(t, 4, 16, false)
	for _, tc := range []struct{ numTokens, want int }{
		{0, 0}, {1, 1}, {15, 1}, {16, 1}, {17, 2}, {32, 2}, {33, 3},
	} {
		if got := p.NumBlocksFor(tc.numTokens); got != tc.want {
			t.Errorf("NumBlocksFor(%d) = %d, want %d", tc.numTokens, got, tc.want)
		}
	}
}

func TestAllocateAndFree(t *testing.T) {
	p := mustPool(t, 8, 4, false)
	var a, b Table
	p.Allocate(&a, 3)
	p.Allocate(&b, 5)
	if p.CanAllocate(1) {
		t.Fatal("pool of 8 with 8 allocated still says it can allocate")
	}
	if got := p.NumUsedBlocks(); got != 8 {
		t.Fatalf("used = %d, want 8", got)
	}
	ids := append(slices.Clone(a.IDs()), b.IDs()...)
	slices.Sort(ids)
	if !slices.Equal(ids, []int32{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("block ids %v are not each block once", ids)
	}
	checkPool(t, p)
	p.Free(&a)
	if a.NumBlocks() != 0 || p.NumFreeBlocks() != 3 {
		t.Fatalf("after free: table has %d blocks, pool %d free", a.NumBlocks(), p.NumFreeBlocks())
	}
	p.Free(&b)
	if p.NumFreeBlocks() != 8 {
		t.Fatalf("free = %d, want 8", p.NumFreeBlocks())
	}
	checkPool(t, p)
}

func TestAllocateBeyondPoolPanics(t *testing.T) {
	p := mustPool(t, 2, 4, false)
	var a Table
	defer func() {
		if recover() == nil {
			t.Fatal("allocating 3 of 2 blocks did not panic")
		}
	}()
	p.Allocate(&a, 3)
}

func TestDoubleReleasePanics(t *testing.T) {
	p := mustPool(t, 2, 4, false)
	var a Table
	p.Allocate(&a, 1)
	stale := Table{blocks: slices.Clone(a.blocks)} // a second owner that was never counted
	p.Free(&a)
	defer func() {
		if recover() == nil {
			t.Fatal("releasing a block with reference count 0 did not panic")
		}
	}()
	p.Free(&stale)
}

// fill allocates blocks for tokens, marks all of them computed, and returns
// the table: what a sequence looks like after prefilling tokens.
func fill(p *Pool, tokens []int32) *Table {
	t := &Table{}
	p.Allocate(t, p.NumBlocksFor(len(tokens)))
	p.Commit(t, tokens, len(tokens))
	return t
}

func TestMatchPrefix(t *testing.T) {
	const bs = 4
	base := seqTokens(100, 10) // blocks [100..103] [104..107], partial [108 109]
	for _, tc := range []struct {
		name      string
		caching   bool
		query     []int32
		wantHits  int
		freeFirst bool // free the cached sequence first (hits become idle)
	}{
		{"identical prompt hits full blocks only", true, base, 2, false},
		{"longer prompt hits the shared blocks", true, append(slices.Clone(base[:8]), seqTokens(7, 9)...), 2, false},
		{"one full block shared", true, append(slices.Clone(base[:5]), 0, 0, 0), 1, false},
		{"shorter than a block", true, base[:3], 0, false},
		{"first block differs: chain breaks though block 2 matches", true, append(seqTokens(0, 4), base[4:8]...), 0, false},
		{"idle blocks still hit", true, base, 2, true},
		{"caching off finds nothing", false, base, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPool(t, 8, bs, tc.caching)
			owner := fill(p, base)
			wantIdle := 0
			if tc.freeFirst {
				p.Free(owner)
				wantIdle = tc.wantHits
			}
			hits, idle := p.MatchPrefix(tc.query)
			if hits != tc.wantHits || idle != wantIdle {
				t.Fatalf("MatchPrefix = (%d hits, %d idle), want (%d, %d)", hits, idle, tc.wantHits, wantIdle)
			}
			freeBefore := p.NumFreeBlocks()
			var seq Table
			p.AttachPrefix(&seq, tc.query, hits)
			if got := p.NumFreeBlocks(); got != freeBefore-idle {
				t.Fatalf("attaching %d idle blocks: free %d -> %d", idle, freeBefore, got)
			}
			if hits > 0 && !slices.Equal(seq.IDs(), owner.IDs()[:hits]) && !tc.freeFirst {
				t.Fatalf("attached %v, owner has %v", seq.IDs(), owner.IDs())
			}
			checkPool(t, p)
			p.Free(&seq)
			p.Free(owner)
			if p.NumFreeBlocks() != 8 {
				t.Fatalf("free = %d after freeing everything", p.NumFreeBlocks())
			}
			checkPool(t, p)
		})
	}
}

func TestSharedBlockNeedsBothReleases(t *testing.T) {
	p := mustPool(t, 4, 4, true)
	tokens := seqTokens(1, 8)
	a := fill(p, tokens)
	var b Table
	hits, _ := p.MatchPrefix(tokens)
	p.AttachPrefix(&b, tokens, hits)
	p.Free(a)
	if got := p.NumUsedBlocks(); got != 2 {
		t.Fatalf("used = %d after one of two owners left, want 2", got)
	}
	p.Free(&b)
	if got, idle := p.NumUsedBlocks(), p.NumCachedIdleBlocks(); got != 0 || idle != 2 {
		t.Fatalf("used %d idle %d after both left, want 0 and 2", got, idle)
	}
	checkPool(t, p)
}

func TestEvictionIsLRUAndPrefersFreeBlocks(t *testing.T) {
	p := mustPool(t, 4, 2, true)
	old := fill(p, []int32{1, 2})
	young := fill(p, []int32{3, 4})
	p.Free(old)   // idle, least recently used
	p.Free(young) // idle, most recently used
	// Two free blocks remain: allocating them must not evict anything.
	var x Table
	p.Allocate(&x, 2)
	if n, _ := p.MatchPrefix([]int32{1, 2}); n != 1 {
		t.Fatal("an idle block was evicted while free blocks remained")
	}
	// The next allocation evicts the least recently used idle block.
	p.Allocate(&x, 1)
	if n, _ := p.MatchPrefix([]int32{1, 2}); n != 0 {
		t.Fatal("the least recently used block survived eviction")
	}
	if n, _ := p.MatchPrefix([]int32{3, 4}); n != 1 {
		t.Fatal("the most recently used block was evicted first")
	}
	checkPool(t, p)
	// The last allocation takes the remaining idle block.
	p.Allocate(&x, 1)
	if n, _ := p.MatchPrefix([]int32{3, 4}); n != 0 {
		t.Fatal("idle block survived when the pool needed it")
	}
	checkPool(t, p)
	p.Free(&x)
	checkPool(t, p)
}

func TestDuplicateContentStaysPrivate(t *testing.T) {
	// Two equal prompts prefilled in the same step: only the first block
	// committed is cached; the second is freed normally.
	p := mustPool(t, 4, 2, true)
	tokens := []int32{5, 6}
	var a, b Table
	p.Allocate(&a, 1)
	p.Allocate(&b, 1)
	p.Commit(&a, tokens, 2)
	p.Commit(&b, tokens, 2)
	checkPool(t, p)
	p.Free(&a)
	p.Free(&b)
	if idle := p.NumCachedIdleBlocks(); idle != 1 {
		t.Fatalf("idle cached blocks = %d, want 1", idle)
	}
	checkPool(t, p)
}

func TestCommitOnlyComputedFullBlocks(t *testing.T) {
	p := mustPool(t, 4, 4, true)
	tokens := seqTokens(0, 12)
	var a Table
	p.Allocate(&a, 3)
	for _, tc := range []struct{ numComputed, wantHits int }{
		{3, 0}, {4, 1}, {7, 1}, {11, 2}, {12, 3},
	} {
		p.Commit(&a, tokens, tc.numComputed)
		if hits, _ := p.MatchPrefix(tokens); hits != tc.wantHits {
			t.Fatalf("after %d computed tokens: %d hits, want %d", tc.numComputed, hits, tc.wantHits)
		}
	}
	p.Free(&a)
	checkPool(t, p)
}

// TestRandomOperations drives the pool the way a scheduler does and checks
// its invariants after every operation.
func TestRandomOperations(t *testing.T) {
	const (
		numBlocks = 32
		bs        = 4
	)
	rng := rand.New(rand.NewPCG(1, 2))
	p := mustPool(t, numBlocks, bs, true)
	type seq struct {
		tokens []int32
		table  Table
	}
	var live []*seq
	numHitBlocks := 0
	prompts := [][]int32{seqTokens(0, 13), seqTokens(50, 9), seqTokens(0, 6)}
	for step := range 3000 {
		switch op := rng.IntN(3); {
		case op == 0 || len(live) == 0: // admit a prompt with prefix reuse
			prompt := slices.Clone(prompts[rng.IntN(len(prompts))])
			prompt = append(prompt, int32(rng.IntN(4)))
			s := &seq{tokens: prompt}
			hits, idle := p.MatchPrefix(prompt[:len(prompt)-1])
			need := p.NumBlocksFor(len(prompt)) - hits
			if !p.CanAllocate(need + idle) {
				continue
			}
			p.AttachPrefix(&s.table, prompt, hits)
			numHitBlocks += hits
			p.Allocate(&s.table, need)
			p.Commit(&s.table, prompt, len(prompt))
			live = append(live, s)
		case op == 1: // decode one token
			s := live[rng.IntN(len(live))]
			s.tokens = append(s.tokens, int32(rng.IntN(3)))
			if need := p.NumBlocksFor(len(s.tokens)) - s.table.NumBlocks(); need > 0 {
				if !p.CanAllocate(need) {
					continue
				}
				p.Allocate(&s.table, need)
			}
			p.Commit(&s.table, s.tokens, len(s.tokens))
		default: // finish one
			i := rng.IntN(len(live))
			p.Free(&live[i].table)
			live = slices.Delete(live, i, i+1)
		}
		if err := p.CheckConsistency(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if numHitBlocks == 0 {
		t.Fatal("the random run never hit the prefix cache; it tests too little")
	}
	for _, s := range live {
		p.Free(&s.table)
	}
	if p.NumFreeBlocks() != numBlocks {
		t.Fatalf("free = %d at the end, want %d", p.NumFreeBlocks(), numBlocks)
	}
	checkPool(t, p)
}
