package client

import (
	"encoding/json"
	"fmt"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/roseinfer/roseinfer/results"
)

// chunk is what one streamed JSON object says, whatever server sent it.
type chunk struct {
	errMsg          string // non-empty: the server reported an error in-stream
	hasChoices      bool   // false: a usage-only (or otherwise empty) chunk
	text            string
	tokenIDs        int // len(choices[0].token_ids); -1 when absent
	usageCompletion int // usage.completion_tokens; -1 when absent
	usagePrompt     int // usage.prompt_tokens; -1 when absent
	usageCached     int // usage.prompt_tokens_details.cached_tokens; -1 when absent
	finishReason    string
	serverTiming    *results.ServerTiming
}

// parseChunk reads the fields the client needs. It tolerates every variant
// the supported servers send: null fields, unknown fields, chat-shaped
// chunks on /v1/completions, usage in content chunks or in a final chunk with
// "choices": [], nested or flat error objects.
//
// data is parsed in place, not copied (gjson.ParseBytes would copy every
// chunk, a third of the client's garbage): every string kept in the chunk
// is cloned, since data's buffer is reused for the next event.
func parseChunk(data []byte) (chunk, error) {
	if !gjson.ValidBytes(data) {
		return chunk{}, fmt.Errorf("invalid JSON in stream: %.200q", data)
	}
	root := gjson.Parse(unsafe.String(unsafe.SliceData(data), len(data)))
	c := chunk{tokenIDs: -1, usageCompletion: -1, usagePrompt: -1, usageCached: -1}
	if msg, isErr := streamError(root); isErr {
		c.errMsg = strings.Clone(msg)
		return c, nil
	}
	choice := root.Get("choices.0")
	if choice.Exists() {
		c.hasChoices = true
		if t := choice.Get("text"); t.Type == gjson.String {
			c.text = strings.Clone(t.String())
		} else if t := choice.Get("delta.content"); t.Type == gjson.String {
			c.text = strings.Clone(t.String())
		}
		if ids := choice.Get("token_ids"); ids.IsArray() {
			c.tokenIDs = 0
			ids.ForEach(func(_, _ gjson.Result) bool {
				c.tokenIDs++
				return true
			})
		}
		if fr := choice.Get("finish_reason"); fr.Type == gjson.String {
			c.finishReason = finishReason(fr.Str)
		}
	}
	usage := root.Get("usage")
	if usage.IsObject() {
		if v := usage.Get("completion_tokens"); v.Type == gjson.Number {
			c.usageCompletion = int(v.Int())
		}
		if v := usage.Get("prompt_tokens"); v.Type == gjson.Number {
			c.usagePrompt = int(v.Int())
		}
		if v := usage.Get("prompt_tokens_details.cached_tokens"); v.Type == gjson.Number {
			c.usageCached = int(v.Int())
		}
	}
	if st := root.Get("server_timing"); st.IsObject() {
		var t results.ServerTiming
		if err := json.Unmarshal([]byte(st.Raw), &t); err != nil {
			return c, fmt.Errorf("server_timing: %w", err)
		}
		c.serverTiming = &t
	}
	return c, nil
}

// appendTokenIDs appends the generated token ids a chunk lists
// (choices[0].token_ids) to dst. It parses the chunk a second time, so the
// client calls it only when asked to keep ids (Options.KeepTokenIDs).
func appendTokenIDs(dst []int32, data []byte) []int32 {
	ids := gjson.GetBytes(data, "choices.0.token_ids")
	ids.ForEach(func(_, id gjson.Result) bool {
		dst = append(dst, int32(id.Int()))
		return true
	})
	return dst
}

// finishReason returns a copy of s, without allocating for the usual values.
func finishReason(s string) string {
	for _, known := range []string{"length", "stop", "abort", "tool_calls", "content_filter"} {
		if s == known {
			return known
		}
	}
	return strings.Clone(s)
}

// streamError recognises {"error": {...}}, {"error": "text"} and the flat
// {"object": "error", "message": ...} shape.
func streamError(root gjson.Result) (string, bool) {
	if e := root.Get("error"); e.Exists() && e.Type != gjson.Null {
		if e.IsObject() {
			if m := e.Get("message"); m.Exists() {
				return m.String(), true
			}
			return e.Raw, true
		}
		return e.String(), true
	}
	if root.Get("object").String() == "error" {
		if m := root.Get("message"); m.Exists() {
			return m.String(), true
		}
		return root.Raw, true
	}
	return "", false
}
