package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// completionRequest is the body of POST /v1/completions. Pointer fields tell
// "absent" from zero. Fields we do not know are ignored, as vLLM does.
type completionRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	MaxTokens *int            `json:"max_tokens"`
	Echo      bool            `json:"echo"`
	Suffix    *string         `json:"suffix"`
	Logprobs  *int            `json:"logprobs"`
	samplingFields
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"` // OpenAI's newer name; wins over max_tokens
	Logprobs            bool          `json:"logprobs"`
	TopLogprobs         *int          `json:"top_logprobs"`
	// ChatTemplateKwargs are vLLM's switches for the chat template; only
	// enable_thinking is read (chat.go).
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
	Tools              json.RawMessage `json:"tools"` // not supported: a 400 unless null or []
	samplingFields
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of {"type":"text","text":...} parts
	// ReasoningContent is an assistant turn's reasoning apart from its
	// content, as vLLM returns and accepts it; null is absent.
	ReasoningContent *string         `json:"reasoning_content"`
	ToolCalls        json.RawMessage `json:"tool_calls"` // not supported: a 400 unless null or []
}

// samplingFields are shared by both endpoints.
type samplingFields struct {
	Stream             bool               `json:"stream"`
	StreamOptions      *streamOptions     `json:"stream_options"`
	N                  *int               `json:"n"`
	BestOf             *int               `json:"best_of"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	TopK               *int               `json:"top_k"`
	Seed               *int64             `json:"seed"`
	Stop               json.RawMessage    `json:"stop"` // a string or a list of strings
	IgnoreEOS          bool               `json:"ignore_eos"`
	MinTokens          *int               `json:"min_tokens"`
	PresencePenalty    float64            `json:"presence_penalty"`
	FrequencyPenalty   float64            `json:"frequency_penalty"`
	LogitBias          map[string]float64 `json:"logit_bias"`
	UseBeamSearch      bool               `json:"use_beam_search"`
	ReturnServerTiming bool               `json:"return_server_timing"` // roseinfer extension
}

type streamOptions struct {
	IncludeUsage         *bool `json:"include_usage"` // default true once stream_options is present (vLLM)
	ContinuousUsageStats bool  `json:"continuous_usage_stats"`
}

// decodeJSON reads one JSON object from r into v and turns decoding failures
// into 400s that name the offending field.
func decodeJSON(r io.Reader, v any) *Error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errInvalid("", "invalid JSON: unexpected data after the request object")
	}
	return nil
}

func decodeError(err error) *Error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &typeErr):
		// encoding/json names fields of the embedded struct by its type.
		field := strings.TrimPrefix(typeErr.Field, "samplingFields.")
		if field == "" {
			return errInvalid("", "invalid JSON: the request body must be an object")
		}
		return errInvalid(field, "invalid type for %q: expected %s, got JSON %s", field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return errInvalid("", "invalid JSON: %s (at byte %d)", syntaxErr.Error(), syntaxErr.Offset)
	case errors.Is(err, io.EOF):
		return errInvalid("", "invalid JSON: empty request body")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errInvalid("", "invalid JSON: unexpected end of the request body")
	case errors.As(err, &tooBig):
		return errBodyTooLarge(tooBig.Limit)
	case isTimeout(err): // the body missed the server's read deadline
		return errReadTimeout
	}
	return errInvalid("", "invalid JSON: %s", err.Error())
}

func jsonTypeName(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "bool":
		return "a boolean"
	case goKind == "string":
		return "a string"
	case goKind == "slice":
		return "an array"
	case goKind == "struct", goKind == "map":
		return "an object"
	}
	return goKind
}

// isNull reports whether a raw field is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// parseStop decodes "stop": absent/null, one string, or a list of strings.
// Empty strings are dropped: they would match everywhere.
func parseStop(raw json.RawMessage) ([]string, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errInvalid("stop", "invalid type for \"stop\": expected a string or a list of strings")
	}
	if len(list) > maxStopStrings {
		return nil, errInvalid("stop", "at most %d stop strings are allowed, got %d", maxStopStrings, len(list))
	}
	out := list[:0]
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}
