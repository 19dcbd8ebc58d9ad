//go:build !linux

package hrtimer

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// Timer sleeps until absolute instants on a Go timer (no timerfd outside
// Linux; other systems' runtime timers have their own precision). It is not
// safe for concurrent SleepUntil calls; Close may be called from any
// goroutine and ends a SleepUntil in progress.
type Timer struct {
	timer  *time.Timer
	closed chan struct{}
	done   atomic.Bool
}

// New makes a Timer. Close it when done.
func New() (*Timer, error) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Timer{timer: t, closed: make(chan struct{})}, nil
}

// Close stops the timer. It is idempotent.
func (t *Timer) Close() error {
	if t.done.CompareAndSwap(false, true) {
		t.timer.Stop()
		close(t.closed)
	}
	return nil
}

// SleepUntil blocks until target. It never returns nil before target. It
// returns ctx.Err() if ctx ends first, an error wrapping os.ErrClosed after
// Close.
func (t *Timer) SleepUntil(ctx context.Context, target time.Time) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if t.done.Load() {
			return fmt.Errorf("hrtimer: %w", os.ErrClosed)
		}
		d := time.Until(target)
		if d <= 0 {
			return nil
		}
		t.timer.Reset(d)
		select {
		case <-t.timer.C:
		case <-ctx.Done():
			t.timer.Stop()
			return ctx.Err()
		case <-t.closed:
			t.timer.Stop()
			return fmt.Errorf("hrtimer: %w", os.ErrClosed)
		}
	}
}
