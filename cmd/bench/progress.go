package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/roseinfer/roseinfer/harness/online"
)

// newProgress shows a bar per (backend, scale, round) on a terminal, and
// plain log lines (start, every 25%, the summary line) otherwise, so CI logs
// do not fill with carriage returns. Both go to stderr; stdout is for the
// paths of the files written.
func newProgress(w *os.File) online.Progress {
	if term.IsTerminal(int(w.Fd())) {
		return barProgress{w: w}
	}
	return lineProgress{w: w}
}

type barProgress struct{ w io.Writer }

func (p barProgress) Start(label string, scale float64, round, rounds, total int) online.Bar {
	desc := fmt.Sprintf("%s scale=%g", label, scale)
	if rounds > 1 {
		desc += fmt.Sprintf(" round %d/%d", round, rounds)
	}
	bar := progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
	return &termBar{w: p.w, bar: bar}
}

type termBar struct {
	mu  sync.Mutex
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (b *termBar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar.Add(n)
}

func (b *termBar) Finish(summary string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar.Finish()
	fmt.Fprintln(b.w, summary)
}

type lineProgress struct{ w io.Writer }

func (p lineProgress) Start(label string, scale float64, round, rounds, total int) online.Bar {
	name := fmt.Sprintf("[%s scale=%g", label, scale)
	if rounds > 1 {
		name += fmt.Sprintf(" round=%d/%d", round, rounds)
	}
	name += "]"
	fmt.Fprintf(p.w, "%s replaying %d requests\n", name, total)
	return &logBar{w: p.w, name: name, total: total, start: time.Now()}
}

type logBar struct {
	mu         sync.Mutex
	w          io.Writer
	name       string
	total      int
	done       int
	lastMarker int
	start      time.Time
}

func (b *logBar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if b.total == 0 {
		return
	}
	marker := b.done * 4 / b.total // quarters
	if marker > b.lastMarker && marker < 4 {
		b.lastMarker = marker
		fmt.Fprintf(b.w, "%s %d/%d done (%.0f s)\n", b.name, b.done, b.total, time.Since(b.start).Seconds())
	}
}

func (b *logBar) Finish(summary string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintln(b.w, summary)
}
