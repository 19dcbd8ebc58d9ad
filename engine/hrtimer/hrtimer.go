// Package hrtimer sleeps until an instant with sub-millisecond precision and
// without spinning.
//
// Go's runtime timers are millisecond-granular on Linux when the process is
// idle: the scheduler blocks in epoll_pwait, whose timeout is in whole
// milliseconds, so a 300 µs time.Sleep on an idle 2-core machine returns
// ~0.8 ms late (measured p50 821 µs, p99 883 µs; see golang/go#44343). The
// sim device and the replay dispatcher need steps and sends on time to tens
// of µs; spinning for it instead starves, on 2 cores, the HTTP goroutines
// they measure. A Linux timerfd, read through the
// netpoller, wakes the goroutine when the kernel's hrtimer fires (measured
// late p50 50 µs, p99 112 µs for the same sleeps; BenchmarkLateness) and
// costs no CPU while waiting. The read also carries the target as its
// deadline, a runtime timer, which a busy process notices sooner than an fd
// event. Elsewhere a Timer is a plain Go timer.
package hrtimer

import (
	"context"
	"runtime"
	"time"
)

// SpinUntil busy-waits until t, yielding the processor on every turn so
// other goroutines still run. It is meant for the last tens of µs after a
// Timer wake-up, never for long waits.
func SpinUntil(t time.Time) {
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}

// SleepUntil sleeps until target on a fresh Timer, for one-off waits; a
// loop that waits again and again should keep its own Timer. It returns
// ctx.Err() if ctx ends first, or the error of making the timer.
func SleepUntil(ctx context.Context, target time.Time) error {
	if time.Until(target) <= 0 {
		return ctx.Err()
	}
	t, err := New()
	if err != nil {
		return err
	}
	defer t.Close()
	return t.SleepUntil(ctx, target)
}
