package timeline

import "time"

// How a server trace was put on the client's clock.
const (
	// ClockSharedRealtime: the server runs on this host, so its capture
	// origin (CLOCK_REALTIME) and the round's start (CLOCK_REALTIME) are
	// readings of one clock. Everything after each reading is measured on
	// the host's one CLOCK_MONOTONIC, which NTP slews together with
	// CLOCK_REALTIME, so their difference moves only when the wall clock
	// is stepped. The error is the time between the two clock reads inside
	// each time.Now (tens of ns), bounded here by sharedRealtimeErrorS.
	ClockSharedRealtime = "shared_realtime"
	// ClockRoundTripMidpoint: a server elsewhere (or a wall-clock step
	// caught by the check below). The origin was taken while the server
	// handled POST /start_profile, so it lies inside the client's round
	// trip; the midpoint is off by at most half of it.
	ClockRoundTripMidpoint = "round_trip_midpoint"
)

// sharedRealtimeErrorS bounds the shared-clock error: two pairs of clock
// reads (wall, then monotonic) of a few tens of ns each.
const sharedRealtimeErrorS = 1e-6

// Probe is one control request's round trip on the client's clock, in
// seconds after the round's start: when it was sent and when its answer
// came back. The server did what it was asked somewhere in between.
type Probe struct{ SentS, AnsweredS float64 }

// ProbeOf measures a probe against the round's start; both times carry
// Go's monotonic reading, so the difference is monotonic.
func ProbeOf(roundStart, sent, answered time.Time) Probe {
	return Probe{SentS: sent.Sub(roundStart).Seconds(), AnsweredS: answered.Sub(roundStart).Seconds()}
}

// Clock places a server trace on a round's clock: trace time t is
// OriginS + t seconds after the round's start, within ErrorS.
type Clock struct {
	OriginS float64
	Method  string
	ErrorS  float64
}

// Align finds where a capture's origin falls on the round's clock.
//
// sameHost: the server was launched on this machine, so the wall-clock
// difference (origin − round start, both CLOCK_REALTIME) is used directly,
// provided it falls inside the start probe (a wall-clock step between the
// two reads would put it outside; then the midpoint is used). Otherwise
// the origin is the start probe's midpoint.
//
// The stop probe checks the far end: the capture stopped durationS after
// its origin, at an instant inside the stop probe. Any distance between
// OriginS + durationS and that probe is a clock-rate difference between
// the hosts (or an error) and is added to ErrorS, which then holds for
// the whole round.
func Align(sameHost bool, roundStart, origin time.Time, start, stop Probe, durationS float64) Clock {
	// origin has no monotonic reading, so Sub compares wall clocks.
	wallS := origin.Sub(roundStart).Seconds()
	c := Clock{OriginS: (start.SentS + start.AnsweredS) / 2, Method: ClockRoundTripMidpoint,
		ErrorS: (start.AnsweredS - start.SentS) / 2}
	if sameHost && wallS >= start.SentS && wallS <= start.AnsweredS {
		c = Clock{OriginS: wallS, Method: ClockSharedRealtime, ErrorS: sharedRealtimeErrorS}
	}
	end := c.OriginS + durationS
	c.ErrorS += max(0, stop.SentS-end, end-stop.AnsweredS)
	return c
}
