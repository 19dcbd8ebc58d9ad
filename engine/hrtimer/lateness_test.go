package hrtimer

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkLateness sleeps 300 µs at a time and reports how late the
// wake-ups were (p50, p99, max, in µs): a Go timer against a Timer.
//
//	go test -run - -bench Lateness -benchtime 2000x ./engine/hrtimer
func BenchmarkLateness(b *testing.B) {
	const sleep = 300 * time.Microsecond
	tm, err := New()
	if err != nil {
		b.Fatal(err)
	}
	defer tm.Close()
	sleepers := []struct {
		name  string
		sleep func(target time.Time)
	}{
		{"time.Sleep", func(target time.Time) { time.Sleep(time.Until(target)) }},
		{"Timer", func(target time.Time) { tm.SleepUntil(context.Background(), target) }},
	}
	for _, s := range sleepers {
		b.Run(s.name, func(b *testing.B) {
			late := make([]float64, 0, b.N)
			for b.Loop() {
				target := time.Now().Add(sleep)
				s.sleep(target)
				late = append(late, float64(time.Since(target))/1e3)
			}
			slices.Sort(late)
			b.ReportMetric(late[len(late)/2], "p50-late-µs")
			b.ReportMetric(late[len(late)*99/100], "p99-late-µs")
			b.ReportMetric(late[len(late)-1], "max-late-µs")
		})
	}
}
