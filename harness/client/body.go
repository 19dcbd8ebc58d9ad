package client

import (
	"encoding/json"
	"fmt"
)

// Endpoint is the OpenAI route a request goes to.
type Endpoint int

const (
	Completions     Endpoint = iota // POST /v1/completions
	ChatCompletions                 // POST /v1/chat/completions
)

// Path is the route below the server root.
func (e Endpoint) Path() string {
	if e == ChatCompletions {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// Params is what one request asks for, independent of the server.
type Params struct {
	Model        string
	PromptTokens []int32 // sent as a token-id array unless the quirks say text
	PromptText   string  // text that round-trips to PromptTokens; used for chat and text-only servers
	MaxTokens    int
	Temperature  float64
	TopP         float64
	TopK         int
	IgnoreEOS    bool
	// Messages, when set, is the conversation sent to the chat endpoint in
	// place of one user message of PromptText (a session's later turn).
	Messages []ChatMessage
}

// Quirks are the per-server differences in the request body. The zero value
// is the plain OpenAI subset: text prompt, standard fields only.
type Quirks struct {
	Endpoint Endpoint
	// PromptAsTokenIDs sends "prompt": [ids...] (vLLM, SGLang, TRT-LLM,
	// roseinfer accept it); otherwise PromptText is sent.
	PromptAsTokenIDs bool
	// ExtraSampling sends the non-OpenAI fields top_k and ignore_eos (TRT-LLM's
	// strict request models reject unknown fields, so this is a switch).
	ExtraSampling bool
	// MinTokensEqualMax sends min_tokens = max_tokens so EOS cannot end a
	// request early when IgnoreEOS is set (exact output lengths).
	MinTokensEqualMax bool
	// IncludeUsage sends stream_options.include_usage (final usage chunk);
	// ContinuousUsage adds continuous_usage_stats (usage in every chunk,
	// which gives exact tokens per chunk).
	IncludeUsage    bool
	ContinuousUsage bool
	// ReturnTokenIDs asks for choices[].token_ids (vLLM's return_token_ids).
	ReturnTokenIDs bool
	// ServerTiming asks roseinfer for its per-request timestamps.
	ServerTiming bool
}

// Roseinfer is the request shape roseinfer's server understands fully.
var Roseinfer = Quirks{
	PromptAsTokenIDs: true,
	ExtraSampling:    true,
	IncludeUsage:     true,
	ContinuousUsage:  true,
	ServerTiming:     true,
}

type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats,omitempty"`
}

// ChatMessage is one message of a chat request.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// body is the JSON request; pointer fields are omitted when the quirks say so.
type body struct {
	Model              string         `json:"model"`
	Prompt             any            `json:"prompt,omitempty"`
	Messages           []ChatMessage  `json:"messages,omitempty"`
	MaxTokens          int            `json:"max_tokens"`
	Temperature        float64        `json:"temperature"`
	TopP               float64        `json:"top_p"`
	TopK               *int           `json:"top_k,omitempty"`
	IgnoreEOS          *bool          `json:"ignore_eos,omitempty"`
	MinTokens          *int           `json:"min_tokens,omitempty"`
	Stream             bool           `json:"stream"`
	StreamOptions      *streamOptions `json:"stream_options,omitempty"`
	ReturnTokenIDs     bool           `json:"return_token_ids,omitempty"`
	ReturnServerTiming bool           `json:"return_server_timing,omitempty"`
}

// BuildBody encodes one streaming request. Bodies are built before a replay
// starts so dispatch does no encoding work.
func BuildBody(p Params, q Quirks) ([]byte, error) {
	if p.MaxTokens < 1 {
		return nil, fmt.Errorf("max_tokens %d: must be at least 1", p.MaxTokens)
	}
	b := body{
		Model:          p.Model,
		MaxTokens:      p.MaxTokens,
		Temperature:    p.Temperature,
		TopP:           p.TopP,
		Stream:         true,
		ReturnTokenIDs: q.ReturnTokenIDs,
	}
	switch {
	case q.Endpoint == ChatCompletions && p.Messages != nil:
		b.Messages = p.Messages
	case q.Endpoint == ChatCompletions:
		b.Messages = []ChatMessage{{Role: "user", Content: p.PromptText}}
	case q.PromptAsTokenIDs:
		if len(p.PromptTokens) == 0 {
			return nil, fmt.Errorf("empty token-id prompt")
		}
		b.Prompt = p.PromptTokens
	default:
		b.Prompt = p.PromptText
	}
	if q.ExtraSampling {
		topK, ignore := p.TopK, p.IgnoreEOS
		b.TopK, b.IgnoreEOS = &topK, &ignore
	}
	if q.MinTokensEqualMax && p.IgnoreEOS {
		n := p.MaxTokens
		b.MinTokens = &n
	}
	if q.IncludeUsage || q.ContinuousUsage {
		b.StreamOptions = &streamOptions{IncludeUsage: true, ContinuousUsageStats: q.ContinuousUsage}
	}
	b.ReturnServerTiming = q.ServerTiming
	return json.Marshal(b)
}
