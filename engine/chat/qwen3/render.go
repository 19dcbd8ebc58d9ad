// Package qwen3 renders a chat conversation as the prompt Qwen3 models were
// trained on: the behaviour of the Jinja "chat_template" of Qwen3's
// tokenizer_config.json (engine/tokenizer/data/qwen3; TemplateSHA256),
// written out in Go.
//
// A formatter, not a Jinja engine. github.com/ardanlabs/jinja v1.8.0 (the
// newest that builds with our Go) was evaluated: it compiles the template,
// and its text equalled this formatter's on all 54 renderings of
// testdata/conversations.json (27 conversations, enable_thinking true and
// false), which equal transformers 5.17's (golden_test.go). We took the
// formatter anyway: no dependency and no template interpreter in the request
// path for one template whose behaviour fits on a screen, and the golden test
// holds it to transformers as it would a library. gonja/v2 was not tried
// once the first candidate proved the point. The cost: a checkpoint whose
// tokenizer_config.json carries another template (a later Qwen3 release) is
// still rendered this way; compare its template's hash with TemplateSHA256.
//
// What it covers: system, developer, user and assistant turns with string
// contents; assistant reasoning inside <think>...</think> in the content or
// in a reasoning_content field; the template's "last user query" rule (the
// reasoning of assistant turns after the last user query is kept, earlier
// reasoning is dropped); enable_thinking false. Tools, tool calls and tool
// turns are not rendered: the server rejects them before they get here.
//
// The template has no developer branch and would drop such a turn silently;
// roseinfer renders "developer" as "system" (OpenAI's developer role is the
// system message of newer models), so an instruction is never lost.
//
// It imports only engine/model/arch (for ChatMessage and ChatOptions); the
// family package (engine/model/qwen3) sets its Family.Chat to Render.
package qwen3

import (
	"fmt"
	"strings"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// TemplateSHA256 is the SHA-256 of the chat_template string (as UTF-8) that
// Render reproduces: Qwen3's, in engine/tokenizer/data/qwen3.
const TemplateSHA256 = "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"

// Options are the template's switches: add_generation_prompt and
// enable_thinking.
type Options = arch.ChatOptions

// Render returns the prompt text of msgs, byte for byte what Qwen3's
// chat_template renders with add_generation_prompt and enable_thinking as in
// opts. A role other than system, developer, user or assistant is an error.
func Render(msgs []arch.ChatMessage, opts Options) (string, error) {
	msgs, err := withSystemRoles(msgs)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if len(msgs) > 0 && msgs[0].Role == "system" {
		writeTurn(&b, "system", msgs[0].Content)
	}
	lastQuery := lastQueryIndex(msgs)
	for i, m := range msgs {
		switch {
		case m.Role == "user" || m.Role == "system" && i > 0:
			writeTurn(&b, m.Role, m.Content)
		case m.Role == "assistant":
			writeAssistant(&b, m, i > lastQuery, i == len(msgs)-1)
		}
	}
	if opts.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if !opts.EnableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}

// withSystemRoles checks every role and renames developer to system
// (copying msgs only when it must).
func withSystemRoles(msgs []arch.ChatMessage) ([]arch.ChatMessage, error) {
	out, isCopy := msgs, false
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		case "developer":
			if !isCopy { // never rename the caller's messages
				out, isCopy = append([]arch.ChatMessage(nil), msgs...), true
			}
			out[i].Role = "system"
		default:
			return nil, fmt.Errorf("qwen3 chat: messages[%d]: role %q is not supported "+
				"(system, developer, user, assistant)", i, m.Role)
		}
	}
	return out, nil
}

func writeTurn(b *strings.Builder, role, content string) {
	b.WriteString("<|im_start|>")
	b.WriteString(role)
	b.WriteByte('\n')
	b.WriteString(content)
	b.WriteString("<|im_end|>\n")
}

// lastQueryIndex is the template's ns.last_query_index: the index of the
// last user turn that is not a tool response (content wrapped in
// <tool_response>...</tool_response>), or the last index when there is none.
func lastQueryIndex(msgs []arch.ChatMessage) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		isToolResponse := strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")
		if msgs[i].Role == "user" && !isToolResponse {
			return i
		}
	}
	return len(msgs) - 1
}

// writeAssistant renders one assistant turn. Its reasoning is the
// reasoning_content field when present (even empty), else the text inside
// <think>...</think> of the content. It is shown only for turns after the
// last user query, and there only when the turn is the last one or has
// reasoning; elsewhere the turn is the answer alone.
func writeAssistant(b *strings.Builder, m arch.ChatMessage, isAfterQuery, isLast bool) {
	content, reasoning := m.Content, ""
	if m.ReasoningContent != nil {
		reasoning = *m.ReasoningContent
	} else if strings.Contains(content, "</think>") {
		// Python's split: [-1] is the text after the last "</think>", [0]
		// the text before the first; then after the last "<think>".
		beforeClose := content[:strings.Index(content, "</think>")]
		content = strings.TrimLeft(content[strings.LastIndex(content, "</think>")+len("</think>"):], "\n")
		beforeClose = strings.TrimRight(beforeClose, "\n")
		if j := strings.LastIndex(beforeClose, "<think>"); j >= 0 {
			beforeClose = beforeClose[j+len("<think>"):]
		}
		reasoning = strings.TrimLeft(beforeClose, "\n")
	}
	b.WriteString("<|im_start|>assistant\n")
	if isAfterQuery && (isLast || reasoning != "") {
		b.WriteString("<think>\n")
		b.WriteString(strings.Trim(reasoning, "\n"))
		b.WriteString("\n</think>\n\n")
		b.WriteString(strings.TrimLeft(content, "\n"))
	} else {
		b.WriteString(content)
	}
	b.WriteString("<|im_end|>\n")
}
