package server

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cpu"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// TestChatTemplateKwargs sends chat_template_kwargs over HTTP to the real
// server: the family's chat format receives enable_thinking (true unless
// the request says false) and always the generation prompt; unknown keys
// are ignored as in vLLM; GPT-2's plain format renders the same prompt
// whatever the switch says. Wrong types are 400s (errors_test.go).
func TestChatTemplateKwargs(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []arch.ChatOptions
	)
	recording := func(msgs []arch.ChatMessage, opts arch.ChatOptions) (string, error) {
		mu.Lock()
		seen = append(seen, opts)
		mu.Unlock()
		return arch.PlainChat(msgs, opts)
	}
	eng := newFakeEngine(t, script)
	s := startServer(t, eng, func(c *Config) { c.ChatFormat = recording })
	tok := testTokenizer(t)
	wantPrompt := tok.Encode("User: Hi\nAssistant:")
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	tests := []struct {
		name, kwargs       string
		wantEnableThinking bool
	}{
		{"absent", ``, true},
		{"null", `"chat_template_kwargs":null,`, true},
		{"empty", `"chat_template_kwargs":{},`, true},
		{"false", `"chat_template_kwargs":{"enable_thinking":false},`, false},
		{"true", `"chat_template_kwargs":{"enable_thinking":true},`, true},
		{"enable_thinking null", `"chat_template_kwargs":{"enable_thinking":null},`, true},
		{"unknown key ignored", `"chat_template_kwargs":{"enable_thinking":false,"custom":[1]},`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			resp, body := post(t, s, "/v1/chat/completions", `{"max_tokens":3,`+tt.kwargs+msgs+`}`)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			mu.Lock()
			got := slices.Clone(seen)
			mu.Unlock()
			want := arch.ChatOptions{AddGenerationPrompt: true, EnableThinking: tt.wantEnableThinking}
			if len(got) != 1 || got[0] != want {
				t.Errorf("chat format got options %+v, want one %+v", got, want)
			}
			if p := eng.lastRequest().PromptTokens; !slices.Equal(p, wantPrompt) {
				t.Errorf("plain chat prompt %q", tok.Decode(p))
			}
		})
	}
}

// TestChatReasoningContent: an assistant turn's reasoning_content reaches
// the chat format (nil when absent or null); a format's error is a 400 on
// "messages".
func TestChatReasoningContent(t *testing.T) {
	var got []arch.ChatMessage
	var mu sync.Mutex
	format := func(msgs []arch.ChatMessage, opts arch.ChatOptions) (string, error) {
		mu.Lock()
		got = slices.Clone(msgs)
		mu.Unlock()
		if msgs[0].Content == "unrenderable" {
			return "", errTestFormat
		}
		return arch.PlainChat(msgs, opts)
	}
	s := startServer(t, newFakeEngine(t, script), func(c *Config) { c.ChatFormat = format })
	resp, body := post(t, s, "/v1/chat/completions", `{"max_tokens":3,"messages":[{"role":"user","content":"q"},`+
		`{"role":"assistant","content":"a","reasoning_content":"r"},{"role":"assistant","content":"b",`+
		`"reasoning_content":null},{"role":"user","content":"q2"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	mu.Lock()
	msgs := got
	mu.Unlock()
	if len(msgs) != 4 || msgs[1].ReasoningContent == nil || *msgs[1].ReasoningContent != "r" ||
		msgs[0].ReasoningContent != nil || msgs[2].ReasoningContent != nil {
		t.Errorf("messages reached the format as %+v", msgs)
	}
	resp, body = post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"unrenderable"}]}`)
	checkErrorBody(t, resp, body, 400, "messages", "")
}

var errTestFormat = errors.New("the format cannot render this")

// TestChatTemplateKwargsGPT2 runs the built-in tiny GPT-2 on the CPU device
// behind the real server, with the server's own chat format (GPT-2's plain
// one): chat_template_kwargs is accepted and a wrong type is a 400.
func TestChatTemplateKwargsGPT2(t *testing.T) {
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitRandom(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	engCfg := engine.Config{NumBlocks: 64, BlockSizeTokens: engine.DefaultBlockSizeTokens,
		MaxModelLen: w.Config.MaxSeqLen, EOSToken: w.Config.EOSTokenID}
	dev, err := cpu.New(w, device.KVConfig{NumBlocks: engCfg.NumBlocks, BlockSizeTokens: engCfg.BlockSizeTokens},
		cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engCfg, dev)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, FromEngine(eng))
	t.Cleanup(func() { _ = eng.Close() }) // runs after the server's Close
	for _, body := range []string{
		`{"max_tokens":2,"chat_template_kwargs":{"enable_thinking":false},"messages":[{"role":"user","content":"Hi"}]}`,
		`{"max_tokens":2,"stream":true,"chat_template_kwargs":{"enable_thinking":true,"other":1},` +
			`"messages":[{"role":"user","content":"Hi"}]}`,
	} {
		if resp, out := post(t, s, "/v1/chat/completions", body); resp.StatusCode != 200 {
			t.Errorf("%s: status %d: %s", body, resp.StatusCode, out)
		}
	}
	resp, out := post(t, s, "/v1/chat/completions",
		`{"chat_template_kwargs":{"enable_thinking":"yes"},"messages":[{"role":"user","content":"Hi"}]}`)
	checkErrorBody(t, resp, out, 400, "chat_template_kwargs", "")
}
