package workload

import (
	"fmt"
	"slices"

	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/traces"
)

// sessions is a workload's conversation structure, by row: which row each
// later turn continues and what it adds. A session replay sends a later
// turn after the answer to the turn it continues, with that turn's prompt,
// its answer and the new input as its prompt (Conversations).
type sessions struct {
	parent   []int     // the row this one continues; -1 for a first turn
	turn     []int     // 1-based turn number in the replay
	gapS     []float64 // later turns: trace seconds from the parent's timestamp to this turn's
	newInput [][]int32 // later turns: the tokens the turn adds after its history
	// numDropped counts later turns left out because their history (with
	// every earlier answer at its full length) would outgrow the context,
	// and the turns after them.
	numDropped int
}

// planSessions decides each later turn's lengths and drops the turns that
// cannot fit. raw are the trace's rows, clamped the same rows after
// Context.ClampRows. A first turn keeps its clamped lengths. A later turn's
// new input is what its trace input adds to its parent's input and output
// (at least one token, at most --max-input-len), its planned prompt the
// parent's planned prompt, the parent's output and the new input; its output
// is shrunk to fit the context, and the turn is dropped (with its own later
// turns) when not even one output token fits. Planned prompts are upper
// bounds: an answer that ends early makes the next prompt shorter.
// It returns the kept rows, the structure over them and each kept row's new
// input length (0 for first turns).
func planSessions(raw, clamped []traces.Row, ctx traces.Context) ([]traces.Row, *sessions, []int) {
	parents := traces.Parents(raw)
	eff := ctx.Effective()
	planned := make([]int, len(raw)) // planned prompt length
	outLen := make([]int, len(raw))
	newLen := make([]int, len(raw))
	dropped := make([]bool, len(raw))
	numDropped := 0
	for i, r := range clamped {
		p := parents[i]
		outLen[i] = r.OutputLen
		if p < 0 {
			planned[i] = r.InputLen
			continue
		}
		if dropped[p] {
			dropped[i] = true
			numDropped++
			continue
		}
		n := max(1, raw[i].InputLen-raw[p].InputLen-raw[p].OutputLen)
		if ctx.MaxInputLen > 0 {
			n = min(n, ctx.MaxInputLen)
		}
		planned[i], newLen[i] = planned[p]+outLen[p]+n, n
		if planned[i] >= eff {
			dropped[i] = true
			numDropped++
			continue
		}
		outLen[i] = min(outLen[i], eff-planned[i])
	}
	s := &sessions{numDropped: numDropped}
	var kept []traces.Row
	var keptNew []int
	newIndex := make([]int, len(raw))
	for i, r := range clamped {
		if dropped[i] {
			continue
		}
		newIndex[i] = len(kept)
		r.OutputLen = outLen[i]
		kept = append(kept, r)
		keptNew = append(keptNew, newLen[i])
		p, turn, gap := parents[i], 1, 0.0
		if p >= 0 {
			p, turn, gap = newIndex[p], s.turn[newIndex[p]]+1, r.TimestampS-raw[parents[i]].TimestampS
		}
		s.parent, s.turn, s.gapS = append(s.parent, p), append(s.turn, turn), append(s.gapS, gap)
	}
	return kept, s, keptNew
}

// sharedPrefixes gives each prompt the length of its longest prefix shared
// with an earlier prompt of the list (by token id), or -1 where skip says so
// (such a prompt is not compared either). Among sorted prompts, the one
// sharing the longest prefix with p sits next to p's place, so each prompt
// costs a binary search and two comparisons.
func sharedPrefixes(prompts [][]int32, skip func(i int) bool) []int {
	out := make([]int, len(prompts))
	var sorted [][]int32
	for i, p := range prompts {
		if skip(i) {
			out[i] = -1
			continue
		}
		k, _ := slices.BinarySearchFunc(sorted, p, slices.Compare[[]int32])
		best := 0
		if k > 0 {
			best = commonPrefix(sorted[k-1], p)
		}
		if k < len(sorted) {
			best = max(best, commonPrefix(sorted[k], p))
		}
		out[i] = best
		sorted = slices.Insert(sorted, k, p)
	}
	return out
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// HasSessions reports whether the workload replays conversations: a trace
// with later turns (unless --independent-turns) or --sessions.
func (w *Workload) HasSessions() bool { return w.sessions != nil }

// NumDroppedTurns counts the later turns a session replay leaves out
// because their history outgrows the context.
func (w *Workload) NumDroppedTurns() int {
	if w.sessions == nil {
		return 0
	}
	return w.sessions.numDropped
}

// Conversations builds the later turns of one session replay (a backend,
// a scale, a round): a turn's prompt is the prompt of the turn it continues,
// that turn's answer as it arrived and the turn's new input, in the shape
// the backend takes — token ids, text, or chat messages — so every earlier
// prompt is an exact prefix of the later one and a prefix cache can hit.
type Conversations struct {
	w     *Workload
	o     *Options
	model string
	q     client.Quirks
	// prompts are the prompts sent, by row, set when known: a first turn's
	// when a turn continuing it is built (on the first turn's goroutine),
	// a later turn's when it is built. Each is written once, before any
	// turn continuing it is sent.
	prompts []*sessionPrompt
}

// sessionPrompt is one turn's prompt in the shape its request carried.
type sessionPrompt struct {
	ids       []int32              // token-id completions
	text      string               // text completions
	messages  []client.ChatMessage // chat
	numTokens int                  // prompt tokens as the harness counts them
}

// Conversations starts one session replay for a backend of request shape q
// (o.Quirks applied) serving model.
func (w *Workload) Conversations(o *Options, model string, q client.Quirks) *Conversations {
	return &Conversations{w: w, o: o, model: model, q: q, prompts: make([]*sessionPrompt, len(w.rows))}
}

// Follow builds row i's request from the result of the turn it continues
// (replay.FollowFunc). The answer is taken as the server sent it: its token
// ids when listed (else the text, tokenized with the prompts' tokenizer),
// its text for text and chat prompts. A failed turn contributes what
// arrived of its answer, perhaps nothing.
func (c *Conversations) Follow(i int, prev *client.Result) (replay.FollowUp, error) {
	p := c.w.sessions.parent[i]
	if p < 0 {
		return replay.FollowUp{}, fmt.Errorf("trace row %d: not a later turn", c.w.rows[i].Index)
	}
	pp, err := c.prompt(p)
	if err != nil {
		return replay.FollowUp{}, err
	}
	answerIDs := prev.TokenIDs
	if len(answerIDs) == 0 && prev.NumTokens() > 0 {
		answerIDs = c.w.encode(prev.Text())
	}
	newInput := c.w.sessions.newInput[i]
	np := &sessionPrompt{numTokens: pp.numTokens + len(answerIDs) + len(newInput)}
	switch {
	case c.q.Endpoint == client.ChatCompletions:
		np.messages = append(slices.Clip(pp.messages),
			client.ChatMessage{Role: "assistant", Content: prev.Text()},
			client.ChatMessage{Role: "user", Content: c.w.decode(newInput)})
	case c.q.PromptAsTokenIDs:
		np.ids = slices.Concat(pp.ids, answerIDs, newInput)
	default:
		np.text = pp.text + prev.Text() + c.w.decode(newInput)
	}
	c.prompts[i] = np
	params := c.o.params(c.model, c.w.rows[i].OutputLen)
	params.PromptTokens, params.PromptText, params.Messages = np.ids, np.text, np.messages
	body, err := client.BuildBody(params, c.q)
	if err != nil {
		return replay.FollowUp{}, fmt.Errorf("trace row %d: %w", c.w.rows[i].Index, err)
	}
	return replay.FollowUp{Body: body, InputLen: np.numTokens, ImpliedTokens: pp.numTokens + len(answerIDs)}, nil
}

// prompt is row i's prompt as sent: a later turn's as Follow built it, a
// first turn's rebuilt from its ids as its body was.
func (c *Conversations) prompt(i int) (*sessionPrompt, error) {
	if sp := c.prompts[i]; sp != nil {
		return sp, nil
	}
	ids := c.w.prompts[i]
	sp := &sessionPrompt{ids: ids, numTokens: len(ids)}
	if c.q.Endpoint == client.ChatCompletions || !c.q.PromptAsTokenIDs {
		text, err := c.w.textOf(ids)
		if err != nil {
			return nil, err
		}
		sp.text, sp.messages = text, []client.ChatMessage{{Role: "user", Content: text}}
	}
	c.prompts[i] = sp
	return sp, nil
}
