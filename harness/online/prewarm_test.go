package online

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
)

func TestPrewarmConnsMustNotBeNegative(t *testing.T) {
	o := DefaultOnline()
	o.Load.PrewarmConns = -1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--prewarm-conns -1") {
		t.Fatalf("Validate: %v, want an error naming --prewarm-conns", err)
	}
}

// TestOnlinePrewarmsEachRound: bench online against the sim device opens
// the round's connections before its first send (the log says how many),
// and with --prewarm-conns 0 the burst dials its own during the round,
// which the log reports.
func TestOnlinePrewarmsEachRound(t *testing.T) {
	for _, conns := range []int{DefaultPrewarmConns, 0} {
		o := simOptions(t, 2000)
		o.Workload.TracePath = backendtest.EvenBurstTrace(t, 16, 2000, 16, 20) // 16 requests within 8 ms, 40 ms each
		o.Workload.N = 16
		o.Load.PrewarmConns = conns
		var log bytes.Buffer
		o.Output.Log = &log
		rep, err := Online(context.Background(), context.Background(), o)
		loadCleanRun(t, rep, err)
		prewarmed := strings.Contains(log.String(), "prewarmed 16 connections (15 new)")
		dialled := strings.Contains(log.String(), "connections dialled during the round")
		if conns > 0 && (!prewarmed || dialled) || conns == 0 && (prewarmed || !dialled) {
			t.Errorf("--prewarm-conns %d: log:\n%s", conns, log.String())
		}
	}
}
