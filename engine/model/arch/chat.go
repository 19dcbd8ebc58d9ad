package arch

import "strings"

// PlainChat is the chat format of a family without a template of its own
// (GPT-2 has none): one "Role: content" line per message, then "Assistant:"
// for the model to continue.
func PlainChat(msgs []ChatMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(roleTitle(m.Role))
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	b.WriteString("Assistant:")
	return b.String()
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
