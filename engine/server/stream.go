package server

import (
	"net/http"
	"sync"
)

// encoders keeps chunk buffers between requests: a streaming request then
// allocates nothing per token on the server side.
var encoders sync.Pool

func (x *exchange) getEncoder() *chunkEncoder {
	if e, _ := encoders.Get().(*chunkEncoder); e != nil {
		e.reset(x.id, x.created, x.s.cfg.ModelName, x.chat)
		return e
	}
	return newChunkEncoder(x.id, x.created, x.s.cfg.ModelName, x.chat)
}

// stream answers with server-sent events: one chunk per write and flush,
// each choice's final chunk with its finish_reason, then the optional usage
// chunk and "data: [DONE]". It reports whether the client went away.
func (x *exchange) stream() (clientGone bool) {
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	x.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(x.w)
	if rc.Flush() != nil {
		x.abortAll()
		return true
	}
	enc := x.getEncoder()
	defer encoders.Put(enc)
	write := func() bool {
		_, err := x.w.Write(enc.buf)
		enc.buf = enc.buf[:0]
		return err == nil && rc.Flush() == nil
	}

	var failed *Error
	emit := func(c *choice) bool {
		if x.chat && c.numChunks == 0 {
			enc.appendRoleChunk(c.index)
			if !write() {
				return false
			}
		}
		var extras chunkExtras
		if x.p.continuousUsage {
			extras.usage = &usage{PromptTokens: c.numPromptTokens, CompletionTokens: c.numTokens,
				TotalTokens: c.numPromptTokens + c.numTokens}
		} else if x.p.includeUsage {
			extras.usageNull = true
		}
		finish := ""
		if c.done {
			if e := failure(c); e != nil {
				failed = e
				return true // reported after the other choices, before [DONE]
			}
			finish = c.finishReason()
			if !x.p.includeUsage {
				extras.serverTiming = x.timing()
			}
		}
		enc.appendChoiceChunk(c, c.sendableText(), finish, extras)
		c.sent()
		c.numChunks++
		return write()
	}
	if !x.collect(emit) {
		return true
	}
	if failed != nil {
		enc.buf = appendErrorEvent(enc.buf, failed)
	} else if x.p.includeUsage {
		enc.appendUsageChunk(x.usage(), x.timing())
		if !write() {
			return true
		}
	}
	enc.appendDone()
	return !write()
}
