package traces

import (
	"errors"
	"fmt"
	"math"
)

// Parents links each row to the row whose answer it continues: parents[i]
// is the index in rows of row i's parent, or -1 for a first turn, a row
// without conversation fields, or a turn whose parent is not among rows (cut
// off by --n, say). Rows must be sorted by time (as Parse leaves them), so a
// parent always comes before its child (Parse checks it).
func Parents(rows []Row) []int {
	byID := make(map[int64]int, len(rows))
	for i, r := range rows {
		if r.HasChat && r.ChatID >= 0 {
			byID[r.ChatID] = i
		}
	}
	parents := make([]int, len(rows))
	for i, r := range rows {
		parents[i] = -1
		if !r.HasChat || r.ParentChatID < 0 {
			continue
		}
		if j, ok := byID[r.ParentChatID]; ok && j < i {
			parents[i] = j
		}
	}
	return parents
}

// HasSessions reports whether any row continues another one's conversation.
func HasSessions(rows []Row) bool {
	for _, p := range Parents(rows) {
		if p >= 0 {
			return true
		}
	}
	return false
}

// FormatSessions names a synthetic session trace (SyntheticSessions); it is
// generated, never read from a file.
const FormatSessions Format = "sessions"

// SessionOptions describe synthetic conversations (bench online --sessions).
type SessionOptions struct {
	NumSessions int     // --sessions
	NumTurns    int     // --turns: requests per session
	ThinkTimeS  float64 // --think-time-s: from a turn's answer to the next turn
	// RatePerS (--session-rate) starts sessions at evenly spaced instants,
	// i / RatePerS seconds; 0 starts them all at once.
	RatePerS     float64
	InputLen     int // --session-input-len: the first turn's prompt tokens
	TurnInputLen int // --session-turn-input-len: new tokens each later turn adds
	OutputLen    int // --session-output-len: tokens each answer asks for
}

// Validate names the first flag that cannot work.
func (o SessionOptions) Validate() error {
	switch {
	case o.NumSessions < 1:
		return fmt.Errorf("--sessions %d: need at least one session", o.NumSessions)
	case o.NumTurns < 1:
		return fmt.Errorf("--turns %d: need at least one turn", o.NumTurns)
	case !(o.ThinkTimeS >= 0) || math.IsInf(o.ThinkTimeS, 0):
		return fmt.Errorf("--think-time-s %v: want a finite number of seconds >= 0", o.ThinkTimeS)
	case !(o.RatePerS >= 0) || math.IsInf(o.RatePerS, 0):
		return fmt.Errorf("--session-rate %v: want a finite rate >= 0 (0 starts every session at once)", o.RatePerS)
	case o.InputLen < 1:
		return fmt.Errorf("--session-input-len %d: need at least one token", o.InputLen)
	case o.TurnInputLen < 1:
		return fmt.Errorf("--session-turn-input-len %d: need at least one token", o.TurnInputLen)
	case o.OutputLen < 1:
		return fmt.Errorf("--session-output-len %d: need at least one token", o.OutputLen)
	}
	return nil
}

// LastPromptLen is the prompt length of a session's last turn: the first
// prompt, then each earlier answer and each later turn's new input.
func (o SessionOptions) LastPromptLen() int {
	return o.InputLen + (o.NumTurns-1)*(o.OutputLen+o.TurnInputLen)
}

// SyntheticSessions writes synthetic conversations as a trace, in the
// Qwen-Bailian convention: a turn's input_length counts its whole prompt
// (the history and its new input), and turn k+1's timestamp is turn k's
// plus the think time, the gap a session replay waits after turn k's answer.
// Session s, turn k (both 0-based) is chat id s·turns + k.
func SyntheticSessions(o SessionOptions) (*Trace, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.NumSessions > math.MaxInt32/o.NumTurns {
		return nil, errors.New("--sessions × --turns is too large")
	}
	rows := make([]Row, 0, o.NumSessions*o.NumTurns)
	for s := range o.NumSessions {
		start := 0.0
		if o.RatePerS > 0 {
			start = float64(s) / o.RatePerS
		}
		for k := range o.NumTurns {
			id := int64(s*o.NumTurns + k)
			rows = append(rows, Row{
				Index:        len(rows),
				TimestampS:   start + float64(k)*o.ThinkTimeS,
				InputLen:     o.InputLen + k*(o.OutputLen+o.TurnInputLen),
				OutputLen:    o.OutputLen,
				HasChat:      true,
				ChatID:       id,
				ParentChatID: id - 1,
				Turn:         k + 1,
			})
			if k == 0 {
				rows[len(rows)-1].ParentChatID = -1
			}
		}
	}
	sortRows(rows)
	name := fmt.Sprintf("synthetic sessions: %d × %d turns", o.NumSessions, o.NumTurns)
	return &Trace{Name: name, Format: FormatSessions, Rows: rows}, nil
}
