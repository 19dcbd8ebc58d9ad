package client

import (
	"bytes"
	"slices"
	"testing"
)

// parseChunk parses in place: what it returns must not change when the
// event buffer is reused for the next event.
func TestParseChunkOwnsItsStrings(t *testing.T) {
	for _, tc := range []struct {
		json                string
		text, finish, error string
	}{
		{`{"choices":[{"text":"hello","finish_reason":"length"}]}`, "hello", "length", ""},
		{`{"choices":[{"delta":{"content":"hi\u00e9"},"finish_reason":"eos_token"}]}`, "hié", "eos_token", ""},
		{`{"error":{"message":"bad things"}}`, "", "", "bad things"},
		{`{"error":{"code":3}}`, "", "", `{"code":3}`},
		{`{"object":"error","message":"flat"}`, "", "", "flat"},
		{`{"error":"plain"}`, "", "", "plain"},
	} {
		data := []byte(tc.json)
		c, err := parseChunk(data)
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		copy(data, bytes.Repeat([]byte{'#'}, len(data)))
		if c.text != tc.text || c.finishReason != tc.finish || c.errMsg != tc.error {
			t.Errorf("%s: text %q finish %q error %q after the buffer was overwritten", tc.json, c.text, c.finishReason, c.errMsg)
		}
	}
}

func TestParseChunkCountsTokenIDs(t *testing.T) {
	for _, tc := range []struct {
		json string
		want int
	}{
		{`{"choices":[{"text":"a","token_ids":[5,6,7]}]}`, 3},
		{`{"choices":[{"text":"a","token_ids":[]}]}`, 0},
		{`{"choices":[{"text":"a","token_ids":null}]}`, -1},
		{`{"choices":[{"text":"a"}]}`, -1},
	} {
		c, err := parseChunk([]byte(tc.json))
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if c.tokenIDs != tc.want {
			t.Errorf("%s: %d token ids, want %d", tc.json, c.tokenIDs, tc.want)
		}
	}
}

func TestParseChunkCachedTokens(t *testing.T) {
	for _, tc := range []struct {
		json string
		want int
	}{
		// vLLM's and roseinfer's final usage.
		{`{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":32}}}`, 32},
		{`{"choices":[],"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":0}}}`, 0},
		{`{"choices":[],"usage":{"prompt_tokens":40,"prompt_tokens_details":null}}`, -1},
		{`{"choices":[],"usage":{"prompt_tokens":40}}`, -1},
	} {
		c, err := parseChunk([]byte(tc.json))
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if c.usageCached != tc.want {
			t.Errorf("%s: cached %d, want %d", tc.json, c.usageCached, tc.want)
		}
	}
}

func TestAppendTokenIDs(t *testing.T) {
	got := appendTokenIDs([]int32{1}, []byte(`{"choices":[{"text":"a","token_ids":[50256,0,7]}]}`))
	got = appendTokenIDs(got, []byte(`{"choices":[{"text":"b"}]}`))
	if !slices.Equal(got, []int32{1, 50256, 0, 7}) {
		t.Errorf("ids %v", got)
	}
}
