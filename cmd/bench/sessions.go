package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/workload"
)

// sessionFlags are the synthetic-session flags; each needs --sessions.
var sessionFlags = []string{"turns", "think-time-s", "session-rate", "session-input-len", "session-turn-input-len",
	"session-output-len"}

// registerSessionFlags adds bench online's session flags to cmd.
func registerSessionFlags(cmd *cobra.Command, o *workload.Options) {
	f := cmd.Flags()
	s := &o.Sessions
	s.NumTurns, s.ThinkTimeS, s.RatePerS = 2, 1, 1
	s.InputLen, s.TurnInputLen, s.OutputLen = 256, 32, 32
	f.IntVar(&s.NumSessions, "sessions", 0, "replay N synthetic conversations instead of a trace (0 = off): "+
		"each turn's prompt is the previous prompt, its answer and new input (docs/sessions.md)")
	f.IntVar(&s.NumTurns, "turns", s.NumTurns, "--sessions: requests per conversation")
	f.Float64Var(&s.ThinkTimeS, "think-time-s", s.ThinkTimeS, "--sessions: seconds from an answer to the next turn (× scale)")
	f.Float64Var(&s.RatePerS, "session-rate", s.RatePerS, "--sessions: conversations started per second, evenly spaced (÷ scale; 0 = all at once)")
	f.IntVar(&s.InputLen, "session-input-len", s.InputLen, "--sessions: first prompt tokens")
	f.IntVar(&s.TurnInputLen, "session-turn-input-len", s.TurnInputLen, "--sessions: new tokens each later turn adds")
	f.IntVar(&s.OutputLen, "session-output-len", s.OutputLen, "--sessions: max_tokens of every turn")
	f.BoolVar(&o.IndependentTurns, "independent-turns", false, "send a trace's (or --sessions') later turns as independent requests at their timestamps, not after the previous answer")
}

// checkSessionFlags rejects a session flag given without --sessions.
func checkSessionFlags(cmd *cobra.Command, o *workload.Options) error {
	if o.Sessions.NumSessions != 0 {
		return nil
	}
	for _, name := range sessionFlags {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s needs --sessions N", name)
		}
	}
	return nil
}
