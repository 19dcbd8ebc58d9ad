package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/roseinfer/roseinfer/engine"
)

// Error is the one error type handlers return: an HTTP status and an
// OpenAI-style body. Message is shown to the client, so it never carries
// internal detail beyond what the client sent.
type Error struct {
	Status  int
	Message string
	Type    string // "invalid_request_error", "rate_limit_error", ...
	Param   string // the offending request field; "" = null
	Code    string // machine-readable code; "" = null
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// Error constructors, one per kind the API documents (docs/roseinfer-api.md).

func errInvalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param,
		Message: fmt.Sprintf(format, args...)}
}

func errUnsupported(param, format string, args ...any) *Error {
	e := errInvalid(param, format, args...)
	e.Code = "unsupported_parameter"
	return e
}

func errContextLength(numPromptTokens, maxTokens, maxModelLen int) *Error {
	e := errInvalid("max_tokens", "this model's maximum context length is %d tokens, but %d prompt tokens + "+
		"%d max_tokens were requested", maxModelLen, numPromptTokens, maxTokens)
	e.Code = "context_length_exceeded"
	return e
}

func errModelNotFound(model string) *Error {
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model",
		Code: "model_not_found", Message: fmt.Sprintf("the model %q does not exist", model)}
}

var (
	errOverloaded = &Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error",
		Code: "rate_limit_exceeded", Message: "too many pending requests; retry later"}
	errStarting = &Error{Status: http.StatusServiceUnavailable, Type: "service_unavailable_error",
		Code: "model_loading", Message: "the model is still loading; retry later"}
	errShuttingDown = &Error{Status: http.StatusServiceUnavailable, Type: "service_unavailable_error",
		Code: "shutting_down", Message: "the server is shutting down"}
	errEngineFailed = &Error{Status: http.StatusInternalServerError, Type: "server_error",
		Code: "engine_error", Message: "the engine failed while generating"}
	errInternal = &Error{Status: http.StatusInternalServerError, Type: "server_error",
		Message: "internal server error"}
	errNotFound = &Error{Status: http.StatusNotFound, Type: "invalid_request_error",
		Code: "not_found", Message: "no such route"}
	errMethod = &Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Code: "method_not_allowed", Message: "method not allowed"}
)

// retryAfterSeconds is sent with 429 and 503: long enough that a client
// backing off does not hammer the server, short next to a generation.
const retryAfterSeconds = 1

// fromSubmitError maps engine.Submit's errors to the API's.
func fromSubmitError(err error, numPromptTokens, maxTokens, maxModelLen int) *Error {
	switch {
	case errors.Is(err, engine.ErrOverloaded):
		return errOverloaded
	case errors.Is(err, engine.ErrTooLong):
		e := errContextLength(numPromptTokens, maxTokens, maxModelLen)
		if maxTokens <= maxModelLen-numPromptTokens { // fits the context, not the KV pool (never add: overflow)
			e.Message = fmt.Sprintf("%d prompt tokens + %d max_tokens need more KV cache than this server has",
				numPromptTokens, maxTokens)
		}
		return e
	case errors.Is(err, engine.ErrClosed):
		return errShuttingDown
	}
	return errInternal
}

// errorBody is the OpenAI error envelope. Param and Code are null when empty.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (e *Error) body() errorBody {
	var b errorBody
	b.Error.Message, b.Error.Type = e.Message, e.Type
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// writeError is the one place an error becomes a status and a body.
func writeError(w http.ResponseWriter, e *Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e.body())
}

// appendErrorEvent writes an error that happens after a stream began, the way
// vLLM does: as a data event, followed by [DONE] from the caller.
func appendErrorEvent(dst []byte, e *Error) []byte {
	b, _ := json.Marshal(e.body())
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}
