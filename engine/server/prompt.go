package server

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
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

func (s *Server) parsePromptList(raw json.RawMessage) ([][]int32, *Error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errInvalid("prompt", "invalid JSON in \"prompt\"")
	}
	if len(items) == 0 {
		return nil, errInvalid("prompt", "\"prompt\" must not be empty")
	}
	if first := items[0]; len(first) > 0 && (first[0] == '-' || first[0] >= '0' && first[0] <= '9') {
		ids, e := s.parseTokenIDs(raw)
		if e != nil {
			return nil, e
		}
		return [][]int32{ids}, nil
	}
	if len(items) > maxPromptsPerCall {
		return nil, errInvalid("prompt", "at most %d prompts per request, got %d", maxPromptsPerCall, len(items))
	}
	prompts := make([][]int32, 0, len(items))
	for _, item := range items {
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

func (s *Server) parseTokenIDs(raw json.RawMessage) ([]int32, *Error) {
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, errInvalid("prompt", "invalid token id list in \"prompt\": every id must be an integer")
	}
	if len(ids) == 0 {
		return nil, errInvalid("prompt", "the prompt must not be empty")
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= int64(s.cfg.VocabSize) {
			return nil, errInvalid("prompt", "token id %d at position %d is outside the vocabulary [0, %d)",
				id, i, s.cfg.VocabSize)
		}
		out[i] = int32(id)
	}
	return out, nil
}

// chatTemplate is the plain role-prefixed template used for models without
// their own (GPT-2 has none): one "Role: content" line per message, then
// "Assistant:" for the model to continue.
func chatTemplate(msgs []chatMessage, contents []string) string {
	var b strings.Builder
	for i, m := range msgs {
		b.WriteString(roleTitle(m.Role))
		b.WriteString(": ")
		b.WriteString(contents[i])
		b.WriteByte('\n')
	}
	b.WriteString("Assistant:")
	return b.String()
}

func roleTitle(role string) string {
	switch role {
	case "system", "developer":
		return "System"
	case "user":
		return "User"
	}
	return "Assistant"
}

// parseChatMessages validates the messages and returns each one's text.
func parseChatMessages(msgs []chatMessage) ([]string, *Error) {
	if len(msgs) == 0 {
		return nil, errInvalid("messages", "\"messages\" must be a non-empty list")
	}
	contents := make([]string, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		default:
			return nil, errInvalid("messages", "messages[%d]: unsupported role %q (system, developer, user, "+
				"assistant)", i, m.Role)
		}
		text, e := parseChatContent(m.Content)
		if e != nil {
			e.Message = "messages[" + strconv.Itoa(i) + "]: " + e.Message
			return nil, e
		}
		contents[i] = text
	}
	return contents, nil
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
