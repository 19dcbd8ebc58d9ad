package cuda

import (
	"strings"
	"testing"
)

// TestKVPoolBlocks checks the KV pool's sizing against hand-computed cases:
// the utilization limits this process's own memory (vLLM's meaning), so a
// second server on the GPU gets its own share, and free memory bounds it
// where other processes hold more.
func TestKVPoolBlocks(t *testing.T) {
	const (
		mb    = 1 << 20
		total = 80 * 1024 * mb
		per   = 2 * mb // a KV block
	)
	cases := []struct {
		name             string
		freeAtOpen, free int
		util             float64
		want             int
	}{
		// Alone: 0.9 of 80 GiB = 73,728 MB, less 1,500 MB of weights and
		// buffers and the 32 MB workspace: 72,196 MB, 36,098 blocks, one of
		// them the scratch block.
		{"alone", 79 * 1024 * mb, 79*1024*mb - 1500*mb, 0.9, 36097},
		// The second of two servers at 0.4: the first holds 32,768 MB, so
		// 47,104 MB were free at open; 32,768 − 1,500 − 32 = 31,236 MB.
		{"second server", 46 * 1024 * mb, 46*1024*mb - 1500*mb, 0.4, 15617},
		// Other processes hold about 60 GiB: 0.9 would allow 72,204 MB, but
		// only 17,932 MB are free; less the 1,024 MB margin and the
		// workspace: 16,876 MB.
		{"bounded by free memory", 19 * 1024 * mb, 19*1024*mb - 1524*mb, 0.9, 8437},
	}
	for _, c := range cases {
		got, err := kvPoolBlocks(total, c.freeAtOpen, c.free, c.util, per)
		if err != nil || got != c.want {
			t.Errorf("%s: kvPoolBlocks = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	// A server whose weights and buffers already take its whole 0.4 share
	// (32 GiB): no room, and the error names the fixes.
	_, err := kvPoolBlocks(total, 79*1024*mb, 47*1024*mb, 0.4, per)
	if err == nil || !strings.Contains(err.Error(), "--gpu-memory-utilization") || !strings.Contains(err.Error(), "--kv-cache-tokens") {
		t.Fatalf("no room: err = %v, want an error naming --gpu-memory-utilization and --kv-cache-tokens", err)
	}
}
