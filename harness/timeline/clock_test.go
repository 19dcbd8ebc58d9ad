package timeline

import (
	"math"
	"testing"
	"time"
)

func TestAlign(t *testing.T) {
	roundStart := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s float64) time.Time { return roundStart.Add(time.Duration(s * float64(time.Second))) }
	start := Probe{SentS: -0.004, AnsweredS: -0.002} // the capture began before the round
	stop := Probe{SentS: 10, AnsweredS: 10.001}
	for _, tc := range []struct {
		name      string
		sameHost  bool
		origin    time.Time
		stop      Probe
		durationS float64
		want      Clock
	}{
		{"same host: the wall clocks are one clock", true, at(-0.0031), stop, 10.0035,
			Clock{OriginS: -0.0031, Method: ClockSharedRealtime, ErrorS: 1e-6}},
		// A wall-clock step between the two reads puts the origin outside
		// the probe: the midpoint is used instead.
		{"same host, clock stepped", true, at(0.5), stop, 10.0035,
			Clock{OriginS: -0.003, Method: ClockRoundTripMidpoint, ErrorS: 0.001}},
		// A server elsewhere: its wall clock is not ours, whatever it says.
		{"remote", false, at(-0.0031), stop, 10.0035,
			Clock{OriginS: -0.003, Method: ClockRoundTripMidpoint, ErrorS: 0.001}},
		// The remote server's clock ran 0.5 ms slow over the round: the stop
		// lands 0.5 ms before the stop probe, which widens the bound.
		{"remote, rate difference", false, at(100), stop, 10.0025,
			Clock{OriginS: -0.003, Method: ClockRoundTripMidpoint, ErrorS: 0.0015}},
	} {
		got := Align(tc.sameHost, roundStart, tc.origin, start, tc.stop, tc.durationS)
		if got.Method != tc.want.Method || math.Abs(got.OriginS-tc.want.OriginS) > 1e-9 ||
			math.Abs(got.ErrorS-tc.want.ErrorS) > 1e-9 {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestProbeOf: probes are measured on the monotonic clock from the round's
// start, so a wall-clock change in between does not move them.
func TestProbeOf(t *testing.T) {
	roundStart := time.Now()
	sent := roundStart.Add(-3 * time.Millisecond)
	answered := roundStart.Add(-time.Millisecond)
	p := ProbeOf(roundStart, sent, answered)
	if math.Abs(p.SentS+0.003) > 1e-12 || math.Abs(p.AnsweredS+0.001) > 1e-12 {
		t.Errorf("probe %+v", p)
	}
}
