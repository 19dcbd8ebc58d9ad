package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// TestQwen3ChatGoldenIDs encodes the 54 rendered Qwen3 conversations of the
// chat template's golden fixture (engine/chat/qwen3/testdata, made by
// transformers' apply_chat_template with tokenize=True, HF tokenizers 0.23)
// and compares the ids, special tokens, CJK, emoji and <think> blocks
// included; each ids list decodes back to its text.
func TestQwen3ChatGoldenIDs(t *testing.T) {
	data, err := os.ReadFile("../chat/qwen3/testdata/chat_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Cases []struct {
			Name           string  `json:"name"`
			EnableThinking bool    `json:"enable_thinking"`
			Text           string  `json:"text"`
			IDs            []int32 `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &fixture); err != nil {
		t.Fatal(err)
	}
	if len(fixture.Cases) < 40 {
		t.Fatalf("chat_golden.json has %d cases", len(fixture.Cases))
	}
	tok, err := Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fixture.Cases {
		if len(c.IDs) == 0 {
			t.Fatalf("%s: no ids in the fixture", c.Name)
		}
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("%s (thinking %v): ids differ from HF's\n got %v\nwant %v", c.Name, c.EnableThinking, got, c.IDs)
		}
		if got := tok.Decode(c.IDs); got != c.Text {
			t.Errorf("%s (thinking %v): decode %q, want %q", c.Name, c.EnableThinking, got, c.Text)
		}
	}
}
