package qwen3

import (
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

func str(s string) *string { return &s }

// TestRender holds Render to strings derived by hand from the template in
// tokenizer_config.json; golden_test.go checks the same against
// transformers on many more conversations.
func TestRender(t *testing.T) {
	user := func(c string) arch.ChatMessage { return arch.ChatMessage{Role: "user", Content: c} }
	asst := func(c string) arch.ChatMessage { return arch.ChatMessage{Role: "assistant", Content: c} }
	think := Options{AddGenerationPrompt: true, EnableThinking: true}
	noThink := Options{AddGenerationPrompt: true}
	tests := []struct {
		name string
		msgs []arch.ChatMessage
		opts Options
		want string
	}{
		{"system first goes before the loop", []arch.ChatMessage{{Role: "system", Content: "S"}, user("Q")}, think,
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"},
		{"enable_thinking false opens an empty think block", []arch.ChatMessage{user("Q")}, noThink,
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"no generation prompt", []arch.ChatMessage{user("Q")}, Options{EnableThinking: true},
			"<|im_start|>user\nQ<|im_end|>\n"},
		// Reasoning before the last user query is dropped.
		{"history reasoning dropped", []arch.ChatMessage{user("a"), asst("<think>\nr\n</think>\n\n21"), user("b")},
			think, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n21<|im_end|>\n" +
				"<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n"},
		// After the last query the reasoning stays, stripped of newlines.
		{"last turn keeps reasoning", []arch.ChatMessage{user("a"), asst("<think>\n\nr\n</think>\n\n\n21")}, noThink,
			"<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\n21<|im_end|>\n" +
				"<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		// The last turn gets an empty think block even without reasoning.
		{"last turn without reasoning", []arch.ChatMessage{user("a"), asst("21")}, think,
			"<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n21<|im_end|>\n" +
				"<|im_start|>assistant\n"},
		// A turn after the query that is neither last nor reasoning is plain.
		{"middle turn without reasoning", []arch.ChatMessage{user("a"), asst("x"), asst("<think>r</think>y")}, think,
			"<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nx<|im_end|>\n" +
				"<|im_start|>assistant\n<think>\nr\n</think>\n\ny<|im_end|>\n<|im_start|>assistant\n"},
		// reasoning_content "" is present: the content is not split.
		{"empty reasoning_content", []arch.ChatMessage{user("a"),
			{Role: "assistant", Content: "<think>k</think>y", ReasoningContent: str("")}}, think,
			"<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<think>k</think>y" +
				"<|im_end|>\n<|im_start|>assistant\n"},
		{"reasoning_content", []arch.ChatMessage{user("a"),
			{Role: "assistant", Content: "\ny", ReasoningContent: str("\nr\n")}, user("b")}, think,
			"<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n\ny<|im_end|>\n" +
				"<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n"},
		// A user turn shaped as a tool response is not a query.
		{"tool-response-shaped user", []arch.ChatMessage{user("a"), asst("<think>r</think>x"),
			user("<tool_response>t</tool_response>")}, think,
			"<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n" +
				"<|im_start|>user\n<tool_response>t</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{"developer is system", []arch.ChatMessage{{Role: "developer", Content: "D"}, user("Q"),
			{Role: "developer", Content: "E"}}, think,
			"<|im_start|>system\nD<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>system\nE<|im_end|>\n" +
				"<|im_start|>assistant\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.msgs, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("\n got: %q\nwant: %q", got, tt.want)
			}
		})
	}
}

func TestRenderRejectsUnknownRole(t *testing.T) {
	_, err := Render([]arch.ChatMessage{{Role: "user", Content: "a"}, {Role: "tool", Content: "b"}},
		Options{AddGenerationPrompt: true, EnableThinking: true})
	if err == nil || !strings.Contains(err.Error(), `messages[1]: role "tool"`) {
		t.Errorf("got %v", err)
	}
}

func TestRenderLeavesMessagesAlone(t *testing.T) {
	msgs := []arch.ChatMessage{{Role: "developer", Content: "D"}, {Role: "user", Content: "Q"}}
	if _, err := Render(msgs, Options{}); err != nil {
		t.Fatal(err)
	}
	if msgs[0].Role != "developer" {
		t.Errorf("Render renamed the caller's message: %+v", msgs[0])
	}
}
