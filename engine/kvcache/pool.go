// Package kvcache keeps the KV cache's books: which physical blocks exist,
// who references them, and which full blocks are reusable as a cached prefix.
//
// It deals in integers only (block ids, reference counts, token ids, hashes)
// and imports nothing from the engine or the devices: the device owns the KV
// storage, this package owns the block ids. It is not safe for concurrent use;
// the scheduler calls it from the engine loop.
//
// A block is in exactly one of three states:
//   - used: reference count > 0 (held by one or more sequences' tables);
//   - free: reference count 0 and no cached content;
//   - idle: reference count 0 but still holding a full block registered in
//     the prefix cache. Idle blocks count as free for allocation; they are
//     evicted least recently used first when no free block is left.
package kvcache

import "fmt"

// noBlock marks an empty LRU link.
const noBlock = -1

type block struct {
	refCount int32
	isCached bool   // registered in the prefix cache under hash
	hash     uint64 // chain hash, valid when isCached
	// LRU links among idle blocks; only meaningful while the block is idle.
	prev, next int32
}

// Pool is the set of KV blocks of one device.
type Pool struct {
	blockSizeTokens int
	blocks          []block
	free            []int32 // free blocks, used as a stack (LIFO keeps recently touched memory warm)

	// Idle cached blocks, least recently used at lruHead.
	lruHead, lruTail int32
	numIdle          int

	prefix prefixCache
}

// NewPool creates a pool of numBlocks blocks of blockSizeTokens tokens each.
// With prefixCaching false no block is ever cached and MatchPrefix finds
// nothing.
func NewPool(numBlocks, blockSizeTokens int, prefixCaching bool) (*Pool, error) {
	if numBlocks <= 0 {
		return nil, fmt.Errorf("kvcache: number of blocks must be positive, got %d", numBlocks)
	}
	if blockSizeTokens <= 0 {
		return nil, fmt.Errorf("kvcache: block size must be positive, got %d tokens", blockSizeTokens)
	}
	p := &Pool{
		blockSizeTokens: blockSizeTokens,
		blocks:          make([]block, numBlocks),
		free:            make([]int32, numBlocks),
		lruHead:         noBlock,
		lruTail:         noBlock,
	}
	// Hand out low ids first: block 0 sits at the top of the stack.
	for i := range p.free {
		p.free[i] = int32(numBlocks - 1 - i)
	}
	if prefixCaching {
		p.prefix = newPrefixCache(numBlocks, blockSizeTokens)
	}
	return p, nil
}

// BlockSizeTokens is the number of token positions one block holds.
func (p *Pool) BlockSizeTokens() int { return p.blockSizeTokens }

// NumBlocks is the pool's size.
func (p *Pool) NumBlocks() int { return len(p.blocks) }

// NumFreeBlocks counts blocks that can be allocated now: free plus idle cached.
func (p *Pool) NumFreeBlocks() int { return len(p.free) + p.numIdle }

// NumUsedBlocks counts blocks referenced by at least one sequence.
func (p *Pool) NumUsedBlocks() int { return len(p.blocks) - p.NumFreeBlocks() }

// NumCachedIdleBlocks counts unreferenced blocks kept for prefix reuse.
func (p *Pool) NumCachedIdleBlocks() int { return p.numIdle }

// NumBlocksFor is the number of blocks that cover numTokens positions.
func (p *Pool) NumBlocksFor(numTokens int) int {
	return (numTokens + p.blockSizeTokens - 1) / p.blockSizeTokens
}

// CanAllocate reports whether numBlocks more blocks can be allocated.
func (p *Pool) CanAllocate(numBlocks int) bool { return numBlocks <= p.NumFreeBlocks() }

// Allocate appends numBlocks fresh blocks to t. The caller checks
// CanAllocate first; asking for more than exists is a scheduler bug.
func (p *Pool) Allocate(t *Table, numBlocks int) {
	if !p.CanAllocate(numBlocks) {
		panic(fmt.Sprintf("kvcache: allocate %d blocks with only %d free", numBlocks, p.NumFreeBlocks()))
	}
	for range numBlocks {
		id := p.takeBlock()
		p.blocks[id].refCount = 1
		t.blocks = append(t.blocks, id)
	}
}

// Free drops t's references and empties it. Blocks go back in reverse order,
// so a sequence's last blocks become the least recently used and are evicted
// before the head of its chain, which other prompts are likelier to share.
func (p *Pool) Free(t *Table) {
	for i := len(t.blocks) - 1; i >= 0; i-- {
		p.release(t.blocks[i])
	}
	t.reset()
}

// takeBlock removes a block with reference count 0 from the free stack or,
// when that is empty, evicts the least recently used idle cached block.
func (p *Pool) takeBlock() int32 {
	if n := len(p.free); n > 0 {
		id := p.free[n-1]
		p.free = p.free[:n-1]
		return id
	}
	id := p.lruHead
	p.unlinkIdle(id)
	p.prefix.forget(id, p.blocks[id].hash)
	p.blocks[id].isCached = false
	return id
}

// release drops one reference to block id.
func (p *Pool) release(id int32) {
	b := &p.blocks[id]
	if b.refCount <= 0 {
		panic(fmt.Sprintf("kvcache: release of block %d with reference count %d", id, b.refCount))
	}
	b.refCount--
	if b.refCount > 0 {
		return
	}
	if b.isCached {
		p.linkIdle(id) // keep the content for reuse until the pool needs the block
		return
	}
	p.free = append(p.free, id)
}

// retain adds a reference to a cached block found by a prefix match, taking
// it out of the idle list when it had none.
func (p *Pool) retain(id int32) {
	b := &p.blocks[id]
	if b.refCount == 0 {
		p.unlinkIdle(id)
	}
	b.refCount++
}

// linkIdle appends id at the most recently used end of the idle list.
func (p *Pool) linkIdle(id int32) {
	b := &p.blocks[id]
	b.prev, b.next = p.lruTail, noBlock
	if p.lruTail != noBlock {
		p.blocks[p.lruTail].next = id
	} else {
		p.lruHead = id
	}
	p.lruTail = id
	p.numIdle++
}

func (p *Pool) unlinkIdle(id int32) {
	b := &p.blocks[id]
	if b.prev != noBlock {
		p.blocks[b.prev].next = b.next
	} else {
		p.lruHead = b.next
	}
	if b.next != noBlock {
		p.blocks[b.next].prev = b.prev
	} else {
		p.lruTail = b.prev
	}
	b.prev, b.next = noBlock, noBlock
	p.numIdle--
}

// CheckConsistency verifies the pool's invariants: every block is exactly one
// of used, free or idle; idle blocks are cached; the prefix index points at
// cached blocks. Tests call it; it costs O(blocks).
func (p *Pool) CheckConsistency() error {
	state := make([]byte, len(p.blocks)) // 0 unseen, 'f' free, 'i' idle
	for _, id := range p.free {
		if state[id] != 0 {
			return fmt.Errorf("block %d twice in the free list", id)
		}
		if p.blocks[id].refCount != 0 || p.blocks[id].isCached {
			return fmt.Errorf("free block %d has reference count %d, cached %v", id, p.blocks[id].refCount, p.blocks[id].isCached)
		}
		state[id] = 'f'
	}
	numIdle := 0
	for id := p.lruHead; id != noBlock; id = p.blocks[id].next {
		if state[id] != 0 {
			return fmt.Errorf("block %d both free and idle, or in a loop", id)
		}
		if p.blocks[id].refCount != 0 || !p.blocks[id].isCached {
			return fmt.Errorf("idle block %d has reference count %d, cached %v", id, p.blocks[id].refCount, p.blocks[id].isCached)
		}
		state[id] = 'i'
		numIdle++
	}
	if numIdle != p.numIdle {
		return fmt.Errorf("idle list holds %d blocks, counter says %d", numIdle, p.numIdle)
	}
	for id := range p.blocks {
		if state[id] == 0 && p.blocks[id].refCount <= 0 {
			return fmt.Errorf("block %d is lost: not free, not idle, reference count %d", id, p.blocks[id].refCount)
		}
	}
	return p.prefix.check(p.blocks)
}
