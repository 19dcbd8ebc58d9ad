package workload

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/traces"
)

func qwenSample(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs("../../traces/testdata/qwen_sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// The Qwen sample's chat 1003 continues 1001: its input of 70 tokens is
// 1001's 40 input and 12 output tokens and 18 new ones.
func TestLoadQwenSessions(t *testing.T) {
	o := &Options{TracePath: qwenSample(t), PromptOverheadTokens: 8, Seed: 42, PrefixMode: "base"}
	w, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	if !w.HasSessions() || w.NumRows() != 4 || w.NumDroppedTurns() != 0 {
		t.Fatalf("sessions %v, rows %d, dropped %d", w.HasSessions(), w.NumRows(), w.NumDroppedTurns())
	}
	// Sorted rows: 1002, 1001, 1003, 1004.
	s := w.sessions
	if !slices.Equal(s.parent, []int{-1, -1, 1, -1}) || !slices.Equal(s.turn, []int{1, 1, 2, 1}) ||
		s.gapS[2] != 2.25 || len(s.newInput[2]) != 18 || s.newInput[0] != nil {
		t.Errorf("sessions %+v", s)
	}
	items, err := w.Items(make([][]byte, 4), 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tu := items[2].Session; tu == nil || tu.Parent != 1 || tu.Number != 2 || tu.GapS != 1.125 ||
		items[2].ImpliedTokens != nil {
		t.Errorf("later turn item %+v %+v", items[2], tu)
	}
	// Base prompts are prefixes of one sequence: a first prompt shares all of
	// itself or all of the shorter earlier one.
	if *items[0].ImpliedTokens != 0 || *items[1].ImpliedTokens != 16 || *items[3].ImpliedTokens != 33 {
		t.Errorf("implied %d %d %d", *items[0].ImpliedTokens, *items[1].ImpliedTokens, *items[3].ImpliedTokens)
	}

	// --independent-turns: four independent requests, as before sessions.
	o.IndependentTurns = true
	if w, err = Load(o); err != nil {
		t.Fatal(err)
	}
	if w.HasSessions() || *mustItems(t, w)[2].ImpliedTokens != 40 {
		t.Errorf("independent turns: sessions %v", w.HasSessions())
	}

	// A context too small for 1003's history drops it: 40 + 12 + 18 tokens
	// of prompt leave no room for output in an effective context of 70.
	o.IndependentTurns, o.ModelMaxLen = false, 70+8+1
	if w, err = Load(o); err != nil {
		t.Fatal(err)
	}
	if w.NumRows() != 3 || w.NumDroppedTurns() != 1 || w.HasSessions() != true {
		t.Errorf("rows %d, dropped %d", w.NumRows(), w.NumDroppedTurns())
	}
	// One token more: it stays, its output shrunk to the one token that fits.
	o.ModelMaxLen = 71 + 8 + 1
	if w, err = Load(o); err != nil {
		t.Fatal(err)
	}
	if w.NumRows() != 4 || w.rows[2].OutputLen != 1 {
		t.Errorf("rows %d, output %d", w.NumRows(), w.rows[2].OutputLen)
	}
}

func mustItems(t *testing.T, w *Workload) []replay.Item {
	t.Helper()
	items, err := w.Items(make([][]byte, w.NumRows()), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func TestSharedPrefixes(t *testing.T) {
	prompts := [][]int32{{1, 2, 3}, {1, 2, 4, 5}, {9}, {1, 2, 3, 7}, {1, 2, 4}, {2}, {1, 2, 3}}
	skip := func(i int) bool { return i == 2 }
	want := []int{0, 2, -1, 3, 3, 0, 3}
	if got := sharedPrefixes(prompts, skip); !slices.Equal(got, want) {
		t.Errorf("shared %v, want %v", got, want)
	}
}

func TestLoadSyntheticSessions(t *testing.T) {
	o := &Options{PromptOverheadTokens: 8, Seed: 42, PrefixMode: "base",
		Sessions: traces.SessionOptions{NumSessions: 3, NumTurns: 3, ThinkTimeS: 1, RatePerS: 2, InputLen: 64,
			TurnInputLen: 8, OutputLen: 16}}
	w, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	if !w.HasSessions() || w.NumRows() != 9 || w.Trace().Format != traces.FormatSessions {
		t.Fatalf("sessions %v rows %d format %q", w.HasSessions(), w.NumRows(), w.Trace().Format)
	}
	for i, r := range w.rows {
		if w.sessions.parent[i] < 0 {
			// Every conversation opens with a prompt of its own.
			if w.implied[i] != 0 || len(w.prompts[i]) != 64 {
				t.Errorf("first turn %d: shares %d tokens, %d long", i, w.implied[i], len(w.prompts[i]))
			}
			continue
		}
		if len(w.sessions.newInput[i]) != 8 || r.OutputLen != 16 || w.sessions.gapS[i] != 1 {
			t.Errorf("turn %d: new %d, out %d, gap %v", i, len(w.sessions.newInput[i]), r.OutputLen, w.sessions.gapS[i])
		}
	}

	o.TracePath = qwenSample(t)
	if _, err := Load(o); err == nil || !strings.Contains(err.Error(), "--sessions") {
		t.Errorf("--sessions with --trace: %v", err)
	}
	o.TracePath = ""
	o.Sessions.NumTurns = 20 // 64 + 19·24 = 520 prompt tokens
	o.ModelMaxLen = 512
	if _, err := Load(o); err == nil || !strings.Contains(err.Error(), "520 prompt tokens") {
		t.Errorf("sessions longer than the context: %v", err)
	}
	o.Sessions.NumTurns = 0
	if _, err := Load(o); err == nil || !strings.HasPrefix(err.Error(), "--turns") {
		t.Errorf("--turns 0: %v", err)
	}
}

// Follow builds a later turn's prompt as the earlier prompt, the answer as
// it arrived and the new input, in each request shape.
func TestConversationsFollow(t *testing.T) {
	o := &Options{PromptOverheadTokens: 8, Seed: 42, Temperature: 0.5, TopP: 1,
		Sessions: traces.SessionOptions{NumSessions: 1, NumTurns: 3, InputLen: 20, TurnInputLen: 5, OutputLen: 4}}
	w, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(ids []int32, text string) *client.Result {
		// A chunk carries at least one token (a text-only server: its count).
		return &client.Result{TokenIDs: ids, Chunks: []client.Chunk{{Tokens: max(1, len(ids)), Text: text}}}
	}
	tok, err := w.tokenizer()
	if err != nil {
		t.Fatal(err)
	}

	// Token ids (roseinfer, vLLM, ...).
	c := w.Conversations(o, "m", client.Roseinfer)
	fu, err := c.Follow(1, answer([]int32{7, 8, 9, 10}, " a b"))
	if err != nil {
		t.Fatal(err)
	}
	first := w.prompts[0]
	want := slices.Concat(first, []int32{7, 8, 9, 10}, w.sessions.newInput[1])
	var body struct {
		Prompt    []int32 `json:"prompt"`
		MaxTokens int     `json:"max_tokens"`
		Messages  []client.ChatMessage
	}
	if err := json.Unmarshal(fu.Body, &body); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(body.Prompt, want) || body.MaxTokens != 4 || fu.InputLen != 29 || fu.ImpliedTokens != 24 {
		t.Errorf("turn 2: prompt %v (want %v), max_tokens %d, input %d, implied %d", body.Prompt, want,
			body.MaxTokens, fu.InputLen, fu.ImpliedTokens)
	}
	// Turn 3 builds on turn 2's prompt; an answer without ids is tokenized.
	fu, err = c.Follow(2, answer(nil, " hello world"))
	if err != nil {
		t.Fatal(err)
	}
	body.Prompt = nil
	json.Unmarshal(fu.Body, &body)
	words := tok.Encode(" hello world")
	want = slices.Concat(want, words, w.sessions.newInput[2])
	if !slices.Equal(body.Prompt, want) || fu.ImpliedTokens != 29+len(words) {
		t.Errorf("turn 3: prompt %v, want %v; implied %d", body.Prompt, want, fu.ImpliedTokens)
	}
	// A first turn is not built.
	if _, err := c.Follow(0, answer(nil, "")); err == nil {
		t.Error("Follow(first turn) succeeded")
	}

	// Chat: the conversation as messages.
	chat := client.Roseinfer
	chat.Endpoint = client.ChatCompletions
	c = w.Conversations(o, "m", chat)
	if fu, err = c.Follow(1, answer([]int32{7}, " yes")); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(fu.Body, &body)
	wantMsgs := []client.ChatMessage{{Role: "user", Content: tok.Decode(first)}, {Role: "assistant", Content: " yes"},
		{Role: "user", Content: tok.Decode(w.sessions.newInput[1])}}
	if !slices.Equal(body.Messages, wantMsgs) {
		t.Errorf("chat messages %+v, want %+v", body.Messages, wantMsgs)
	}

	// Text completions: the earlier text, the answer's text, the new text.
	c = w.Conversations(o, "m", client.Quirks{})
	if fu, err = c.Follow(1, answer([]int32{7}, " yes")); err != nil {
		t.Fatal(err)
	}
	var textBody struct{ Prompt string }
	json.Unmarshal(fu.Body, &textBody)
	if wantText := tok.Decode(first) + " yes" + tok.Decode(w.sessions.newInput[1]); textBody.Prompt != wantText {
		t.Errorf("text prompt %q, want %q", textBody.Prompt, wantText)
	}
}

// Poisson arrivals (bench capacity --rate-mode) cannot time a later turn,
// which follows its answer: a session replay refuses them, and the same
// trace with --independent-turns takes them.
func TestPoissonArrivalsSessions(t *testing.T) {
	o := &Options{TracePath: qwenSample(t), PromptOverheadTokens: 8, Seed: 42, PrefixMode: "base", Arrivals: "poisson"}
	if _, err := Load(o); err == nil || !strings.Contains(err.Error(), "--independent-turns") {
		t.Errorf("poisson arrivals with sessions: %v", err)
	}
	o.IndependentTurns = true
	w, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	if w.HasSessions() || w.NumRows() != 4 || traces.MeanRate(w.rows) < 0.999 || traces.MeanRate(w.rows) > 1.001 {
		t.Errorf("independent turns: sessions %v, rows %d, mean rate %v", w.HasSessions(), w.NumRows(), traces.MeanRate(w.rows))
	}
}
