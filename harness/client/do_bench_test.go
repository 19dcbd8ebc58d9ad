package client

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkDo streams a 32-token completion shaped like roseinfer's (token
// ids, continuous usage) from a local server; allocs and bytes per request
// are what the harness's GC has to collect during a replay.
//
//	go test -run - -bench Do -benchmem ./harness/client
func BenchmarkDo(b *testing.B) {
	var stream strings.Builder
	for i := 1; i <= 32; i++ {
		fin := "null"
		if i == 32 {
			fin = `"length"`
		}
		fmt.Fprintf(&stream, `data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"gpt2","choices":[{"index":0,"text":" tok","token_ids":[%d],"finish_reason":%s}],"usage":{"prompt_tokens":16,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", 100+i, fin, i, 16+i)
	}
	stream.WriteString("data: [DONE]\n\n")
	body := stream.String()
	srv, _ := streamServer(b, http.StatusOK, []write{{data: body}})
	c := New(Options{BaseURL: srv.URL})
	defer c.Close()
	req := []byte(`{"prompt":[1,2,3],"max_tokens":32,"stream":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if res := c.Do(context.Background(), Completions, req); res.Err != nil || res.NumTokens() != 32 {
			b.Fatalf("%v, %d tokens", res.Err, res.NumTokens())
		}
	}
}
