package server

import (
	"strconv"
)

// chunkEncoder appends OpenAI streaming chunks to one reused buffer. Every
// chunk of a request starts with the same bytes (id, object, created, model),
// built once; the per-chunk part is appended by hand. Key order and null
// fields follow vLLM's compact JSON. Extensions (documented in
// docs/roseinfer-api.md): "token_ids" in every choice, "server_timing" in the
// last chunk.
type chunkEncoder struct {
	buf    []byte
	prefix []byte // `data: {"id":...,"choices":[`
	chat   bool
}

func newChunkEncoder(id string, created int64, model string, chat bool) *chunkEncoder {
	e := &chunkEncoder{buf: make([]byte, 0, 1024), prefix: make([]byte, 0, 128)}
	e.reset(id, created, model, chat)
	return e
}

// reset prepares a pooled encoder for another request.
func (e *chunkEncoder) reset(id string, created int64, model string, chat bool) {
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	p := append(e.prefix[:0], `data: {"id":`...)
	p = appendJSONString(p, id)
	p = append(p, `,"object":"`...)
	p = append(p, object...)
	p = append(p, `","created":`...)
	p = strconv.AppendInt(p, created, 10)
	p = append(p, `,"model":`...)
	p = appendJSONString(p, model)
	p = append(p, `,"choices":[`...)
	e.prefix, e.buf, e.chat = p, e.buf[:0], chat
}

// usage is the OpenAI token accounting object.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is set in a request's final usage only (as vLLM
	// reports it): continuous per-chunk usage leaves it out.
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// promptTokensDetails is OpenAI's breakdown of the prompt tokens.
type promptTokensDetails struct {
	// CachedTokens are the prompt tokens whose KV the prefix cache supplied
	// at admission (whole blocks; never the prompt's last token).
	CachedTokens int `json:"cached_tokens"`
}

// chunkExtras are the optional top-level fields after "choices".
type chunkExtras struct {
	usage        *usage        // "usage": {...}
	usageNull    bool          // "usage": null (include_usage without continuous stats, as OpenAI)
	serverTiming *serverTiming // "server_timing": {...}
}

// appendChoiceChunk appends one chunk carrying what c has pending; finish is
// the finish_reason or "" (null).
func (e *chunkEncoder) appendChoiceChunk(c *choice, text []byte, finish string, x chunkExtras) {
	b := append(e.buf, e.prefix...)
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(c.index), 10)
	if e.chat {
		b = append(b, `,"delta":{`...)
		if len(text) > 0 || finish == "" {
			b = append(b, `"content":`...)
			b = appendJSONString(b, text)
		}
		b = append(b, `},"logprobs":null`...)
	} else {
		b = append(b, `,"text":`...)
		b = appendJSONString(b, text)
		b = append(b, `,"logprobs":`...)
		b = appendLogprobs(b, c)
	}
	b = append(b, `,"finish_reason":`...)
	b = appendNullableString(b, finish)
	b = append(b, `,"token_ids":`...)
	b = appendTokenIDs(b, c.tokenIDs)
	b = append(b, "}]"...)
	e.buf = appendExtras(b, x)
}

// appendRoleChunk appends the chat stream's first chunk, which announces the
// assistant role and carries no tokens (as OpenAI's does).
func (e *chunkEncoder) appendRoleChunk(index int) {
	b := append(e.buf, e.prefix...)
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"token_ids":[]}]`...)
	e.buf = appendExtras(b, chunkExtras{})
}

// appendUsageChunk appends the include_usage chunk: no choices, only usage.
func (e *chunkEncoder) appendUsageChunk(u usage, st *serverTiming) {
	b := append(e.buf, e.prefix...)
	b = append(b, ']')
	e.buf = appendExtras(b, chunkExtras{usage: &u, serverTiming: st})
}

// appendDone appends the end-of-stream marker.
func (e *chunkEncoder) appendDone() { e.buf = append(e.buf, "data: [DONE]\n\n"...) }

func appendExtras(b []byte, x chunkExtras) []byte {
	switch {
	case x.usage != nil:
		b = append(b, `,"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(x.usage.PromptTokens), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(x.usage.CompletionTokens), 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(x.usage.TotalTokens), 10)
		if d := x.usage.PromptTokensDetails; d != nil {
			b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
			b = strconv.AppendInt(b, int64(d.CachedTokens), 10)
			b = append(b, '}')
		}
		b = append(b, '}')
	case x.usageNull:
		b = append(b, `,"usage":null`...)
	}
	if x.serverTiming != nil {
		b = append(b, `,"server_timing":`...)
		b = x.serverTiming.appendJSON(b)
	}
	return append(b, "}\n\n"...)
}

func appendNullableString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

func appendTokenIDs(b []byte, ids []int32) []byte {
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return append(b, ']')
}

// appendLogprobs appends the completions API's logprobs object for the
// pending tokens, or null. top_logprobs is null: alternatives are not
// computed (docs/roseinfer-api.md).
func appendLogprobs(b []byte, c *choice) []byte {
	if !c.wantLogprobs {
		return append(b, "null"...)
	}
	b = append(b, `{"tokens":[`...)
	for i, p := range c.pieces {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, p)
	}
	b = append(b, `],"token_logprobs":[`...)
	for i, lp := range c.logprobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONFloat(b, lp)
	}
	b = append(b, `],"top_logprobs":null,"text_offset":[`...)
	for i, off := range c.offsets {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(off), 10)
	}
	return append(b, "]}"...)
}
