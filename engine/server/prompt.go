package server

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// Limits on a request's shape. Documented in docs/roseinfer-api.md.
const (
	maxStopStrings    = 4  // OpenAI's limit
	maxPromptsPerCall = 64 // a list of prompts becomes that many engine requests
	maxLogprobs       = 5  // OpenAI's limit for the completions API
)

// parsePrompt turns the completions "prompt" field into token-id prompts:
// a string, a list of token ids, a list of strings or a list of token-id
// lists. Every prompt must be non-empty and every id inside the vocabulary.
func (s *Server) parsePrompt(raw json.RawMessage) ([][]int32, *Error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, errInvalid("prompt", "\"prompt\" is required")
	}
	switch raw[0] {
	case '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, errInvalid("prompt", "invalid JSON string in \"prompt\"")
		}
		ids, e := s.encodePrompt(text)
		if e != nil {
			return nil, e
		}
		return [][]int32{ids}, nil
	case '[':
		return s.parsePromptList(raw)
	}
	return nil, errInvalid("prompt", "invalid type for \"prompt\": expected a string, a list of token ids, "+
		"or a list of either")
}

// parsePromptList reads a list prompt without unmarshalling it element by
// element: a token-id prompt of ~800 ids took ~0.4 ms through json.Unmarshal
// into []json.RawMessage and then []int64 (BenchmarkPlanTokenPrompt), most
// of a request's time before engine.Submit. raw is valid JSON (the body was
// decoded), so gjson only walks it.
func (s *Server) parsePromptList(raw json.RawMessage) ([][]int32, *Error) {
	list := gjson.ParseBytes(raw)
	if !list.IsArray() {
		return nil, errInvalid("prompt", "invalid JSON in \"prompt\"")
	}
	var first gjson.Result
	list.ForEach(func(_, v gjson.Result) bool { first = v; return false })
	if !first.Exists() {
		return nil, errInvalid("prompt", "\"prompt\" must not be empty")
	}
	if first.Type == gjson.Number {
		ids, e := s.parseTokenIDs(raw)
		if e != nil {
			return nil, e
		}
		return [][]int32{ids}, nil
	}
	items := list.Array()
	if len(items) > maxPromptsPerCall {
		return nil, errInvalid("prompt", "at most %d prompts per request, got %d", maxPromptsPerCall, len(items))
	}
	prompts := make([][]int32, 0, len(items))
	for _, v := range items {
		item := json.RawMessage(v.Raw)
		var (
			ids []int32
			e   *Error
		)
		switch {
		case len(item) > 0 && item[0] == '"':
			var text string
			if err := json.Unmarshal(item, &text); err != nil {
				return nil, errInvalid("prompt", "invalid JSON string in \"prompt\"")
			}
			ids, e = s.encodePrompt(text)
		case len(item) > 0 && item[0] == '[':
			ids, e = s.parseTokenIDs(item)
		default:
			e = errInvalid("prompt", "invalid type in \"prompt\" list: a list of prompts holds strings or "+
				"lists of token ids, not both and nothing else")
		}
		if e != nil {
			return nil, e
		}
		prompts = append(prompts, ids)
	}
	return prompts, nil
}

func (s *Server) encodePrompt(text string) ([]int32, *Error) {
	if text == "" {
		return nil, errInvalid("prompt", "the prompt must not be empty")
	}
	if len(text) > s.maxPromptBytes() {
		// Cheaper than tokenizing: GPT-2 BPE never yields fewer tokens than
		// bytes/maxBytesPerToken, so such a prompt cannot fit the context.
		return nil, errContextLength(len(text)/maxBytesPerToken, 0, s.cfg.MaxModelLen)
	}
	return s.cfg.Tokenizer.Encode(text), nil
}

// maxBytesPerToken bounds how many UTF-8 bytes one GPT-2 token can cover. The
// longest r50k token is 128 bytes; the check above only needs an upper bound.
const maxBytesPerToken = 128

func (s *Server) maxPromptBytes() int { return s.cfg.MaxModelLen * maxBytesPerToken }

// parseTokenIDs reads a JSON list of token ids (raw is valid JSON: the body
// was decoded) with a scanner of its own: gjson and encoding/json both
// parse every number as a float first, which is most of the cost of a
// long token-id prompt. Every element must be an integer inside the
// vocabulary.
func (s *Server) parseTokenIDs(raw json.RawMessage) ([]int32, *Error) {
	notInt := errInvalid("prompt", "invalid token id list in \"prompt\": every id must be an integer")
	i, n := 0, len(raw)
	skip := func() {
		for i < n && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
	}
	skip()
	if i == n || raw[i] != '[' {
		return nil, notInt
	}
	i++
	out := make([]int32, 0, len(raw)/4)
	for {
		skip()
		if i < n && raw[i] == ']' && len(out) == 0 {
			return nil, errInvalid("prompt", "the prompt must not be empty")
		}
		numStart := i
		neg := i < n && raw[i] == '-'
		if neg {
			i++
		}
		digits := i
		var id int64
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			if id < 1<<40 { // past any vocabulary: stop growing, the range check below rejects it
				id = id*10 + int64(raw[i]-'0')
			}
			i++
		}
		if i == digits || i < n && (raw[i] == '.' || raw[i] == 'e' || raw[i] == 'E') {
			return nil, notInt
		}
		if neg && id > 0 || id >= int64(s.cfg.VocabSize) { // -0 is 0, as JSON decoders read it
			return nil, errInvalid("prompt", "token id %s at position %d is outside the vocabulary [0, %d)",
				raw[numStart:i], len(out), s.cfg.VocabSize)
		}
		out = append(out, int32(id))
		skip()
		switch {
		case i < n && raw[i] == ',':
			i++
		case i < n && raw[i] == ']':
			return out, nil
		default:
			return nil, notInt
		}
	}
}

// parseChatMessages validates the messages and returns each one's role and
// text, for the model's chat format.
func parseChatMessages(msgs []chatMessage) ([]arch.ChatMessage, *Error) {
	if len(msgs) == 0 {
		return nil, errInvalid("messages", "\"messages\" must be a non-empty list")
	}
	parsed := make([]arch.ChatMessage, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		default:
			return nil, errInvalid("messages", "messages[%d]: unsupported role %q (system, developer, user, "+
				"assistant)", i, m.Role)
		}
		if !isNullOrEmptyList(m.ToolCalls) {
			return nil, errUnsupported("messages", "messages[%d]: \"tool_calls\" are not supported", i)
		}
		text, e := parseChatContent(m.Content)
		if e != nil {
			e.Message = "messages[" + strconv.Itoa(i) + "]: " + e.Message
			return nil, e
		}
		parsed[i] = arch.ChatMessage{Role: m.Role, Content: text, ReasoningContent: m.ReasoningContent}
	}
	return parsed, nil
}

// parseChatContent accepts a string or a list of text parts (concatenated).
func parseChatContent(raw json.RawMessage) (string, *Error) {
	if isNull(raw) {
		return "", nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errInvalid("messages", "content must be a string or a list of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", errUnsupported("messages", "only text content parts are supported, got type %q", p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}
