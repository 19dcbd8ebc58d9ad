package hrtimer

import (
	"context"
	"os"
	"testing"
	"time"
)

func numOpenFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list open files: %v", err)
	}
	return len(entries)
}

// TestNoFDLeak makes, uses, cancels and closes many timers and checks the
// process holds no more file descriptors than before.
func TestNoFDLeak(t *testing.T) {
	before := numOpenFDs(t)
	for i := range 200 {
		tm, err := New()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if i%2 == 1 {
			cancel()
		}
		tm.SleepUntil(ctx, time.Now().Add(50*time.Microsecond))
		cancel()
		if err := tm.Close(); err != nil {
			t.Fatal(err)
		}
		SleepUntil(context.Background(), time.Now().Add(10*time.Microsecond))
	}
	if after := numOpenFDs(t); after != before {
		t.Fatalf("%d open files before, %d after", before, after)
	}
}
