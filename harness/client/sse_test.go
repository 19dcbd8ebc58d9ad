package client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// A server that dies mid-stream (connection closed inside the chunked body)
// gives a stream_broken error and keeps the chunks received before.
func TestConnectionDropMidStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		ev := "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"completion_tokens\":1}}\n\n"
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		buf.WriteString(strconv.FormatInt(int64(len(ev)), 16) + "\r\n" + ev + "\r\n")
		buf.Flush()
	}))
	defer srv.Close()
	c := New(Options{BaseURL: srv.URL})
	res := c.Do(context.Background(), Completions, []byte(`{}`))
	if res.ErrKind != ErrStreamBroken {
		t.Fatalf("kind %q (%v), want %q", res.ErrKind, res.Err, ErrStreamBroken)
	}
	if len(res.Chunks) != 1 || res.Chunks[0].Tokens != 1 {
		t.Errorf("chunks %+v, want the one received", res.Chunks)
	}
}

func TestSSEReaderEvents(t *testing.T) {
	in := ": hi\n\ndata: a\ndata: b\n\nevent: x\ndata:{\"k\":1}\ndata: {\"k\":2}\n\ndata: [DONE]\n"
	r := newSSEReader(strings.NewReader(in))
	var got []string
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.data))
		if ev.done {
			break
		}
	}
	want := []string{"a\nb", `{"k":1}`, `{"k":2}`, "[DONE]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// FuzzSSEReader: any byte stream ends in a finite number of events without
// panicking, and every event is non-empty or the [DONE] marker.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data:x\r\ndata:y\r\n\r\n: c\nid: 1\n"))
	f.Add([]byte(strings.Repeat("d", 70<<10) + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newSSEReader(bufio.NewReader(strings.NewReader(string(in))))
		for i := 0; i <= len(in)+1; i++ {
			ev, err := r.next()
			if err != nil {
				return
			}
			if ev.done {
				return
			}
			if _, err := parseChunk(ev.data); err != nil {
				continue
			}
		}
		t.Fatalf("more events than input bytes")
	})
}
