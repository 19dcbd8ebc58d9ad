package arch

import "strings"

// PlainChat is the chat format of a family without a template of its own
// (GPT-2 has none): one "Role: content" line per message, then, with
// opts.AddGenerationPrompt, "Assistant:" for the model to continue. It has
// no thinking switch and ignores opts.EnableThinking and reasoning_content.
func PlainChat(msgs []ChatMessage, opts ChatOptions) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(roleTitle(m.Role))
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	if opts.AddGenerationPrompt {
		b.WriteString("Assistant:")
	}
	return b.String(), nil
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
