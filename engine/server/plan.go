package server

import (
	"math"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// plan is a validated request: what to submit to the engine and how to
// answer. Both endpoints reduce to it.
type plan struct {
	prompts         [][]int32 // one engine request (and one choice) per prompt
	maxTokens       []int     // per prompt
	minTokens       int
	ignoreEOS       bool
	params          sample.Params
	hasSeed         bool
	stops           []string
	stream          bool
	includeUsage    bool // a final usage chunk (choices: [])
	continuousUsage bool // usage in every chunk
	logprobs        bool // sampled tokens' log-probabilities
	serverTiming    bool
}

// Defaults where the client leaves a field out.
const (
	defaultCompletionMaxTokens = 16 // OpenAI's and vLLM's default for /v1/completions
	maxTemperature             = 100
)

func (s *Server) planCompletion(req *completionRequest) (*plan, *Error) {
	if e := s.checkModel(req.Model); e != nil {
		return nil, e
	}
	switch {
	case req.Echo:
		return nil, errUnsupported("echo", "\"echo\" is not supported")
	case req.Suffix != nil && *req.Suffix != "":
		return nil, errUnsupported("suffix", "\"suffix\" is not supported")
	case req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxLogprobs):
		return nil, errInvalid("logprobs", "\"logprobs\" must be between 0 and %d", maxLogprobs)
	}
	p, e := planSampling(&req.samplingFields, s.cfg.VocabSize)
	if e != nil {
		return nil, e
	}
	p.logprobs = req.Logprobs != nil
	if p.prompts, e = s.parsePrompt(req.Prompt); e != nil {
		return nil, e
	}
	if p.serverTiming && len(p.prompts) > 1 {
		return nil, errInvalid("return_server_timing", "\"return_server_timing\" needs a single prompt")
	}
	maxTokens := defaultCompletionMaxTokens
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	return p, s.fitContext(p, func(int) int { return maxTokens }, req.MaxTokens == nil)
}

func (s *Server) planChat(req *chatRequest) (*plan, *Error) {
	if e := s.checkModel(req.Model); e != nil {
		return nil, e
	}
	switch {
	case req.Logprobs:
		return nil, errUnsupported("logprobs", "\"logprobs\" is not supported on chat completions")
	case req.TopLogprobs != nil && *req.TopLogprobs > 0:
		return nil, errUnsupported("top_logprobs", "\"top_logprobs\" is not supported")
	}
	p, e := planSampling(&req.samplingFields, s.cfg.VocabSize)
	if e != nil {
		return nil, e
	}
	if !isNullOrEmptyList(req.Tools) {
		return nil, errUnsupported("tools", "\"tools\" is not supported")
	}
	msgs, e := parseChatMessages(req.Messages)
	if e != nil {
		return nil, e
	}
	opts, e := parseChatTemplateKwargs(req.ChatTemplateKwargs)
	if e != nil {
		return nil, e
	}
	text, err := s.cfg.ChatFormat(msgs, opts)
	if err != nil {
		return nil, errInvalid("messages", "%s", err.Error())
	}
	ids, e := s.encodePrompt(text)
	if e != nil {
		e.Param = "messages"
		return nil, e
	}
	p.prompts = [][]int32{ids}
	limit := req.MaxCompletionTokens
	if limit == nil {
		limit = req.MaxTokens
	}
	// Without a limit a chat reply may fill the rest of the context, as in vLLM.
	maxTokens := func(numPromptTokens int) int { return s.cfg.MaxModelLen - numPromptTokens }
	if limit != nil {
		maxTokens = func(int) int { return *limit }
	}
	return p, s.fitContext(p, maxTokens, limit == nil)
}

// fitContext sets each prompt's max_tokens and checks that prompt and
// generation fit the model's context.
func (s *Server) fitContext(p *plan, maxTokensFor func(numPromptTokens int) int, isDefault bool) *Error {
	p.maxTokens = make([]int, len(p.prompts))
	for i, prompt := range p.prompts {
		n := maxTokensFor(len(prompt))
		if n < 1 && !isDefault {
			return errInvalid("max_tokens", "\"max_tokens\" must be at least 1, got %d", n)
		}
		// n is the client's and may be near 2^63: compare it with the room
		// left, never add it to the prompt length (that wraps negative and
		// lets the request through to allocations sized by it).
		if numFree := s.cfg.MaxModelLen - len(prompt); max(n, 1) > numFree {
			return errContextLength(len(prompt), max(n, 1), s.cfg.MaxModelLen)
		}
		if p.minTokens > n {
			return errInvalid("min_tokens", "\"min_tokens\" (%d) must not exceed max_tokens (%d)", p.minTokens, n)
		}
		p.maxTokens[i] = n
	}
	return nil
}

func (s *Server) checkModel(model string) *Error {
	// An absent model means the one we serve, as in vLLM; a wrong one is a
	// 404 as in OpenAI.
	if model != "" && model != s.cfg.ModelName {
		return errModelNotFound(model)
	}
	return nil
}

// planSampling validates the fields both endpoints share.
func planSampling(f *samplingFields, vocabSize int) (*plan, *Error) {
	p := &plan{
		stream:       f.Stream,
		ignoreEOS:    f.IgnoreEOS,
		serverTiming: f.ReturnServerTiming,
		params:       sample.Params{Temperature: 1, TopK: -1, TopP: 1},
	}
	switch {
	case f.N != nil && *f.N < 1:
		return nil, errInvalid("n", "\"n\" must be at least 1, got %d", *f.N)
	case f.N != nil && *f.N > 1:
		return nil, errUnsupported("n", "\"n\" > 1 is not supported; send the request several times")
	case f.BestOf != nil && *f.BestOf != 1:
		return nil, errUnsupported("best_of", "\"best_of\" other than 1 is not supported")
	case f.UseBeamSearch:
		return nil, errUnsupported("use_beam_search", "beam search is not supported")
	case f.PresencePenalty != 0:
		return nil, errUnsupported("presence_penalty", "\"presence_penalty\" is not supported")
	case f.FrequencyPenalty != 0:
		return nil, errUnsupported("frequency_penalty", "\"frequency_penalty\" is not supported")
	case len(f.LogitBias) > 0:
		return nil, errUnsupported("logit_bias", "\"logit_bias\" is not supported")
	case f.StreamOptions != nil && !f.Stream:
		return nil, errInvalid("stream_options", "\"stream_options\" is only allowed with \"stream\": true")
	}
	if e := planParams(f, p, vocabSize); e != nil {
		return nil, e
	}
	if f.MinTokens != nil {
		if *f.MinTokens < 0 {
			return nil, errInvalid("min_tokens", "\"min_tokens\" must be >= 0, got %d", *f.MinTokens)
		}
		p.minTokens = *f.MinTokens
	}
	if o := f.StreamOptions; o != nil {
		p.includeUsage = o.IncludeUsage == nil || *o.IncludeUsage
		p.continuousUsage = o.ContinuousUsageStats
	}
	var e *Error
	p.stops, e = parseStop(f.Stop)
	return p, e
}

func planParams(f *samplingFields, p *plan, vocabSize int) *Error {
	if t := f.Temperature; t != nil {
		if *t < 0 || *t > maxTemperature {
			return errInvalid("temperature", "\"temperature\" must be between 0 and %d, got %g", maxTemperature, *t)
		}
		p.params.Temperature = float32(*t)
	}
	if tp := f.TopP; tp != nil {
		if !(*tp > 0 && *tp <= 1) {
			return errInvalid("top_p", "\"top_p\" must be in (0, 1], got %g", *tp)
		}
		// A positive top_p below float32's range must stay positive.
		p.params.TopP = max(float32(*tp), math.SmallestNonzeroFloat32)
	}
	if k := f.TopK; k != nil {
		if *k < -1 {
			return errInvalid("top_k", "\"top_k\" must be -1 (off), 0 (off) or positive, got %d", *k)
		}
		p.params.TopK = *k
		// A top_k of the vocabulary or more keeps every token, as off does.
		// It is stored as off because the CUDA device narrows it to int32
		// (device/cuda/plan.go): 2^32+1 would wrap to 1, i.e. greedy.
		if *k >= vocabSize {
			p.params.TopK = -1
		}
	}
	if f.Seed != nil {
		p.params.Seed, p.hasSeed = uint64(*f.Seed), true
	}
	return nil
}

// engineRequest builds the i-th prompt's engine request.
func (p *plan) engineRequest(i int) *engine.Request {
	return &engine.Request{
		PromptTokens: p.prompts[i],
		Params:       p.params,
		HasSeed:      p.hasSeed,
		MaxTokens:    p.maxTokens[i],
		MinTokens:    p.minTokens,
		IgnoreEOS:    p.ignoreEOS,
		WantLogprobs: p.logprobs,
	}
}
