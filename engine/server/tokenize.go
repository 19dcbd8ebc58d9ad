package server

import "net/http"

// POST /tokenize and POST /detokenize, with vLLM's request and response
// shapes. They use only the tokenizer, so they answer while the model is
// still loading. Like vLLM's, they are outside /v1 and so outside the API key
// (vLLM's --api-key middleware guards only paths under /v1).

// tokenizeRequest is the body of POST /tokenize: a prompt, or chat messages
// rendered by the model's chat format as /v1/chat/completions renders them.
// vLLM's other fields (add_special_tokens, ...) are ignored: Encode adds no
// BOS for either family, and unknown fields are ignored everywhere.
type tokenizeRequest struct {
	Model    string        `json:"model"`
	Prompt   *string       `json:"prompt"`
	Messages []chatMessage `json:"messages"`
}

type tokenizeResponse struct {
	Tokens      []int32 `json:"tokens"`
	Count       int     `json:"count"`
	MaxModelLen int     `json:"max_model_len"`
}

type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

type detokenizeResponse struct {
	Prompt string `json:"prompt"`
}

// handleTokenize serves POST /tokenize: {"model", "prompt"} or {"model",
// "messages"} → {"tokens", "count", "max_model_len"}. A prompt longer than
// the context is still tokenized (vLLM does the same): the count tells.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	e := decodeJSON(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), &req)
	doneReading(r)
	if e == nil {
		e = s.checkModel(req.Model)
	}
	var text string
	switch {
	case e != nil:
	case req.Prompt != nil && req.Messages != nil:
		e = errInvalid("prompt", "send either \"prompt\" or \"messages\", not both")
	case req.Prompt != nil:
		text = *req.Prompt
	case req.Messages != nil:
		msgs, me := parseChatMessages(req.Messages)
		if e = me; me == nil {
			// As /v1/chat/completions renders them by default: the
			// generation prompt added, thinking on.
			opts, _ := parseChatTemplateKwargs(nil)
			var err error
			if text, err = s.cfg.ChatFormat(msgs, opts); err != nil {
				e = errInvalid("messages", "%s", err.Error())
			}
		}
	default:
		e = errInvalid("prompt", "\"prompt\" (a string) or \"messages\" is required")
	}
	if e != nil {
		s.fail(w, e)
		return
	}
	ids := s.cfg.Tokenizer.Encode(text)
	writeJSON(w, http.StatusOK, tokenizeResponse{Tokens: ids, Count: len(ids), MaxModelLen: s.cfg.MaxModelLen})
}

// handleDetokenize serves POST /detokenize: {"model", "tokens"} → {"prompt"},
// the text of the ids with special tokens kept (HF decode's default, as vLLM).
// Every id must be inside the model's vocabulary.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var req detokenizeRequest
	e := decodeJSON(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), &req)
	doneReading(r)
	if e == nil {
		e = s.checkModel(req.Model)
	}
	if e == nil && req.Tokens == nil {
		e = errInvalid("tokens", "\"tokens\" (a list of token ids) is required")
	}
	ids := make([]int32, len(req.Tokens))
	for i, id := range req.Tokens {
		if e != nil {
			break
		}
		if id < 0 || id >= int64(s.cfg.VocabSize) {
			e = errInvalid("tokens", "token id %d at position %d is outside the vocabulary [0, %d)", id, i, s.cfg.VocabSize)
		}
		ids[i] = int32(id)
	}
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, detokenizeResponse{Prompt: s.cfg.Tokenizer.Decode(ids)})
}
