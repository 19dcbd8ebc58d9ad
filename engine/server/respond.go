package server

import (
	"encoding/json"
	"net/http"
)

// Non-streaming response bodies. encoding/json is fine here: one marshal per
// request, not per token.

// response is the body both endpoints answer with; only the choice differs
// (text for /v1/completions, a message for /v1/chat/completions).
type response[C completionChoice | chatChoice] struct {
	ID           string        `json:"id"`
	Object       string        `json:"object"`
	Created      int64         `json:"created"`
	Model        string        `json:"model"`
	Choices      []C           `json:"choices"`
	Usage        usage         `json:"usage"`
	ServerTiming *serverTiming `json:"server_timing,omitempty"`
}

type completionChoice struct {
	Index        int           `json:"index"`
	Text         string        `json:"text"`
	Logprobs     *logprobsJSON `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
	StopReason   *string       `json:"stop_reason"`
	TokenIDs     []int32       `json:"token_ids"`
}

type logprobsJSON struct {
	Tokens        []string   `json:"tokens"`
	TokenLogprobs []*float32 `json:"token_logprobs"` // null for -Inf
	TopLogprobs   []any      `json:"top_logprobs"`   // always null: alternatives are not computed
	TextOffset    []int      `json:"text_offset"`
}

type chatChoice struct {
	Index   int `json:"index"`
	Message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	TokenIDs     []int32   `json:"token_ids"`
}

// respond waits for every choice and answers with one JSON body. It reports
// whether the client went away first.
func (x *exchange) respond() (clientGone bool) {
	if !x.collect(func(*choice) bool { return true }) {
		return true
	}
	for _, c := range x.choices {
		if e := failure(c); e != nil {
			x.s.fail(x.w, e)
			return false
		}
	}
	if x.chat {
		resp := newResponse[chatChoice](x, "chat.completion")
		for _, c := range x.choices {
			var ch chatChoice
			ch.Index, ch.FinishReason, ch.TokenIDs = c.index, c.finishReason(), c.tokenIDs
			ch.Message.Role, ch.Message.Content = "assistant", string(c.pending)
			resp.Choices = append(resp.Choices, ch)
		}
		writeJSON(x.w, http.StatusOK, resp)
		return false
	}
	resp := newResponse[completionChoice](x, "text_completion")
	for _, c := range x.choices {
		resp.Choices = append(resp.Choices, completionChoice{Index: c.index, Text: string(c.pending),
			Logprobs: c.logprobsJSON(), FinishReason: c.finishReason(), TokenIDs: c.tokenIDs})
	}
	writeJSON(x.w, http.StatusOK, resp)
	return false
}

// newResponse fills the envelope both endpoints share; the caller adds the
// choices.
func newResponse[C completionChoice | chatChoice](x *exchange, object string) response[C] {
	return response[C]{ID: x.id, Object: object, Created: x.created, Model: x.s.cfg.ModelName,
		Usage: x.usage(), ServerTiming: x.timing()}
}

func (c *choice) logprobsJSON() *logprobsJSON {
	if !c.wantLogprobs {
		return nil
	}
	lp := &logprobsJSON{Tokens: c.pieces, TextOffset: c.offsets, TokenLogprobs: make([]*float32, len(c.logprobs))}
	for i := range c.logprobs {
		if v := c.logprobs[i]; v == v && v > -maxFloat32 && v < maxFloat32 {
			lp.TokenLogprobs[i] = &c.logprobs[i]
		}
	}
	return lp
}

const maxFloat32 = 3.4028234663852886e38

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
