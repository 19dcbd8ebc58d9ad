package hrtimer

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func newTimer(t *testing.T) *Timer {
	t.Helper()
	tm, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tm.Close() })
	return tm
}

func TestSleepUntilNeverEarly(t *testing.T) {
	tm := newTimer(t)
	for _, offset := range []time.Duration{
		-time.Second, 0, time.Microsecond, 20 * time.Microsecond, 300 * time.Microsecond,
		time.Millisecond, 2500 * time.Microsecond, 10 * time.Millisecond,
	} {
		for range 20 {
			target := time.Now().Add(offset)
			if err := tm.SleepUntil(context.Background(), target); err != nil {
				t.Fatalf("offset %v: %v", offset, err)
			}
			if now := time.Now(); now.Before(target) {
				t.Fatalf("offset %v: returned %v before the target", offset, target.Sub(now))
			}
		}
	}
}

func TestSleepUntilWithLiveContext(t *testing.T) {
	tm := newTimer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 50 {
		target := time.Now().Add(200 * time.Microsecond)
		if err := tm.SleepUntil(ctx, target); err != nil {
			t.Fatal(err)
		}
		if time.Now().Before(target) {
			t.Fatal("returned before the target")
		}
	}
}

func TestSleepUntilContextEnds(t *testing.T) {
	far := time.Now().Add(time.Hour)
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled before", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"cancelled while sleeping", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"deadline before the target", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, context.DeadlineExceeded},
	}
	tm := newTimer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tm.SleepUntil(ctx, far) }()
			select {
			case err := <-done:
				if !errors.Is(err, tt.want) {
					t.Fatalf("got %v, want %v", err, tt.want)
				}
			case <-time.After(time.Minute):
				t.Fatal("SleepUntil did not return after its context ended")
			}
			// The timer is usable again: the cancel's read deadline is gone.
			target := time.Now().Add(time.Millisecond)
			if err := tm.SleepUntil(context.Background(), target); err != nil {
				t.Fatalf("after cancel: %v", err)
			}
			if time.Now().Before(target) {
				t.Fatal("after cancel: returned before the target")
			}
		})
	}
}

func TestCloseEndsSleep(t *testing.T) {
	tm := newTimer(t)
	done := make(chan error, 1)
	go func() { done <- tm.SleepUntil(context.Background(), time.Now().Add(time.Hour)) }()
	time.Sleep(10 * time.Millisecond)
	if err := tm.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("got %v, want os.ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("SleepUntil did not return after Close")
	}
	if err := tm.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := tm.SleepUntil(context.Background(), time.Now().Add(time.Millisecond)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("SleepUntil after Close: got %v, want os.ErrClosed", err)
	}
}

func TestPackageSleepUntil(t *testing.T) {
	target := time.Now().Add(500 * time.Microsecond)
	if err := SleepUntil(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(target) {
		t.Fatal("returned before the target")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := SleepUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestSpinUntil(t *testing.T) {
	target := time.Now().Add(100 * time.Microsecond)
	SpinUntil(target)
	if time.Now().Before(target) {
		t.Fatal("returned before the target")
	}
}
