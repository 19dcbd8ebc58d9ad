package kvcache

import "slices"

// Table is one sequence's block table: the physical blocks covering its
// positions, block i holding positions [i*B, (i+1)*B). The zero value is an
// empty table. Only the Pool changes it.
type Table struct {
	blocks []int32
	// The first numHashedBlocks blocks are full and computed, and their chain
	// hash is known; lastHash is the hash of block numHashedBlocks-1. Commit
	// continues the chain from there instead of rehashing the whole prefix.
	numHashedBlocks int
	lastHash        uint64
}

// IDs returns the block ids in position order. The slice is the table's own
// storage: read it, do not keep or modify it.
func (t *Table) IDs() []int32 { return t.blocks }

// NumBlocks is the number of blocks the table holds.
func (t *Table) NumBlocks() int { return len(t.blocks) }

// reset empties the table but keeps its storage for the sequence's next
// admission (after a preemption), so re-allocating does not allocate memory.
func (t *Table) reset() {
	t.blocks = t.blocks[:0]
	t.numHashedBlocks = 0
	t.lastHash = 0
}

// Grow makes room for numBlocks blocks without reallocating, so a sequence
// whose final length is known up front never allocates while it decodes.
func (t *Table) Grow(numBlocks int) {
	if numBlocks > cap(t.blocks) {
		t.blocks = slices.Grow(t.blocks, numBlocks-len(t.blocks))
	}
}
