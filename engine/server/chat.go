package server

import (
	"bytes"
	"encoding/json"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// parseChatTemplateKwargs reads "chat_template_kwargs" as vLLM does: an
// object whose keys the template does not use are ignored, except
// "chat_template" and "tokenize", which vLLM rejects. enable_thinking must
// be a boolean (vLLM hands any JSON value to the template, where a string
// "false" would silently mean true); absent or null keeps the template's
// default, thinking on. The generation prompt is always added.
func parseChatTemplateKwargs(raw json.RawMessage) (arch.ChatOptions, *Error) {
	opts := arch.ChatOptions{AddGenerationPrompt: true, EnableThinking: true}
	if isNull(raw) {
		return opts, nil
	}
	var kwargs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &kwargs); err != nil {
		return opts, errInvalid("chat_template_kwargs", "invalid type for \"chat_template_kwargs\": expected an object")
	}
	for _, key := range []string{"chat_template", "tokenize"} {
		if _, ok := kwargs[key]; ok {
			return opts, errInvalid("chat_template_kwargs", "\"chat_template_kwargs\" must not set %q", key)
		}
	}
	if v := kwargs["enable_thinking"]; !isNull(v) {
		if err := json.Unmarshal(v, &opts.EnableThinking); err != nil {
			return opts, errInvalid("chat_template_kwargs",
				"invalid type for \"chat_template_kwargs.enable_thinking\": expected a boolean")
		}
	}
	return opts, nil
}

// isNullOrEmptyList reports whether a raw field is absent, null or [].
func isNullOrEmptyList(raw json.RawMessage) bool {
	if isNull(raw) {
		return true
	}
	return string(bytes.Join(bytes.Fields(raw), nil)) == "[]"
}
