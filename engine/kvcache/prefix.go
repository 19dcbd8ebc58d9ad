package kvcache

import (
	"fmt"
	"slices"
)

// prefixCache indexes full, computed blocks by a hash chain: the hash of block
// i is hash(hash of block i-1, token ids of block i), so equal hashes mean
// equal whole prefixes (up to a 64-bit collision) and one map lookup per block
// finds the longest cached prefix. Only full blocks are cached, so a shared
// block is never written again and no copy-on-write is needed.
type prefixCache struct {
	isEnabled       bool
	blockSizeTokens int
	index           map[uint64]int32 // chain hash -> block id
	// Token ids of every cached block, block id i at [i*B, (i+1)*B): a hit is
	// confirmed against them, so a hash collision costs a miss, never wrong KV.
	tokens []int32

	numQueriedTokens int64
	numHitTokens     int64
}

func newPrefixCache(numBlocks, blockSizeTokens int) prefixCache {
	return prefixCache{
		isEnabled:       true,
		blockSizeTokens: blockSizeTokens,
		index:           make(map[uint64]int32, numBlocks),
		tokens:          make([]int32, numBlocks*blockSizeTokens),
	}
}

// chainSeed is the "previous hash" of a sequence's first block.
const chainSeed uint64 = 0x9e3779b97f4a7c15

// hashBlock continues the chain from prev over one block's token ids
// (FNV-1a over the tokens, then a splitmix64 finalizer to spread the bits).
func hashBlock(prev uint64, tokens []int32) uint64 {
	h := prev ^ 0xcbf29ce484222325
	for _, tok := range tokens {
		h ^= uint64(uint32(tok))
		h *= 0x100000001b3
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// lookup returns the cached block holding exactly these tokens after the
// chain prev, or false.
func (c *prefixCache) lookup(h uint64, tokens []int32) (int32, bool) {
	id, ok := c.index[h]
	if !ok {
		return 0, false
	}
	off := int(id) * c.blockSizeTokens
	return id, slices.Equal(c.tokens[off:off+c.blockSizeTokens], tokens)
}

// forget removes an evicted block from the index.
func (c *prefixCache) forget(id int32, h uint64) {
	if c.index[h] == id {
		delete(c.index, h)
	}
}

// check verifies that the index points at cached blocks under their hash.
func (c *prefixCache) check(blocks []block) error {
	for h, id := range c.index {
		if !blocks[id].isCached || blocks[id].hash != h {
			return fmt.Errorf("prefix index: hash %x -> block %d, which is cached=%v under %x",
				h, id, blocks[id].isCached, blocks[id].hash)
		}
	}
	numCached := 0
	for i := range blocks {
		if blocks[i].isCached {
			numCached++
		}
	}
	if numCached != len(c.index) {
		return fmt.Errorf("prefix index has %d entries, %d blocks are marked cached", len(c.index), numCached)
	}
	return nil
}

// MatchPrefix finds the longest run of leading full blocks of tokens that is
// cached. It changes nothing. numIdle says how many of those blocks are
// unreferenced: attaching them takes them out of NumFreeBlocks, so a caller
// needing k new blocks besides the prefix checks CanAllocate(k + numIdle).
//
// Callers pass the tokens whose KV they may skip; to keep logits for the last
// prompt token they pass all but that token.
func (p *Pool) MatchPrefix(tokens []int32) (numBlocks, numIdle int) {
	if !p.prefix.isEnabled {
		return 0, 0
	}
	b := p.blockSizeTokens
	h := chainSeed
	for (numBlocks+1)*b <= len(tokens) {
		blockTokens := tokens[numBlocks*b : (numBlocks+1)*b]
		h = hashBlock(h, blockTokens)
		id, ok := p.prefix.lookup(h, blockTokens)
		if !ok {
			break
		}
		if p.blocks[id].refCount == 0 {
			numIdle++
		}
		numBlocks++
	}
	return numBlocks, numIdle
}

// AttachPrefix puts the first numBlocks cached blocks of tokens, as found by
// MatchPrefix just before, into the empty table t and references them.
func (p *Pool) AttachPrefix(t *Table, tokens []int32, numBlocks int) {
	if len(t.blocks) != 0 {
		panic("kvcache: prefix attached to a non-empty table")
	}
	b := p.blockSizeTokens
	h := chainSeed
	for i := range numBlocks {
		blockTokens := tokens[i*b : (i+1)*b]
		h = hashBlock(h, blockTokens)
		id, ok := p.prefix.lookup(h, blockTokens)
		if !ok {
			panic(fmt.Sprintf("kvcache: prefix block %d vanished between MatchPrefix and AttachPrefix", i))
		}
		p.retain(id)
		t.blocks = append(t.blocks, id)
	}
	t.numHashedBlocks = numBlocks
	t.lastHash = h
}

// Commit registers the blocks of t that numComputedTokens (the tokens whose KV
// is now written, tokens[:numComputedTokens]) has just filled, so later
// prompts can reuse them. Call it after the step that computed them, never
// before: a block must not be matchable while its KV is still unwritten.
func (p *Pool) Commit(t *Table, tokens []int32, numComputedTokens int) {
	if !p.prefix.isEnabled {
		return
	}
	b := p.blockSizeTokens
	for (t.numHashedBlocks+1)*b <= numComputedTokens {
		i := t.numHashedBlocks
		blockTokens := tokens[i*b : (i+1)*b]
		prev := t.lastHash
		if i == 0 {
			prev = chainSeed
		}
		h := hashBlock(prev, blockTokens)
		id := t.blocks[i]
		if _, taken := p.prefix.index[h]; !taken && !p.blocks[id].isCached {
			// A block whose content is already cached elsewhere (two equal
			// prompts prefilled at once) stays private and is freed normally.
			p.prefix.index[h] = id
			p.blocks[id].isCached = true
			p.blocks[id].hash = h
			copy(p.prefix.tokens[int(id)*b:(int(id)+1)*b], blockTokens)
		}
		t.lastHash = h
		t.numHashedBlocks++
	}
}

// CountPrefixQuery adds one lookup to the hit-rate counters: numQueriedTokens
// prompt tokens looked up, numHitTokens of them found.
func (p *Pool) CountPrefixQuery(numQueriedTokens, numHitTokens int) {
	p.prefix.numQueriedTokens += int64(numQueriedTokens)
	p.prefix.numHitTokens += int64(numHitTokens)
}

// PrefixQueriedTokens is the total of prompt tokens looked up.
func (p *Pool) PrefixQueriedTokens() int64 { return p.prefix.numQueriedTokens }

// PrefixHitTokens is the total of prompt tokens found in the cache.
func (p *Pool) PrefixHitTokens() int64 { return p.prefix.numHitTokens }
